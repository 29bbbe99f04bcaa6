"""Read PyTorch profiler Chrome traces into plain kernel intervals (pure: no torch).

Working from the exported trace file rather than from live profiler objects means the
same code analyses a trace taken a minute ago in this process and one captured on the
GPU machine last week (tests/fixtures), and a user can re-analyse any job's trace.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

# Trace categories of device-side activity. Everything else in a GPU trace (cpu_op,
# cuda_runtime, python_function, ...) happens on the host.
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})

# Inductor's C++ kernels, visible with cpp.enable_kernel_profile: "graph_0_cpp_fused_add_3".
CPP_KERNEL_RE = re.compile(r"(^|_)cpp_fused|(^|_)cpp_kernel")
# Host-side wrappers that contain the ops doing the work; the ops inside them are counted.
_CPU_WRAPPER_PREFIXES = ("autograd::", "torch::autograd::", "Optimizer.", "cudaGraph")


class TraceError(ValueError):
    """A trace file that cannot be read as a PyTorch profiler Chrome trace."""


@dataclass(frozen=True)
class Interval:
    name: str
    cat: str  # the trace's own category: kernel, gpu_memcpy, gpu_memset, cpu_op
    start_us: float
    dur_us: float

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


def load_trace(path: str | Path) -> list[dict]:
    """The complete ('X') events of a Chrome trace, plain or gzip-compressed."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(f"cannot read trace {path}: {e}") from e
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path} has no traceEvents list: not a profiler Chrome trace")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def device_kernels(events: Iterable[dict]) -> list[Interval]:
    """GPU kernels, memcpys and memsets, in start order."""
    out = [
        Interval(e["name"], e["cat"], float(e["ts"]), float(e.get("dur", 0.0)))
        for e in events
        if e.get("cat") in DEVICE_CATS
    ]
    out.sort(key=lambda i: i.start_us)
    return out


def _is_cpu_work(name: str) -> bool:
    if name.startswith(_CPU_WRAPPER_PREFIXES):
        return False
    return bool(CPP_KERNEL_RE.search(name)) or "::" in name


def cpu_kernels(events: Iterable[dict]) -> list[Interval]:
    """The CPU's 'kernels': Inductor C++ kernels and ATen/oneDNN ops, outermost only.

    ATen ops nest (aten::convolution > aten::_convolution > aten::mkldnn_convolution);
    keeping only the outermost op of each nest counts every microsecond once.
    """
    by_thread: dict[object, list[dict]] = {}
    for e in events:
        if e.get("cat") == "cpu_op" and _is_cpu_work(e.get("name", "")):
            by_thread.setdefault(e.get("tid"), []).append(e)
    out: list[Interval] = []
    for evs in by_thread.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0.0))))
        outer_end = float("-inf")
        for e in evs:
            start, dur = float(e["ts"]), float(e.get("dur", 0.0))
            if start + dur <= outer_end:
                continue  # nested inside the current outermost op
            outer_end = start + dur
            out.append(Interval(e["name"], "cpu_op", start, dur))
    out.sort(key=lambda i: i.start_us)
    return out


def annotation_ranges(events: Iterable[dict], name: str) -> list[tuple[float, float]]:
    """Host-side record_function ranges with this exact name, as (start, end) in us."""
    ranges = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)))
        for e in events
        if e.get("name") == name and e.get("cat") in ("user_annotation", "cpu_op")
    ]
    ranges.sort()
    return ranges


def union_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals."""
    spans = sorted(intervals)
    if not spans:
        return 0.0
    total = 0.0
    cur_start, cur_end = spans[0]
    for start, end in spans[1:]:
        if start > cur_end:
            total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    return total + (cur_end - cur_start)


def clip(intervals: Iterable[Interval], start: float, end: float) -> list[tuple[float, float]]:
    """Intervals cut to [start, end], empty ones dropped."""
    out = []
    for i in intervals:
        s, e = max(i.start_us, start), min(i.end_us, end)
        if e > s:
            out.append((s, e))
    return out


_LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def profiler_steps(events: list[dict], runs: int, label: str) -> list[dict]:
    """`ProfilerStep#<i>` events for a trace of `runs` profiled calls, as torch.profiler's
    own schedule would mark them, so that trace tools that count iterations (Holistic Trace
    Analysis) read each call as a step: the calls' own `label` ranges where the trace has
    them (a CPU profile), else (a GPU profile of device activity only) the host's launches
    of device work cut into `runs` equal groups, each step from its first launch to the
    next step's first. None where the launches do not divide evenly."""
    spans = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), e.get("pid"), e.get("tid"))
             for e in events if e.get("ph") == "X" and e.get("name") == label
             and e.get("cat") in ("user_annotation", "cpu_op")]
    if len(spans) != runs:
        device = {(e.get("args") or {}).get("correlation") for e in events if e.get("cat") in DEVICE_CATS}
        launches = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") in _LAUNCH_CATS
                           and (e.get("args") or {}).get("correlation") in device), key=lambda e: float(e["ts"]))
        if not launches or len(launches) % runs:
            return []
        n = len(launches) // runs
        groups = [launches[i * n:(i + 1) * n] for i in range(runs)]
        spans = []
        for i, g in enumerate(groups):
            start = float(g[0]["ts"])
            end = (float(groups[i + 1][0]["ts"]) if i + 1 < runs
                   else max(float(e["ts"]) + float(e.get("dur", 0.0)) for e in g) + 1.0)
            spans.append((start, end, g[0].get("pid"), g[0].get("tid")))
    return [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": pid, "tid": tid,
             "ts": start, "dur": end - start, "args": {"marked by": "sweeper: one profiled call"}}
            for i, (start, end, pid, tid) in enumerate(spans) if end > start]


def kernel_links(events: Iterable[dict]) -> dict[int, tuple[str, float]]:
    """A CPU+CUDA trace's device work linked to the op that launched it: correlation id ->
    (the outermost ATen op around the launch on the launching thread, the op's start). Two
    launches of one op call share the value; the op's start tells two calls apart. Work
    launched outside any ATen op (a Triton kernel, which Inductor's wrapper launches
    directly) has none."""
    events = list(events)
    ops: dict[object, list[tuple[float, float, str]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith("aten::"):
            start = float(e["ts"])
            ops.setdefault(e.get("tid"), []).append((start, start + float(e.get("dur", 0.0)), str(e["name"])))
    outer: dict[object, list[tuple[float, float, str]]] = {}
    for tid, evs in ops.items():
        evs.sort(key=lambda o: (o[0], -o[1]))
        kept: list[tuple[float, float, str]] = []
        for o in evs:
            if kept and o[1] <= kept[-1][1]:
                continue  # inside the current outermost op
            kept.append(o)
        outer[tid] = kept
    device = {(e.get("args") or {}).get("correlation") for e in events if e.get("cat") in DEVICE_CATS}
    links: dict[int, tuple[str, float]] = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("ph") != "X" or e.get("cat") not in _LAUNCH_CATS or corr not in device:
            continue
        ts, around = float(e["ts"]), outer.get(e.get("tid")) or []
        lo, hi = 0, len(around)
        while lo < hi:  # the last outermost op starting at or before the launch
            mid = (lo + hi) // 2
            if around[mid][0] <= ts:
                lo = mid + 1
            else:
                hi = mid
        if lo and around[lo - 1][1] >= ts and corr is not None:
            links[int(corr)] = (around[lo - 1][2], around[lo - 1][0])
    return links


def device_links(events: Iterable[dict]) -> list[tuple[str, tuple[str, float] | None]]:
    """A CPU+CUDA trace's device work in start order, each (name, the op that launched it
    or None: kernel_links)."""
    events = list(events)
    links = kernel_links(events)
    device = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS),
                    key=lambda e: float(e["ts"]))
    return [(str(e["name"]), links.get(int((e.get("args") or {}).get("correlation") or -1))) for e in device]


def transfer_links(kernels: list[Interval], runs: int,
                   linked: list[tuple[str, tuple[str, float] | None]]) -> list[tuple[str, float] | None] | None:
    """The links of one linked call (device_links of a step traced with its host ops) given
    to the same call's kernels in a trace of `runs` calls without host ops (`kernels`), call
    by call, where each call launched the same kernels in the same order; None where they
    did not (the link would be a guess)."""
    if not linked or runs <= 0 or len(kernels) != len(linked) * runs:
        return None
    names = [name for name, _ in linked]
    n = len(linked)
    for r in range(runs):
        if [k.name for k in kernels[r * n:(r + 1) * n]] != names:
            return None
    return [linked[i % n][1] for i in range(len(kernels))]


def run_index(kernels: list[Interval], runs: int, ranges: list[tuple[float, float]] | None = None) -> list[int] | None:
    """Which of `runs` profiled calls each kernel (in start order) belongs to: the call's
    own range where the trace has one a call (a CPU profile: a kernel after a range's end
    belongs to it until the next begins), else calls that each launched as many kernels
    (a GPU profile of device activity only). None where neither says."""
    import bisect

    if runs <= 0 or not kernels:
        return None
    if ranges and len(ranges) == runs:
        starts = [s for s, _ in ranges]
        return [max(0, bisect.bisect_right(starts, k.start_us) - 1) for k in kernels]
    if len(kernels) % runs:
        return None
    n = len(kernels) // runs
    return [i // n for i in range(len(kernels))]


def per_run(durations_us: list[float], run_of: list[int], runs: int) -> list[float]:
    """Milliseconds of each call, from the durations (µs) of some kernels and their calls."""
    out = [0.0] * runs
    for d, r in zip(durations_us, run_of):
        out[r] += d / 1000
    return out


def typical(per_run_ms: list[float]) -> tuple[float, int]:
    """(the median call's milliseconds, how many calls took more than twice that and 1 µs
    more): one call preempted on a loaded host (five calls of a squeeze-excite convolution:
    133.25, 0.04, 0.04, 85.88 and 0.04 ms) sets the mean, not the median."""
    import statistics

    if not per_run_ms:
        return 0.0, 0
    med = statistics.median(per_run_ms)
    return med, sum(1 for v in per_run_ms if v > 2 * med + 0.001)


