"""Where max-autotune loses: the model's sites (layer and pass) whose kernels take longer
with autotune on than in its autotune-off twin, beyond noise (pure: two jobs' module rows in,
rows out; sweeper/analysis/attribution.py placed each kernel's time on the modules whose
code it computes).

A site is a layer: the parent of the modules a kernel computes (resnet50's `layer1.0` for
its `conv1`, `bn1`, `act1`, ...; the model's own top-level modules together as
"(model)"). Why not the module: a Triton template fuses the convolution's epilogue (its
batch norm, activation, residual add), and its time is then split over those modules by
their work, so module by module the convolution looks faster and its batch norm and
activation slower (resnet50 b64 inference on an H100: `layer1.0.act3` 0.013 -> 0.076 ms,
`layer1.1.conv1` 0.047 -> 0.011 ms) while the layer as a whole barely moved.

A site is compared by its kernels' time a step (the median profiled step's where the record
has it, so a preempted step does not decide), with what ran its matmuls and convolutions in
each twin: a Triton template max-autotune chose, or the library call (cuDNN, cuBLAS) it
kept or autotune off runs. Only sites where one of the two ran such a kernel are compared:
autotune changes nothing else directly. A site's change counts when it is beyond the
kernels' run-to-run noise under max-autotune (RERUN_DEVICE_PCT of the larger side) and at
least SITE_MIN_STEP_PCT of the off twin's kernel time a step (a 2-µs module moving 50% is
no finding). A site's own run-to-run noise can be wider than the job's: on an H100 (resnet50
b64 inference, each setting run twice) layer2's blocks moved 7.6 to 8.8% between two
autotune-off runs (the same Triton batch-norm kernels up to 37% apart: Triton chose another
of each kernel's two configs at its first launch) while the kernels' time moved 1.8% and the
median layer 0.4%; two max-autotune runs on the same choices moved 1.8% at most. A sweep
that repeats its twins (`seed=0,1`) holds each site against the spread its repeats showed
as well; without repeats the job-level figure is the floor, so a "slower" site near it may
still be a coin flip.

Each site also has what max-autotune's own benchmarks said of its ops, each choice alone
(alone_by_site: the decisions name the modules each op was lowered for): a slower site
whose choices beat the library calls there is a benchmark-only win. Not that the choice is
faster alone: re-timed outside max-autotune on an H100 (resnet50 b64, layer3.0), the chosen
templates took what max-autotune had timed (0.039 against 0.039 ms for conv1) but cuDNN ran
in 0.031 ms where max-autotune had timed it at 0.056 (docs/findings.md).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

from sweeper.analysis.autotune_verdict import RERUN_DEVICE_PCT, as_float
from sweeper.analysis.categories import LIBRARY, TRITON_TEMPLATE
from sweeper.analysis.module_rollup import block_of
from sweeper.analysis.repeats import spread_pct, widest

SITE_MIN_STEP_PCT = 0.5  # a site's change must be at least this share of the step's kernel time
CHOICES = (TRITON_TEMPLATE, LIBRARY)  # the categories an autotuned op runs as
SLOWER, FASTER = "slower", "faster"


def layer_of(module: object) -> str:
    """The layer a module's kernels are compared in: its parent ("layer1.0.conv1" ->
    "layer1.0"); the model's own top-level modules "(model)"."""
    return block_of(module, max(len(str(module).split(".")) - 1, 0))


def sites(rows: Iterable[Mapping]) -> dict[tuple[str, str], dict]:
    """(layer, pass) -> its kernels' time a step (typical where every row has it), the time
    of its Triton templates and its library matmuls/convolutions, and the source line of its
    costliest module."""
    rows = list(rows)
    typical = bool(rows) and all(r.get("typical_ms") is not None and r.get("typical_ms") == r.get("typical_ms")
                                 for r in rows)
    out: dict[tuple[str, str], dict] = defaultdict(lambda: {"ms": 0.0, TRITON_TEMPLATE: 0.0, LIBRARY: 0.0})
    costliest: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        ms = float(r["typical_ms"] if typical else r["device_ms"] or 0.0)
        key = (layer_of(r["module"]), str(r["pass"]))
        site = out[key]
        site["ms"] += ms
        if r.get("category") in CHOICES:
            site[str(r["category"])] += ms
        if ms >= costliest[key]:
            costliest[key] = ms
            site["source"] = r.get("source")
    return dict(out)


def ran(site: Mapping | None) -> str:
    """What ran a site's matmuls and convolutions: "Triton template", "library", both, or "-"."""
    if not site:
        return "-"
    t, lib = site.get(TRITON_TEMPLATE, 0.0), site.get(LIBRARY, 0.0)
    if t and lib:
        return "Triton template and library"
    return "Triton template" if t else "library" if lib else "-"


def _merged_sites(runs: Sequence[Iterable[Mapping]]) -> tuple[dict, dict[tuple[str, str], float | None]]:
    """The sites of a side's repeats (one list of module rows per job): each site's figures
    the median over the repeats (a site a repeat lacks counts 0 there), and how far its time
    spread over them, % (None for one job)."""
    per_run = [sites(rows) for rows in runs]
    keys = set().union(*per_run) if per_run else set()
    out, spread = {}, {}
    for key in keys:
        got = [run.get(key) for run in per_run]
        first = next(g for g in got if g)
        site = dict(first)
        for figure in ("ms", TRITON_TEMPLATE, LIBRARY):
            site[figure] = statistics.median([(g or {}).get(figure, 0.0) for g in got])
        out[key] = site
        spread[key] = spread_pct([(g or {}).get("ms", 0.0) for g in got])
    return out, spread


def compare(off_rows: Iterable[Mapping], on_rows: Iterable[Mapping], step_kernel_ms: float,
            noise_pct: float = RERUN_DEVICE_PCT) -> list[dict]:
    """compare_repeats() for one job a side."""
    return compare_repeats([off_rows], [on_rows], step_kernel_ms, noise_pct)


def compare_repeats(off_runs: Sequence[Iterable[Mapping]], on_runs: Sequence[Iterable[Mapping]],
                    step_kernel_ms: float, noise_pct: float = RERUN_DEVICE_PCT) -> list[dict]:
    """Every site that ran an autotuned op in either twin and whose time moved beyond the
    bounds above (`noise_pct`: a CPU job's kernels follow the host, and its caller passes
    the jobs' step noise where that is wider; where a side is several repeats, a site is
    held against how far it spread over them too, and compared by its median): slower ones
    first (the most lost first), then faster ones."""
    (off, off_spread), (on, on_spread) = _merged_sites(off_runs), _merged_sites(on_runs)
    floor = SITE_MIN_STEP_PCT / 100 * step_kernel_ms
    out = []
    for key in off.keys() | on.keys():
        a, b = off.get(key), on.get(key)
        if not any(s and (s[TRITON_TEMPLATE] or s[LIBRARY]) for s in (a, b)):
            continue
        ms_off, ms_on = (a or {}).get("ms", 0.0), (b or {}).get("ms", 0.0)
        change = ms_on - ms_off
        spreads = [s for s in (off_spread.get(key), on_spread.get(key)) if s is not None]
        site_noise = widest(noise_pct, *spreads)
        noise = site_noise / 100 * max(ms_off, ms_on)
        if abs(change) <= max(noise, floor):
            continue
        meta = a or b or {}
        out.append({"layer": key[0], "pass": key[1], "source": meta.get("source"),
                    "off_ms": ms_off, "on_ms": ms_on, "change_ms": change,
                    "change_pct": (change / ms_off * 100) if ms_off else None,
                    "off_ran": ran(a), "on_ran": ran(b), "noise_pct": site_noise,
                    "repeat_spread_pct": max(spreads) if spreads else None,
                    "verdict": SLOWER if change > 0 else FASTER})
    out.sort(key=lambda r: (r["verdict"] != SLOWER, -abs(r["change_ms"])))
    return out


def alone_by_site(decisions: Iterable[Mapping]) -> dict[tuple[str, str], dict]:
    """What max-autotune's own benchmarks said of the ops lowered in each site (layer,
    pass), from the on twin's decisions and the modules each op was lowered for (the
    decisions table's `sites`): `chosen_ms` and `library_ms`, the chosen choice and the
    library call each timed alone at the op's shapes, summed over the site's calls; `ops`
    the calls; `templates` those where a template was chosen. Ops without a library timing
    are left out. Inductor times a template's main loop alone, without the epilogue it then
    fuses (unless its epilogue-fusion benchmarks are on: the jobs table's fusion seconds)."""
    out: dict[tuple[str, str], dict] = {}
    for d in decisions:
        chosen, library = as_float(d.get("winner_ms")), as_float(d.get("library_ms"))
        if chosen is None or library is None:
            continue
        for site in str(d.get("sites") or "").split("; "):
            if not site.endswith(")") or " (" not in site:
                continue
            module, pass_ = site[:-1].rsplit(" (", 1)
            layer = "(model)" if module == "(model)" else layer_of(module)
            t = out.setdefault((layer, pass_), {"chosen_ms": 0.0, "library_ms": 0.0, "ops": 0, "templates": 0})
            t["chosen_ms"] += chosen
            t["library_ms"] += library
            t["ops"] += 1
            t["templates"] += d.get("winner_kind") == "template"
    return out


def alone_word(row: Mapping, alone: Mapping | None) -> str | None:
    """A slower site whose choices won in max-autotune's own benchmarks: "benchmark-only win"
    (it timed its choices faster than the library calls, each alone at the op's shapes; in
    the model, with the epilogues it fused and the kernels around it, the site took longer);
    a faster site or one without template choices: None."""
    if not alone or not alone.get("templates") or row.get("verdict") != SLOWER:
        return None
    return BENCHMARK_ONLY if alone["chosen_ms"] < alone["library_ms"] else None


BENCHMARK_ONLY = "benchmark-only win"
