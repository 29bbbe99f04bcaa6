"""Library kernels on the extern calls that launched them (pure: no torch): a cuDNN, cuBLAS
or oneDNN kernel has a vendor name, so it is placed on the extern calls between the two
generated kernels that ran around it (sweeper/analysis/attribution.py finds that gap). One
call that can launch it: that one; several: the op the profiler links it to, the n-th such
op to the n-th call (place_gap); without a link, the kernels cut in call order where their
kinds say how (segment_by_kind), and only else shared."""

from __future__ import annotations

import re
from typing import Sequence

from sweeper.analysis.launch_sites import Site, extern_op
from sweeper.analysis.trace import Interval

# How a library kernel was placed (the record keeps the ms of each; attribution.BY_NAME is a
# generated kernel's).
BY_ORDER = "provenance (extern call, launch order)"  # a library kernel: the one extern call between its neighbours
BY_LINK = "provenance (extern calls, the profiler's link to the op)"  # among several: the op that launched it
BY_KIND = "provenance (extern calls, launch order by kernel kind)"  # among several, no link: cut in call order
BY_ORDER_SHARED = "provenance (extern calls, launch order, split)"  # among several, nothing tells them apart

# library kernel names by the kind of extern call that launches them (on a GPU)
_CONV_NAME_RE = re.compile(r"conv|fprop|dgrad|wgrad|winograd|implicit|cudnn", re.IGNORECASE)
_GEMM_NAME_RE = re.compile(r"gemm|gemv|cublas|nvjet|matmul", re.IGNORECASE)


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


def extern_between(modules: Sequence[Sequence[Site]], before: tuple[int, int] | None,
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


def between_graphs(modules: Sequence[Sequence[Site]], before, after) -> bool:
    """Whether nothing of a compiled module is left between two placed kernels: the one
    before ends its module's generated kernels and the one after starts its own."""
    def last_generated(m: int) -> int:
        return max((p for p, s in enumerate(modules[m]) if not s.extern), default=-1)

    def first_generated(m: int) -> int:
        return min((p for p, s in enumerate(modules[m]) if not s.extern), default=-1)

    ends = before is None or before[1] == last_generated(before[0])
    starts = after is None or after[1] == first_generated(after[0])
    return ends and starts and (before is None or after is None or before[0] != after[0])
