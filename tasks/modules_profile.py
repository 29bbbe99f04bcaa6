"""The per-module view (what `python <module>.py -p` prints), measured in the job's own
process on the module objects it already loaded."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, cast

import torch

from sweeper.analysis.breakdown import spread as _spread
from sweeper.analysis.breakdown import wall_figure
from sweeper.record_schema import ModuleEntry, Spread
from tasks.capture import CapturedModule, loaded_module
from tasks.profiling import analyse, model_code, profile_calls
from tasks.timing import probed_round, synchronize, time_calls


def spread(values: list[float]) -> Spread:
    return cast(Spread, _spread(values))  # the dict spread() builds is a Spread


def _entry(m: CapturedModule) -> ModuleEntry:
    return {
        "label": m.label(),
        "role": m.role,
        "graph_id": m.graph_id,
        "frame_id": m.frame_id,
        "frame_compile_id": m.frame_compile_id,
        "source_path": m.path,
        "status": "ok",
        "note": None,
        "inputs": None,
        "wall_ms": None,
        "wall_ms_pipelined": None,
        "launch_us": None,
        "warmup_s": None,
        "seconds": None,
        "breakdown": None,
        "trace": None,
    }


def skipped_module(m: CapturedModule, note: str) -> ModuleEntry:
    entry = _entry(m)
    entry["status"], entry["note"] = "skipped", note
    return entry


@dataclass
class ModuleRun:
    """One module's record entry and, apart from it, the live call that times and profiles
    it: the entry becomes JSON, the call never does."""

    entry: ModuleEntry
    call: Callable[[], object] | None = None

    def fail(self, what: str, reason: str) -> "ModuleRun":
        """One module's failure is noted in its entry, not fatal to the job."""
        self.call = None
        self.entry["status"], self.entry["note"] = "failed", f"{what} failed: {reason}"
        return self


def prepare_module(m: CapturedModule, device: str, inputs: list | None) -> ModuleRun:
    """Load one compiled module, pick its inputs (the real inputs of a step, see
    capture.InputCapture, or else its own get_args()) and warm it up. Returns the module's
    entry with the call for the timing rounds (tasks/phases.py takes them in turn across
    the modules, timing.rounds_in_turn), finish_timing() and profile_module()."""
    started = time.perf_counter()
    entry = _entry(m)
    mod = loaded_module(m.path)
    if inputs is not None:
        args, entry["inputs"] = inputs, "captured from a real step"
    elif hasattr(mod, "get_args"):
        args, entry["inputs"] = mod.get_args(), "get_args() (random benchmark inputs)"
    else:
        return ModuleRun(skipped_module(m, "no inputs: the step never called this module and it has no get_args()"))

    def call():
        return mod.call(list(args))  # call() clears the list it is given

    t0 = time.perf_counter()
    for _ in range(3):
        call()
    synchronize(device)
    entry["warmup_s"] = round(time.perf_counter() - t0, 3)
    entry["seconds"] = time.perf_counter() - started  # finish_timing() adds its rounds' seconds
    return ModuleRun(entry, call)


def timing_round(run: ModuleRun, device: str, measure: dict) -> tuple[float, float]:
    """One round of the module's wall time: (ms a call, the launch probe's µs just before).
    Measured the harness's way (a wait after every call), so that the reference-style busy
    figure compares with `-p`. Each round comes with a reading of the host's launch speed,
    so that rounds and jobs that read slow can be told apart from a slow module."""
    assert run.call is not None, "a module is timed only once it has a call"
    t0 = time.perf_counter()
    result = probed_round(run.call, device, measure["module_calls_per_round"])
    run.entry["seconds"] = (run.entry["seconds"] or 0.0) + time.perf_counter() - t0
    return result


def finish_timing(run: ModuleRun, rounds: list[tuple[float, float]], device: str, measure: dict) -> ModuleRun:
    """The module's wall time from its rounds (median, trimmed mean and spread, because
    every percentage of the reference harness is relative to this one number, see
    breakdown.py), then the pipelined time (calls back to back, as in a training loop)."""
    assert run.call is not None, "a module is timed only once it has a call"
    t0 = time.perf_counter()
    entry = run.entry
    entry["wall_ms"] = spread([wall for wall, _ in rounds])
    entry["launch_us"] = spread([reading for _, reading in rounds])
    n = min(measure["module_min_rounds"], len(rounds))
    entry["wall_ms_pipelined"] = spread(time_calls(run.call, n, device, measure["module_calls_per_round"]))
    # where time_modules' seconds go: on the H200 mixnet_l's phase once took twice its rounds' time
    entry["seconds"] = round((entry["seconds"] or 0.0) + time.perf_counter() - t0, 3)
    return run


def profile_module(run: ModuleRun, device: str, measure: dict, trace_path: Path, sites: list | None = None) -> ModuleRun:
    """Profile the module's calls (after every unprofiled timing of the job: a profiler
    session can leave per-launch overhead behind) and break its device time down; with
    its launch `sites`, placed on the model's code too (entry["model_code"])."""
    call, run.call = run.call, None
    if call is None:
        return run
    entry = run.entry
    assert entry["wall_ms"] is not None, "a module keeps its call only once it is timed (finish_timing)"
    events = profile_calls(call, measure["module_profile_calls"], device, "sweeper.call", trace_path)
    entry["breakdown"] = analyse(events, device, "sweeper.call", measure["module_profile_calls"],
                                 wall_figure(entry["wall_ms"]))
    entry["trace"] = str(trace_path)
    if sites is not None and entry["breakdown"] is not None:
        entry["model_code"] = model_code(events, device, "sweeper.call", entry["breakdown"], [sites], trace_path,
                                         rank=1 + (entry["graph_id"] or 0))[0]
    del call, events
    if device == "cuda":
        torch.cuda.empty_cache()
    return run
