"""Orchestration cost per job of a Ray sweep on this machine.

    python bench/ray_overhead.py [--jobs 20] [--out bench/results/ray_overhead.md]

Runs N small real jobs (test_resnet inference at 32x32, seeds 0..N-1) through
`python -m sweeper` and reports (sweep wall time x concurrent slots - sum of the jobs'
own run times) / jobs: what worker start, scheduling, shipping results back and the
summary cost per job, beyond the job itself. A job's own run time is its process's life
(result.json's job.process_s); the figure against the job's own timer (job.duration_s)
is printed beside it. Target: under 2 s per job.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    seeds = ",".join(str(i) for i in range(args.jobs))
    overrides = ["model=test_resnet", f"seed={seeds}", "mode=inference", "image_size=32", "batch_size=2",
                 "measure.timed_steps=2", "measure.warmup_steps=1", "measure.profile_steps=1",
                 "measure.module_rounds=2", "measure.module_calls_per_round=1", "measure.module_profile_calls=1",
                 "measure.eager=false"]
    with tempfile.TemporaryDirectory() as tmp:
        sweep_dir = Path(tmp) / "sweep"
        t0 = time.time()
        proc = subprocess.run([sys.executable, "-m", "sweeper", *overrides, f"hydra.sweep.dir={sweep_dir}",
                               f"hydra.launcher.scratch_dir={tmp}/scratch"], cwd=ROOT, capture_output=True, text=True)
        wall = time.time() - t0
        if proc.returncode != 0:
            print(proc.stdout[-3000:], proc.stderr[-3000:])
            return 1
        summary = json.loads((sweep_dir / "summary.json").read_text())
        launched = [l for l in proc.stdout.splitlines() + proc.stderr.splitlines() if "up to" in l and "at a time" in l]
        slots = int(launched[-1].split("up to ")[1].split()[0]) if launched else 1
        jobs = [json.loads((Path(j["dir"]) / "result.json").read_text())["job"] for j in summary["jobs"]]
    durations = [j["duration_s"] for j in jobs]
    processes = [j.get("process_s", j["duration_s"]) for j in jobs]
    per_job = (wall * slots - sum(processes)) / len(jobs)
    per_job_timer = (wall * slots - sum(durations)) / len(jobs)
    text = (f"# Ray sweep orchestration cost\n\ncommand: `python bench/ray_overhead.py --jobs {args.jobs}`\n"
            f"machine: {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores, CPU only\n\n"
            "| jobs | slots | sweep wall s | sum of job process lifetimes s | orchestration s per job | "
            "sum of job timers s | the same against job timers |\n|---|---|---|---|---|---|---|\n"
            f"| {len(jobs)} | {slots} | {wall:.1f} | {sum(processes):.1f} | **{per_job:.2f}** | "
            f"{sum(durations):.1f} | {per_job_timer:.2f} |\n\n"
            "A job's own run time is its process's life (`job.process_s`: interpreter start, torch import, the chain, "
            "exit), the work any launcher must do to run it; the last column counts only the job's own timer "
            "(`job.duration_s`), so the gap between the two columns is the job process's start and exit. The sweep "
            "wall time includes Hydra's start-up and starting and stopping the embedded Ray, spread over the jobs.\n")
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
