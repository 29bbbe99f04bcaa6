"""The scheduler's own cost at a sweep's size: the real scheduling policy
(sweeper/sweep/scheduler.py) over 10 to 1,000 jobs against an executor that runs nothing
(sweeper/sweep/memory_executor.py), every record and summary.json written as in a sweep.
One composed config is reused for every job (composing 1,000 with Hydra is the launcher's
cost, not the scheduler's). Prints a Markdown table: seconds in all and per job, and of
those the summary's writes.

    python bench/scheduler_scale.py [--jobs 10,100,1000] [--summary-every-s S]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def jobs_of(n: int, sweep_dir: Path) -> list:
    from hydra import compose, initialize_config_dir

    from sweeper.sweep.control import Job, job_spec
    from sweeper.sweep.hydra_setup import register

    register()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=resnet18"])
    base = job_spec(0, ["model=resnet18"], cfg)
    out = []
    for num in range(n):
        overrides = ["model=resnet18", f"batch_size={num + 1}"]
        spec = dataclasses.replace(base, job_id=str(num), overrides=tuple(overrides),
                                   config={**base.config, "batch_size": num + 1, "device": "cuda"})
        out.append(Job(num, overrides, cfg, sweep_dir / str(num), spec))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", default="10,100,1000")
    ap.add_argument("--summary-every-s", type=float, default=None,
                    help="summary.json's rewrites at most one in this many seconds (default: the scheduler's; "
                         "0: after every job, as before the scheduler kept it to one in 2 s)")
    args = ap.parse_args()
    from sweeper.sweep import summary as sm
    from sweeper.sweep.memory_executor import MemoryExecutor
    from sweeper.sweep.scheduler import Scheduler

    from sweeper.sweep.settings import LauncherSettings

    settings = LauncherSettings()  # the defaults: resume, jobs_per_gpu=auto, spare GPUs lent
    nodes = tuple({"Alive": True, "NodeID": f"n{i}", "Resources": {"CPU": 16.0, "GPU": 1.0}} for i in range(8))
    writes = {"s": 0.0, "n": 0}
    real_write = sm.write_summary

    def timed_write(*a, **k):
        t0 = time.perf_counter()
        real_write(*a, **k)
        writes["s"] += time.perf_counter() - t0
        writes["n"] += 1

    sm.write_summary = timed_write
    import sweeper.sweep.scheduler as sched_mod

    sched_mod.sm.write_summary = timed_write
    if args.summary_every_s is not None:
        sched_mod.SUMMARY_EVERY_S = args.summary_every_s
    print(f"`python bench/scheduler_scale.py --jobs {args.jobs}"
          + (f" --summary-every-s {args.summary_every_s:g}" if args.summary_every_s is not None else "") + "`\n")
    print("| jobs | seconds | ms a job | summary writes | of which writing summary.json, s | summary bytes |")
    print("|---|---|---|---|---|---|")
    for n in (int(x) for x in args.jobs.split(",")):
        writes.update(s=0.0, n=0)
        with tempfile.TemporaryDirectory() as tmp:
            sweep_dir = Path(tmp)
            jobs = jobs_of(n, sweep_dir)
            t0 = time.perf_counter()
            Scheduler(settings, jobs, sweep_dir, MemoryExecutor(nodes=nodes), command=["bench"]).run()
            took = time.perf_counter() - t0
            size = (sweep_dir / sm.SUMMARY_FILE).stat().st_size
        print(f"| {n} | {took:.2f} | {took / n * 1000:.1f} | {writes['n']} | {writes['s']:.2f} | {size:,} |")


if __name__ == "__main__":
    main()
