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
from sweeper.analysis.launch_sites import Site, extern_op
from sweeper.analysis.trace import Interval


# How a kernel's time was placed, most direct first (the record keeps the ms of each).
BY_NAME = "provenance (kernel name)"  # a Triton or C++ kernel: its launch site by its unique name
BY_ORDER = "provenance (extern call, launch order)"  # a library kernel: the one extern call between its neighbours
BY_LINK = "provenance (extern calls, the profiler's link to the op)"  # among several: the op that launched it
BY_KIND = "provenance (extern calls, launch order by kernel kind)"  # among several, no link: cut in call order
BY_ORDER_SHARED = "provenance (extern calls, launch order, split)"  # among several, nothing tells them apart

# Why a kernel's time was not placed.
OUTSIDE = "outside compiled graphs"  # eager code between graphs (the loss, autograd's seed)
NO_SITE = "inside a compiled graph, no extern call to place it"  # e.g. a memset between two Triton kernels
NO_MODULE = "launch site with no model module"  # e.g. the copy of parameters into a new layout

_CPP_EVENT_RE = re.compile(r"^graph_\d+_")
# library kernel names by the kind of extern call that launches them (on a GPU)
_CONV_NAME_RE = re.compile(r"conv|fprop|dgrad|wgrad|winograd|implicit|cudnn", re.IGNORECASE)
_GEMM_NAME_RE = re.compile(r"gemm|gemv|cublas|nvjet|matmul", re.IGNORECASE)


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


def _is_mm(op: str) -> bool:
    return "mm" in op or "linear" in op or "matmul" in op


def compatible(event: Interval, site: Site) -> bool:
    """Whether a library or ATen event can come from this extern call: on a CPU the op's
    own name ("aten::convolution_backward"); on a GPU the vendor kernel's kind: a cuDNN
    dgrad kernel is a convolution's; a GEMM an mm's or a convolution's (cuDNN runs a 1x1
    convolution as a GEMM: nvjet and cuBLASLt kernels under mixnet_l's pointwise
    convolutions on an H100); any other kernel (a layout transform, an ATen elementwise
    kernel) any extern call's."""
    op = extern_op(site.kernel)
    if event.cat == "cpu_op":
        return event.name.split("::")[-1] == op
    if _CONV_NAME_RE.search(event.name):
        return "conv" in op
    if _GEMM_NAME_RE.search(event.name):
        return _is_mm(op) or "conv" in op
    return True


def _fitting(event: Interval, gap: Sequence[Site]) -> list[Site]:
    """The extern calls of a gap that can launch `event`; a GEMM goes to an mm call where
    the gap has one, rather than to a convolution beside it."""
    fits = [s for s in gap if compatible(event, s)]
    if event.cat != "cpu_op" and _GEMM_NAME_RE.search(event.name) and not _CONV_NAME_RE.search(event.name):
        mm = [s for s in fits if _is_mm(extern_op(s.kernel))]
        return mm or fits
    return fits


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
    named: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for m, sites in enumerate(modules):
        for p, site in enumerate(sites):
            if not site.extern:
                named[site.kernel].append((m, p))
    # first pass: the kernels Inductor named
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
    placed = Placed(runs=runs, run_of=list(run_of) if run_of is not None else None)
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
        gap = _extern_between(modules, prev[i], nxt[i])
        outside = _between_graphs(modules, prev[i], nxt[i])
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


def place_gap(events: Sequence[Interval], gap: Sequence[Site],
              links: Sequence[object | None]) -> list[tuple[list[tuple[Site, float]], str] | None]:
    """Each kernel of one gap (the kernels between two named ones, in order) on the extern
    calls of the gap (`gap`, in call order): ([(site, share)], how), or None where no call
    can have launched it.

    One fitting call: that one. Several: the calls run in order, and so do the ops that
    launched the kernels, so the n-th op (a link; a CPU trace's op event is its own) goes to
    the n-th call that can launch it, in order. Without links, segment_by_kind; and only
    where neither tells, the fitting calls share the kernel."""
    out: list[tuple[list[tuple[Site, float]], str] | None] = [None] * len(events)
    fits = [_fitting(e, gap) for e in events]
    ambiguous = [k for k, f in enumerate(fits) if len(f) > 1]
    for k, f in enumerate(fits):
        if len(f) == 1:
            out[k] = ([(f[0], 1.0)], BY_ORDER)
    if not ambiguous:
        return out
    op_of = [e if e.cat == "cpu_op" else link for e, link in zip(events, links)]
    if all(op_of[k] is not None for k in ambiguous):
        for k, site in _place_by_op(gap, op_of, ambiguous).items():
            out[k] = ([(site, 1.0)], BY_LINK) if site is not None else None
        return out
    by_kind = segment_by_kind([events[k] for k in ambiguous], [s for s in gap if any(s in fits[k] for k in ambiguous)])
    if by_kind is not None:
        for k, site in zip(ambiguous, by_kind):
            out[k] = ([(site, 1.0)], BY_KIND)
        return out
    for k in ambiguous:
        out[k] = ([(s, 1.0 / len(fits[k])) for s in fits[k]], BY_ORDER_SHARED)
    return out


def _op_name(op: object) -> str | None:
    """The ATen op of a link: a CPU trace's op event, or kernel_links' (name, start)."""
    name = op.name if isinstance(op, Interval) else op[0] if isinstance(op, tuple) and op else None
    return str(name).split("::")[-1] if name else None


def _place_by_op(gap: Sequence[Site], op_of: Sequence[object | None], which: Sequence[int]) -> dict[int, Site | None]:
    """The kernels `which` of a gap on its calls by the ops that launched them (hashable
    values, one per op call): the ops in the order they ran, each on the next call of its
    op (extern_kernels.convolution runs aten::convolution). A kernel whose op is no call of
    the gap (a `zero_` between two calls) goes nowhere."""
    site_of: dict[object, Site | None] = {}
    cursor = 0
    for k in which:
        op = op_of[k]
        if op in site_of:
            continue
        name = _op_name(op)
        at = next((c for c in range(cursor, len(gap)) if extern_op(gap[c].kernel) == name), None)
        site_of[op] = gap[at] if at is not None else None
        if at is not None:
            cursor = at + 1
    return {k: site_of[op_of[k]] for k in which}


def segment_by_kind(events: Sequence[Interval], calls: Sequence[Site]) -> list[Site] | None:
    """Without a link, the kernels of several calls (in launch order) cut in call order
    where their kinds say how: each call launches as many main kernels (a convolution's or
    a GEMM's: fprop, dgrad, wgrad, gemm), so main kernel i goes to call i // (mains /
    calls), and a helper kernel (a layout transform, a memset, a split-K reduction) to the
    call of the main kernel before it (the first call's, before any). None where the main
    kernels do not divide evenly among the calls, or a call cannot launch its kernels."""
    if not calls:
        return None
    mains = [k for k, e in enumerate(events) if _CONV_NAME_RE.search(e.name) or _GEMM_NAME_RE.search(e.name)]
    if not mains or len(mains) % len(calls):
        return None
    each = len(mains) // len(calls)
    call_of_main = {k: calls[n // each] for n, k in enumerate(mains)}
    out, current = [], calls[0]
    for k, e in enumerate(events):
        current = call_of_main.get(k, current)
        if not compatible(e, current):
            return None
        out.append(current)
    return out


def _extern_between(modules: Sequence[Sequence[Site]], before: tuple[int, int] | None,
                    after: tuple[int, int] | None) -> list[Site]:
    """The extern calls that can run between two placed kernels: after `before` in its
    module up to its next generated kernel, and before `after` in its module back to the
    generated kernel before it."""
    out: list[Site] = []
    if before is not None:
        for s in modules[before[0]][before[1] + 1:]:
            if not s.extern:
                break
            out.append(s)
    if after is not None and (before is None or after[0] != before[0]):
        lead: list[Site] = []
        for s in reversed(modules[after[0]][:after[1]]):
            if not s.extern:
                break
            lead.append(s)
        out.extend(reversed(lead))
    return out


def _between_graphs(modules: Sequence[Sequence[Site]], before, after) -> bool:
    """Whether nothing of a compiled module is left between two placed kernels: the one
    before ends its module's generated kernels and the one after starts its own."""
    def last_generated(m: int) -> int:
        return max((p for p, s in enumerate(modules[m]) if not s.extern), default=-1)

    def first_generated(m: int) -> int:
        return min((p for p, s in enumerate(modules[m]) if not s.extern), default=-1)

    ends = before is None or before[1] == last_generated(before[0])
    starts = after is None or after[1] == first_generated(after[0])
    return ends and starts and (before is None or after is None or before[0] != after[0])


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
