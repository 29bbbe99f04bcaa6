"""Run a callable under torch.profiler, save the Chrome trace compressed, analyse it."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Callable, cast

from torch.profiler import ProfilerActivity, profile, record_function

from sweeper.analysis import breakdown as bd
from sweeper.analysis import trace as tr
from tasks.gc_watch import paused
from tasks.timing import synchronize

if TYPE_CHECKING:
    from sweeper.record import Breakdown


def profile_calls(fn: Callable[[], object], n: int, device: str, label: str, trace_path: Path) -> list[dict]:
    """Profile `n` back-to-back calls, each inside record_function(label); write the trace
    to `trace_path` (.json.gz, a path of this job's own) and return its events."""
    # On a GPU only device activity is traced: tracing every host-side op slows the
    # launches of a launch-bound step (seen on an H200: resnet18 at batch 8 took 19 ms a
    # step under a CPU+CUDA profile against 10 ms without), and the busy percentage
    # would then measure the profiler. The span is then the kernels' own extent.
    activities = [ProfilerActivity.CUDA] if device == "cuda" else [ProfilerActivity.CPU]
    synchronize(device)  # nothing from earlier calls may leak into the profiled window
    with paused(), profile(activities=activities) as prof:
        for _ in range(n):
            with record_function(label):
                fn()
        synchronize(device)
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    raw = trace_path.with_suffix("")  # x.json.gz -> x.json
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(trace_path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.unlink(raw)
    return tr.load_trace(trace_path)


def analyse(events: list[dict], device: str, label: str, runs: int, wall_ms: float | None,
            busy_wall_ms: float | None = None) -> Breakdown:
    """Breakdown of profiled calls: device kernels on a GPU; on a CPU, the C++ kernels and
    ATen ops run inside the labelled ranges. busy_wall_ms: the busy figure's divisor, where
    it is not wall_ms (breakdown.breakdown)."""
    ranges = tr.annotation_ranges(events, label)
    if device == "cuda":
        kernels = tr.device_kernels(events)
    else:
        kernels = [
            k
            for k in tr.cpu_kernels(events)
            if any(s <= k.start_us and k.end_us <= e for s, e in ranges)
        ]
    span = bd.profiled_span(kernels, ranges)
    return cast("Breakdown", bd.breakdown(kernels, runs=runs, span=span, wall_ms=wall_ms, busy_wall_ms=busy_wall_ms,
                        host_timed=device != "cuda"))  # the dict breakdown() builds is a Breakdown
