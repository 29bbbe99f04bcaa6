"""The per-module view (what `python <module>.py -p` prints), measured in the job's own
process on the module objects it already loaded."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from sweeper.breakdown import spread
from tasks.capture import CapturedModule, loaded_module
from tasks.profiling import analyse, profile_calls
from tasks.timing import launch_probe_us, synchronize, time_calls, time_until_steady


def _entry(m: CapturedModule) -> dict:
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


def skipped_module(m: CapturedModule, note: str) -> dict:
    entry = _entry(m)
    entry.update(status="skipped", note=note)
    return entry


def time_module(m: CapturedModule, device: str, measure: dict, inputs: list | None) -> dict:
    """Unprofiled wall time of one compiled module, run on `inputs` (the real inputs of a
    step, see capture.InputCapture) or else its own get_args(). Returns the module's
    entry of the record; profile_module() completes it."""
    started = time.perf_counter()
    entry = _entry(m)
    mod = loaded_module(m.path)
    if inputs is not None:
        args, entry["inputs"] = inputs, "captured from a real step"
    elif hasattr(mod, "get_args"):
        args, entry["inputs"] = mod.get_args(), "get_args() (random benchmark inputs)"
    else:
        return skipped_module(m, "no inputs: the step never called this module and it has no get_args()")

    def call():
        return mod.call(list(args))  # call() clears the list it is given

    t0 = time.perf_counter()
    for _ in range(3):
        call()
    synchronize(device)
    entry["warmup_s"] = round(time.perf_counter() - t0, 3)
    # Wall time: many rounds after a warm-up, median and spread, because every percentage
    # of the reference harness is relative to this one number (see breakdown.py). It is
    # measured the harness's way (a wait after every call), so that the reference-style
    # busy figure compares with `-p`; the pipelined time (calls back to back, as in a
    # training loop) is kept beside it.
    # Rounds stop early once they agree (measure.module_steady_pct): on an H200, mixnet_l's
    # modules agreed within 1% while 15 rounds of both timings cost 20 s of a 115 s compile.
    rounds, per_round = measure["module_rounds"], measure["module_calls_per_round"]
    min_rounds = min(measure.get("module_min_rounds", rounds), rounds)
    # Each round comes with a reading of the host's launch speed (timing.launch_probe_us),
    # so that rounds and jobs that read slow can be told apart from a slow module.
    wall, launch = time_until_steady(call, device, per_round, min_rounds, rounds,
                                     measure.get("module_steady_pct", 0.0), probe=lambda: launch_probe_us(device))
    entry["wall_ms"], entry["launch_us"] = spread(wall), spread(launch)
    entry["wall_ms_pipelined"] = spread(time_calls(call, min_rounds, device, per_round))
    # Where time_modules' seconds go (on the H200, mixnet_l's phase took 18 s where its
    # rounds account for about 9 s; session 4)
    entry["seconds"] = round(time.perf_counter() - started, 3)
    entry["_call"] = call  # kept for profile_module(), dropped from the record
    return entry


def profile_module(entry: dict, device: str, measure: dict, trace_path: Path) -> dict:
    """Profile the module's calls (after every unprofiled timing of the job: a profiler
    session can leave per-launch overhead behind) and break its device time down."""
    call = entry.pop("_call", None)
    if call is None:
        return entry
    events = profile_calls(call, measure["module_profile_calls"], device, "sweeper.call", trace_path)
    entry["breakdown"] = analyse(events, device, "sweeper.call", measure["module_profile_calls"],
                                 entry["wall_ms"]["median"])
    entry["trace"] = str(trace_path)
    del call, events
    if device == "cuda":
        torch.cuda.empty_cache()
    return entry
