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
no finding). Per-site run-to-run noise has not been measured on a GPU yet: the job-level
figure is its floor, so a "slower" site near the bound may still be a coin flip.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping

from sweeper.analysis.autotune_verdict import RERUN_DEVICE_PCT
from sweeper.analysis.categories import LIBRARY, TRITON_TEMPLATE
from sweeper.analysis.module_rollup import block_of

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


def compare(off_rows: Iterable[Mapping], on_rows: Iterable[Mapping], step_kernel_ms: float,
            noise_pct: float = RERUN_DEVICE_PCT) -> list[dict]:
    """Every site that ran an autotuned op in either twin and whose time moved beyond the
    bounds above (`noise_pct`: a CPU job's kernels follow the host, and its caller passes
    the jobs' step noise where that is wider): slower ones first (the most lost first),
    then faster ones."""
    off, on = sites(off_rows), sites(on_rows)
    floor = SITE_MIN_STEP_PCT / 100 * step_kernel_ms
    out = []
    for key in off.keys() | on.keys():
        a, b = off.get(key), on.get(key)
        if not any(s and (s[TRITON_TEMPLATE] or s[LIBRARY]) for s in (a, b)):
            continue
        ms_off, ms_on = (a or {}).get("ms", 0.0), (b or {}).get("ms", 0.0)
        change = ms_on - ms_off
        noise = noise_pct / 100 * max(ms_off, ms_on)
        if abs(change) <= max(noise, floor):
            continue
        meta = a or b or {}
        out.append({"layer": key[0], "pass": key[1], "source": meta.get("source"),
                    "off_ms": ms_off, "on_ms": ms_on, "change_ms": change,
                    "change_pct": (change / ms_off * 100) if ms_off else None,
                    "off_ran": ran(a), "on_ran": ran(b), "noise_pct": noise_pct,
                    "verdict": SLOWER if change > 0 else FASTER})
    out.sort(key=lambda r: (r["verdict"] != SLOWER, -abs(r["change_ms"])))
    return out
