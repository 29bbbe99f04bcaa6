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
    from sweeper.analysis.attribution import Placed
    from sweeper.record_schema import Breakdown


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
    kernels = profiled_kernels(events, device, ranges)
    span = bd.profiled_span(kernels, ranges)
    return cast("Breakdown", bd.breakdown(kernels, runs=runs, span=span, wall_ms=wall_ms, busy_wall_ms=busy_wall_ms,
                        host_timed=device != "cuda"))  # the dict breakdown() builds is a Breakdown


def profiled_kernels(events: list[dict], device: str, ranges: list[tuple[float, float]]) -> list[tr.Interval]:
    """What a breakdown counts, in start order: device kernels on a GPU; on a CPU, the C++
    kernels and ATen ops run inside the labelled `ranges`."""
    if device == "cuda":
        return tr.device_kernels(events)
    return [k for k in tr.cpu_kernels(events) if any(s <= k.start_us and k.end_us <= e for s, e in ranges)]


def model_code(events: list[dict], device: str, label: str, breakdown: Breakdown, modules, trace_path: Path,
               rank: int = 0) -> tuple[dict, list, Placed]:
    """Where in the model the profiled kernels' time comes from (sweeper/analysis/attribution.py;
    `modules`: the launch sites of each compiled module the profile ran, in call order); each
    kernel event of the trace at `trace_path` gets its model module and source line in its args.
    Returns the record's summary, and the kernels with their placement (for the roofline)."""
    from sweeper.analysis.attribution import model_code as attribute

    kernels = profiled_kernels(events, device, tr.annotation_ranges(events, label))
    summary, placed = attribute(kernels, modules, cast(dict, breakdown))
    label_trace(trace_path, {(k.name, k.start_us): got for k, got in zip(kernels, placed.events)},
                breakdown["runs"], label, rank)
    return summary, kernels, placed


def label_trace(trace_path: Path, labels: dict[tuple[str, float], tuple[str, str | None]], runs: int,
                label: str, rank: int = 0) -> None:
    """The trace rewritten with `labels` ((name, start) -> (model modules, source line)) in
    its kernel events' args (Perfetto shows them on click), a rank of its own
    (distributedInfo: 0 the step's, 1 + its compile order a compiled module's, so that the
    job's traces folder reads as one trace a rank) and a ProfilerStep#<i> event a profiled
    call (trace.profiler_steps): what trace tools such as Holistic Trace Analysis read to
    tell traces and iterations apart."""
    import json

    with gzip.open(trace_path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    data["traceEvents"] = list(data.get("traceEvents") or []) + tr.profiler_steps(data.get("traceEvents") or [], runs,
                                                                                 label)
    for e in data.get("traceEvents") or []:
        if isinstance(e, dict) and e.get("ph") == "X":
            got = labels.get((str(e.get("name")), float(e.get("ts", 0.0))))
            if got is not None:
                args = e.setdefault("args", {})
                args["model modules"] = got[0]
                if got[1]:
                    args["model source"] = got[1]
    data["distributedInfo"] = {"backend": "none", "rank": rank, "world_size": 1}
    tmp = trace_path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
        json.dump(data, f)
    os.replace(tmp, trace_path)
