"""From a kernel to the model's code: which module (layer) and source line each profiled
kernel's time comes from (pure: no torch).

What torch says, and how it gets here:

* The job (tasks/provenance.py) turns on Inductor's provenance tracking and tags every
  post-grad FX node's stack trace with the model module it comes from (its
  ``nn_module_stack``; for a backward node the forward module it differentiates,
  ``fwd_nn_module_stack``): one line ``[sweeper module] <pass> <path> <Class>``. Inductor
  keeps each launch site's stack traces in the compiled graph and hands them out again on
  an FX-graph-cache hit and a compile-store load, so a warm job carries the same
  attribution as a cold one.
* A compiled module's wrapper code names each launch, in call order, with a comment
  ``# [Provenance debug handles] <kernel>:<handle>`` (launch_sites.py). Triton and C++ kernels
  are found in a trace by their unique names; a library kernel (cuDNN, cuBLAS, oneDNN)
  launched by an extern call (``extern_kernels.convolution``, ``aten.convolution_backward``)
  has a vendor name: it belongs to an extern call between the compiled kernels that ran
  just before and just after it (attribute_events). Where several extern calls lie there,
  each kernel goes to the call that launched it: the op the profiler links it to (a CPU
  trace's op is the call itself; a GPU kernel's launch links by its correlation id to the
  ATen op around it, where the job traced one: kernel_links), the n-th such op to the n-th
  call; without a link, the kernels are cut in call order where their kinds say how
  (segment_by_kind), and only else shared.

What cannot be placed is counted by reason, never guessed from a name alone.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from sweeper.analysis.categories import categorize
from sweeper.analysis.launch_sites import Site
from sweeper.analysis.library_placement import between_graphs, extern_between, place_gap
from sweeper.analysis.trace import Interval


# How a kernel's time was placed, most direct first (the record keeps the ms of each).
BY_NAME = "provenance (kernel name)"  # a Triton or C++ kernel: its launch site by its unique name

# Why a kernel's time was not placed.
OUTSIDE = "outside compiled graphs"  # eager code between graphs (the loss, autograd's seed)
NO_SITE = "inside a compiled graph, no extern call to place it"  # e.g. a memset between two Triton kernels
NO_MODULE = "launch site with no model module"  # e.g. the copy of parameters into a new layout

_CPP_EVENT_RE = re.compile(r"^graph_\d+_")


@dataclass
class Placed:
    """Per-run time of the attributed kernels, and what was not attributed."""

    runs: int
    # (layer path, class, pass, category) -> [ms, launches], per run
    by_layer: dict[tuple[str, str, str, str], list[float]] = field(default_factory=dict)
    layer_source: dict[tuple[str, str], str] = field(default_factory=dict)  # (path, pass) -> its source line
    # kernel name -> layer label -> ms per run (for the kernel tables' columns)
    by_kernel: dict[str, dict[str, float]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # kernel name -> its costliest site's source line
    source_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # kernel name -> source line -> ms
    aten: dict[str, tuple[str, ...]] = field(default_factory=dict)  # kernel name -> its first site's ATen ops
    kernel_how: dict[str, str] = field(default_factory=dict)  # kernel name -> how it was first placed
    how: dict[str, float] = field(default_factory=dict)  # method -> ms per run
    unattributed: dict[str, float] = field(default_factory=dict)  # reason -> ms per run
    device_ms: float = 0.0
    # per event, in the order given: (layers, source) or (reason, None) where unplaced
    events: list[tuple[str, str | None]] = field(default_factory=list)
    # per event, in the order given: the launch sites it was placed on, with its share of
    # each (none where unplaced); and the factor model_code() scaled its times by
    event_sites: list[tuple[tuple[Site, float], ...]] = field(default_factory=list)
    scale: float = 1.0
    run_of: list[int] | None = None  # per event, the profiled call it belongs to (trace.run_index)
    # (layer path, class, pass, category) -> ms in each profiled call, where run_of is known
    layer_runs: dict[tuple[str, str, str, str], list[float]] = field(default_factory=dict)


def event_kernel_name(name: str) -> str:
    """A trace event's name as the wrapper names the kernel: C++ kernels are profiled as
    graph_<N>_cpp_fused_..."""
    return _CPP_EVENT_RE.sub("", name)


def _anchors(events: Sequence[Interval], modules: Sequence[Sequence[Site]]) -> list[tuple[int, int] | None]:
    """Each event's launch site (module, position) where Inductor named its kernel, else
    None: among several sites of one kernel, the one that continues the sequence of the
    kernel before it, else the sites in turn."""
    named: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for m, sites in enumerate(modules):
        for p, site in enumerate(sites):
            if not site.extern:
                named[site.kernel].append((m, p))
    anchors: list[tuple[int, int] | None] = []
    turn: dict[str, int] = defaultdict(int)
    last: tuple[int, int] | None = None
    for e in events:
        cands = named.get(event_kernel_name(e.name))
        if not cands:
            anchors.append(None)
            continue
        pick = next((c for c in cands if last is not None and c[0] == last[0] and c[1] > last[1]), None)
        if pick is None or len(cands) == 1:
            pick = cands[turn[e.name] % len(cands)]
        turn[e.name] += 1
        anchors.append(pick)
        last = pick
    return anchors


def _neighbours(anchors: Sequence[tuple[int, int] | None]) -> tuple[list, list]:
    """For each event, the named site before it (or its own) and the one after it."""
    prev: list[tuple[int, int] | None] = []
    cur = None
    for a in anchors:
        cur = a if a is not None else cur
        prev.append(cur)
    nxt: list[tuple[int, int] | None] = [None] * len(anchors)
    cur = None
    for i in range(len(anchors) - 1, -1, -1):
        cur = anchors[i] if anchors[i] is not None else cur
        nxt[i] = cur
    return prev, nxt


def attribute_events(events: Sequence[Interval], modules: Sequence[Sequence[Site]], runs: int,
                     links: Sequence[object | None] | None = None, run_of: Sequence[int] | None = None) -> Placed:
    """Place each profiled kernel (`events`, in start order, of `runs` profiled calls) on
    the launch sites of the compiled modules (`modules`, each its sites in call order).

    A Triton or C++ kernel is found by name; where one kernel is launched from several
    sites (Inductor reuses a kernel whose code is identical, so each launch does the same
    work), the site that continues the sequence of the kernel before it is taken, else
    the sites in turn. Every other kernel lies between two placed neighbours and goes to
    the extern calls between their sites that can launch it (place_gap). `links`: for
    each event, the ATen op call that launched it (any value that tells one call from
    another, as kernel_links gives), or None; a CPU trace's op event is its own link.
    `run_of`: each event's profiled call (trace.run_index), for each layer's typical time."""
    anchors = _anchors(events, modules)
    placed = Placed(runs=runs, run_of=list(run_of) if run_of is not None else None)
    prev, nxt = _neighbours(anchors)
    i = 0
    while i < len(events):
        e, anchor = events[i], anchors[i]
        if anchor is not None:
            _add(placed, e, [(modules[anchor[0]][anchor[1]], 1.0)], BY_NAME, e.dur_us / 1000 / runs, _run(placed, i))
            i += 1
            continue
        j = i  # the run of unnamed kernels between the same two named ones: one gap
        while j < len(events) and anchors[j] is None:
            j += 1
        gap = extern_between(modules, prev[i], nxt[i])
        outside = between_graphs(modules, prev[i], nxt[i])
        own_links = [links[k] if links is not None else None for k in range(i, j)]
        for k, (e, got) in enumerate(zip(events[i:j], place_gap(events[i:j], gap, own_links)), start=i):
            ms = e.dur_us / 1000 / runs
            if got is None:
                reason = OUTSIDE if outside else NO_SITE
                placed.device_ms += ms
                placed.unattributed[reason] = placed.unattributed.get(reason, 0.0) + ms
                placed.events.append((f"not placed: {reason}", None))
                placed.event_sites.append(())
            else:
                _add(placed, e, got[0], got[1], ms, _run(placed, k))
        i = j
    for name, by_line in placed.source_ms.items():  # a kernel's line: its costliest site's
        placed.sources[name] = max(by_line.items(), key=lambda kv: kv[1])[0]
    return placed


def _run(placed: Placed, i: int) -> int | None:
    return placed.run_of[i] if placed.run_of is not None and i < len(placed.run_of) else None


def _add(placed: Placed, e: Interval, sites: list[tuple[Site, float]], how: str, ms: float,
         run: int | None = None) -> None:
    """One kernel's time on its sites, each site's on its layers by their shares of its
    work (Site.layer_shares); what the layers leave (nodes of no module) is not placed."""
    category = categorize(e.name, e.cat)
    kernels = placed.by_kernel.setdefault(e.name, {})
    placed.device_ms += ms
    for site, weight in sites:
        shares = site.layer_shares()
        on_layers = sum(shares)
        rest = ms * weight * max(0.0, 1.0 - on_layers)
        if rest > 1e-15:
            placed.unattributed[NO_MODULE] = placed.unattributed.get(NO_MODULE, 0.0) + rest
        if not site.layers:
            continue
        placed.how[how] = placed.how.get(how, 0.0) + ms * weight * on_layers
        for layer, share, line in zip(site.layers, shares, site.layer_sources or (None,) * len(site.layers)):
            if line and (layer.path, layer.pass_) not in placed.layer_source:
                placed.layer_source[(layer.path, layer.pass_)] = line
            each = ms * weight * share
            key = (layer.path, layer.cls, layer.pass_, category)
            row = placed.by_layer.setdefault(key, [0.0, 0.0])
            row[0] += each
            row[1] += weight * share / placed.runs
            if run is not None:  # the layer's time in each profiled call, for its typical one
                placed.layer_runs.setdefault(key, [0.0] * placed.runs)[run] += each * placed.runs
            kernels[layer.label()] = kernels.get(layer.label(), 0.0) + each
        if site.sources:
            by_line = placed.source_ms.setdefault(e.name, {})
            by_line[site.sources[0]] = by_line.get(site.sources[0], 0.0) + ms * weight
        if site.aten_ops and e.name not in placed.aten:
            placed.aten[e.name] = site.aten_ops
        placed.kernel_how.setdefault(e.name, how)
    layers = [layer.label() for site, _ in sites for layer in site.layers]
    source = next((site.sources[0] for site, _ in sites if site.sources), None)
    placed.events.append(("; ".join(layers) if layers else f"not placed: {NO_MODULE}", source))
    placed.event_sites.append(tuple(sites))


def summary(placed: Placed) -> dict:
    """The record's `model_code` part for one profile: the rows by layer and category, how
    much was placed and how, what was not and why (ms per run)."""
    attributed = sum(placed.how.values())
    from sweeper.analysis.trace import typical

    def typical_ms(key) -> float | None:
        calls = placed.layer_runs.get(key)
        return round(typical(calls)[0] * placed.scale, 6) if calls else None

    rows = [{"module": path, "class": cls, "pass": pass_, "category": cat,
             "device_ms": round(ms, 6), "typical_ms": typical_ms((path, cls, pass_, cat)), "launches": round(n, 3),
             "source": placed.layer_source.get((path, pass_))}
            for (path, cls, pass_, cat), (ms, n) in sorted(placed.by_layer.items(), key=lambda kv: -kv[1][0])]
    return {
        "device_ms": placed.device_ms,
        "attributed_ms": attributed,
        "attributed_pct": attributed / placed.device_ms * 100 if placed.device_ms else None,
        "how": {k: round(v, 6) for k, v in placed.how.items()},
        "unattributed": {k: round(v, 6) for k, v in placed.unattributed.items()},
        "rows": rows,
    }


def kernel_columns(placed: Placed, kernel_rows: Iterable[dict], top: int = 3) -> None:
    """The kernel table's model columns, in place: `model_modules` (the layers a kernel's
    time goes to, costliest first, at most `top`, with how many more), `model_source`,
    `model_aten` (the ATen ops its launch site computes, as the compiled module's comment
    says) and `model_how` (how it was placed)."""
    for row in kernel_rows:
        layers = placed.by_kernel.get(row["name"])
        row["model_aten"] = list(placed.aten[row["name"]]) if row["name"] in placed.aten else None
        row["model_how"] = placed.kernel_how.get(row["name"])
        if not layers:
            row["model_modules"], row["model_source"] = None, None
            continue
        ranked = sorted(layers.items(), key=lambda kv: -kv[1])
        names = [label for label, _ in ranked[:top]]
        if len(ranked) > top:
            names.append(f"+{len(ranked) - top} more")
        row["model_modules"] = names
        row["model_source"] = placed.sources.get(row["name"])


def model_code(kernels: Sequence[Interval], modules: Sequence[Sequence[Site]], breakdown: dict,
               links: Sequence[object | None] | None = None,
               run_of: Sequence[int] | None = None) -> tuple[dict, Placed]:
    """One profile's attribution, in the breakdown's own terms: the breakdown's kernel
    rows gain their model columns in place (kernel_columns), and the returned summary's
    times are scaled to the breakdown's device time (a CPU breakdown scales its profiled
    times to the unprofiled run: breakdown.to_unprofiled). Returns the summary and the
    placement (its `events` label each kernel of `kernels`)."""
    placed = attribute_events(kernels, modules, breakdown["runs"], links, run_of)
    scale = breakdown["device_ms"] / placed.device_ms if placed.device_ms else 1.0
    if scale != 1.0:
        for row in placed.by_layer.values():
            row[0] *= scale
        for layers in placed.by_kernel.values():
            for label in layers:
                layers[label] *= scale
        placed.how = {k: v * scale for k, v in placed.how.items()}
        placed.unattributed = {k: v * scale for k, v in placed.unattributed.items()}
        placed.device_ms *= scale
        placed.scale = scale
    kernel_columns(placed, breakdown.get("kernels") or [])
    out = summary(placed)
    out["sites"] = sum(len(s) for s in modules)
    out["sites_with_module"] = sum(1 for sites in modules for s in sites if s.layers)
    return out, placed
