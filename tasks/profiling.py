"""Run a callable under torch.profiler, save the Chrome trace compressed, analyse it."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Callable, cast

from torch.profiler import ProfilerActivity, profile, record_function

from sweeper.analysis import breakdown as bd
from sweeper.analysis import outside_graphs
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
    # exported where the path has no backslash: the profiler writes `\` as `/` (a sweep
    # folder named with one failed every job in profile_step), then compressed to its place
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sweeper-trace-") as tmp:
        raw = Path(tmp) / "trace.json" if "\\" not in tmp else trace_path.with_suffix("")
        prof.export_chrome_trace(str(raw))
        with open(raw, "rb") as src, gzip.open(trace_path, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        raw.unlink(missing_ok=True)
    return tr.load_trace(trace_path)


def link_call(fn: Callable[[], object], device: str, label: str) -> list[tuple[str, tuple[str, float] | None]] | None:
    """One more call, traced with its host ops (never timed, never saved), for what the
    device-only profile lacks: which ATen op launched each kernel (trace.device_links). A
    GPU's library kernels between two generated ones then go to the extern call that
    launched them (sweeper/analysis/attribution.place_gap). None on a CPU (its profile is of
    the ops themselves) and where the trace cannot be read."""
    import json
    import tempfile

    if device != "cuda":
        return None
    synchronize(device)
    with paused(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function(label):
            fn()
        synchronize(device)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "links.json"
        prof.export_chrome_trace(str(raw))
        try:
            data = json.loads(raw.read_text())
        except (OSError, ValueError):
            return None
    events = data.get("traceEvents") if isinstance(data, dict) else None
    return tr.device_links([e for e in events or [] if isinstance(e, dict)])


def analyse(events: list[dict], device: str, label: str, runs: int, wall_ms: float | None,
            busy_wall_ms: float | None = None) -> Breakdown:
    """Breakdown of profiled calls: device kernels on a GPU; on a CPU, the C++ kernels and
    ATen ops run inside the labelled ranges. busy_wall_ms: the busy figure's divisor, where
    it is not wall_ms (breakdown.breakdown)."""
    ranges = tr.annotation_ranges(events, label)
    kernels = profiled_kernels(events, device, ranges)
    span = bd.profiled_span(kernels, ranges)
    return cast("Breakdown", bd.breakdown(kernels, runs=runs, span=span, wall_ms=wall_ms, busy_wall_ms=busy_wall_ms,
                        host_timed=device != "cuda",  # the dict breakdown() builds is a Breakdown
                        run_of=tr.run_index(kernels, runs, ranges)))


def profiled_kernels(events: list[dict], device: str, ranges: list[tuple[float, float]]) -> list[tr.Interval]:
    """What a breakdown counts, in start order: device kernels on a GPU; on a CPU, the C++
    kernels and ATen ops run inside the labelled `ranges`."""
    if device == "cuda":
        return tr.device_kernels(events)
    return [k for k in tr.cpu_kernels(events) if any(s <= k.start_us and k.end_us <= e for s, e in ranges)]


def model_code(events: list[dict], device: str, label: str, breakdown: Breakdown, modules, trace_path: Path,
               rank: int = 0, linked: list | None = None) -> tuple[dict, list, Placed]:
    """Where in the model the profiled kernels' time comes from (sweeper/analysis/attribution.py;
    `modules`: the launch sites of each compiled module the profile ran, in call order;
    `linked`: link_call's kernels of one more call, for the ops that launched them); each
    kernel event of the trace at `trace_path` gets its model module and source line in its args.
    Returns the record's summary, and the kernels with their placement (for the roofline)."""
    from sweeper.analysis.attribution import model_code as attribute

    ranges = tr.annotation_ranges(events, label)
    kernels = profiled_kernels(events, device, ranges)
    links = tr.transfer_links(kernels, breakdown["runs"], linked) if linked else None
    summary, placed = attribute(kernels, modules, cast(dict, breakdown), links,
                                tr.run_index(kernels, breakdown["runs"], ranges))
    summary["links"] = ("the profiler's op of each kernel, from one more call traced with its host ops"
                        if links is not None else "none: " + ("a CPU profile is of the ops themselves" if device != "cuda"
                                                               else "no call traced with its host ops matched the profile"
                                                               if linked else "no call traced with its host ops"))
    summary["outside"] = outside_parts(events, kernels, placed, links)
    label_trace(trace_path, {(k.name, k.start_us): got for k, got in zip(kernels, placed.events)},
                breakdown["runs"], label, rank, scale=placed.scale)
    return summary, kernels, placed


def outside_parts(events: list[dict], kernels: list, placed: Placed, links: list | None) -> dict[str, float]:
    """What the kernel time outside the compiled graphs is, ms a run by what ran it: the
    autograd node around each op of a CPU trace (AccumulateGrad: gradients copied into
    .grad), the ATen op linked to each GPU kernel, else eager code the trace does not name."""
    from sweeper.analysis.attribution import OUTSIDE

    mark = f"not placed: {OUTSIDE}"
    nodes = outside_graphs.autograd_nodes(events, kernels) if any(k.cat == "cpu_op" for k in kernels) else [None] * len(kernels)
    out: dict[str, float] = {}
    for i, (k, (label, _)) in enumerate(zip(kernels, placed.events)):
        if label != mark:
            continue
        what = nodes[i] or (links[i][0] if links is not None and links[i] else None)
        words = outside_graphs.outside_words(what)
        out[words] = out.get(words, 0.0) + k.dur_us / 1000 / placed.runs * placed.scale
    return {k: round(v, 6) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def label_trace(trace_path: Path, labels: dict[tuple[str, float], tuple[str, str | None]], runs: int,
                label: str, rank: int = 0, scale: float = 1.0) -> None:
    """The trace rewritten with `labels` ((name, start) -> (model modules, source line)) in
    its kernel events' args (Perfetto shows them on click), a rank of its own
    (distributedInfo: 0 the step's, 1 + its compile order a compiled module's, so that the
    job's traces folder reads as one trace a rank) and a ProfilerStep#<i> event a profiled
    call (trace.profiler_steps): what trace tools such as Holistic Trace Analysis read to
    tell traces and iterations apart. `scale`: the factor the report's times are of the
    trace's (a CPU profile slows the ops it times: breakdown.to_unprofiled), said in the
    trace's `sweeper` metadata and in each labelled event's args, so that a reader of the
    trace sees why its durations are the report's divided by it."""
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
                if scale != 1.0:
                    args["sweeper scale"] = scale
                    args["sweeper dur (us)"] = round(float(e.get("dur", 0.0)) * scale, 3)
    data["distributedInfo"] = {"backend": "none", "rank": rank, "world_size": 1}
    data["sweeper"] = {"profiled_scale": scale,
                       "note": ("the report's times are this trace's durations times profiled_scale: the profiler "
                                "slowed the host ops it timed, and the report scales them to the unprofiled step "
                                "(docs/method.md, 'Reading a trace beside the report')" if scale != 1.0 else
                                "the report's times are this trace's durations")}
    tmp = trace_path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=6) as f:
        json.dump(data, f)
    os.replace(tmp, trace_path)
