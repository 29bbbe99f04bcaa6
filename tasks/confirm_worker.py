"""One side of `python -m sweeper.history confirm`: a job's compiled step, built and
compiled once, then timed a round at a time when the driver asks, so that two such
processes (the old and the new job) take their rounds in turn on one machine.

    python -m tasks.confirm_worker <work_dir>     # <work_dir>/job.json, as a job's

Runs the job's phases up to its warm-up (tasks/job.py: setup, build, compile, warmup), with
no GPU lease and no stored compile (a fresh compile of the job as configured), then reads
its standard input: `round N` times N calls of the step (each waiting for the device) and
answers one line `CONFIRM {"ms": [...], "launch_us": ...}`; `quit` ends it. Progress lines
are the job's own ("[sweeper] ..."); a failure answers `CONFIRM {"error": ...}`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

MARK = "CONFIRM"
PHASES_BEFORE_TIMING = ("setup", "build", "compile", "warmup")


def answer(payload: dict) -> None:
    print(f"{MARK} {json.dumps(payload)}", flush=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tasks.confirm_worker <work_dir>", file=sys.stderr)
        return 2
    work = Path(argv[1]).resolve()
    from sweeper.job_spec import JobSpec
    from tasks.job import PHASES, prepare_process

    spec = JobSpec.from_json(json.loads((work / "job.json").read_text()))
    # no lease (the driver takes the rounds in turn), no stored compile, nothing to resume
    spec = dataclasses.replace(spec, gpu_lease=None, compile_seed=None, earlier_attempts=None)
    prepare_process(spec.config, work)
    from tasks.job_context import JobContext, made
    from tasks.timing import launch_probe_us, time_calls

    ctx = JobContext(spec, work)
    try:
        for phase in PHASES:
            if phase.name in PHASES_BEFORE_TIMING and phase.when(ctx):
                ctx.keep(phase.run(ctx))
        step = made(ctx.step, "the compiled step")
    except Exception as e:  # noqa: BLE001 - said to the driver, which names the job
        answer({"error": f"{type(e).__name__}: {e}"})
        return 1
    answer({"ready": True, "device": ctx.device})
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] == "round":
            try:
                launch = launch_probe_us(ctx.device)
                answer({"ms": time_calls(step, int(words[1]), ctx.device), "launch_us": launch})
            except Exception as e:  # noqa: BLE001 - said to the driver
                answer({"error": f"{type(e).__name__}: {e}"})
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    os._exit(code)  # as a job does: no teardown of torch's worker pools
