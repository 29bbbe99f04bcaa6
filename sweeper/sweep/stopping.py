"""How a sweep stops early (sweeper/sweep/scheduler.py): Ctrl-C or SIGTERM, which cancels
what runs and what is queued and keeps what finished; and a sweep folder that cannot take a
finished job's results or a starting job's files (a full disk), which stops the sweep with
exit code 2, every job's state said."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from sweeper.stores import exchange
from sweeper.sweep import summary as sm
from sweeper.sweep.control import Job, launch_spec, save_hydra_files
from sweeper.sweep.executor import ResultsNotWritten
from sweeper.sweep.job_process import failed_record

# `sweep` below: the sweep's Scheduler (sweeper/sweep/scheduler.py, which imports this module)
Scheduler = Any


def cancel(sweep: Scheduler) -> None:
    """Ctrl-C or SIGTERM: the jobs whose results are being read kept, the running ones
    cancelled (their logs and partial autotuning brought back), the queued ones recorded as
    cancelled, summary.json written."""
    for got in sweep.collector.finish() if sweep.collector is not None else []:  # finished: their results kept
        if got.record is not None:
            sweep.finished(got.job, got.record)
    queued = list(sweep.queue) if sweep.queue is not None else list(sweep.to_run)  # none submitted yet
    print(f"\n[sweep] interrupted: cancelling {len(sweep.pending)} running and {len(queued)} queued jobs; "
          "finished results are kept",
          flush=True)
    sweep.executor.cancel(list(sweep.pending))
    stopped = list(sweep.pending.values())
    try:  # the stopped jobs' logs, and what the autotune jobs had tuned so far, for the store
        kept = sweep.executor.salvage(stopped) if stopped else 0
        if any(exchange.shares(job.spec.config) for job in stopped):
            print(f"[sweep] autotune entries of {kept} stopped jobs brought back for the store", flush=True)
    except Exception as e:  # noqa: BLE001 - the finished results and the summary come first
        print(f"[sweep] what the stopped jobs left on their nodes could not be brought back: {type(e).__name__}: {e}",
              flush=True)
    for job in stopped:
        record = sweep.executor.record_without_worker(job, "cancelled (Ctrl-C or SIGTERM) before it finished",
                                                     time.time() - sweep.submitted_at[job.num], "cancelled")
        sweep.finished(job, exchange.bring_back(job.spec, job.job_dir, record))
    for job in queued:  # never submitted
        save_hydra_files(job)
        sweep.finished(job, sweep.executor.record_without_worker(job, "cancelled (Ctrl-C or SIGTERM) before it started",
                                                               0.0, "cancelled"))
    sm.write_summary(sweep.sweep_dir, list(sweep.entries.values()), sweep.started, sweep.command, done=False)


def stop_unwritable(sweep: Scheduler, e: ResultsNotWritten, took: float) -> None:
    """A finished job's results could not be written into the sweep folder (a full disk):
    the sweep stops here, with every job's state in summary.json where it can still be
    written, the results named where they still are (the job's scratch folder, kept), and
    exit code 2. The jobs still running are cancelled, their scratch folders kept too."""
    print(f"\nsweeper: {e}.", file=sys.stderr, flush=True)
    left = {job.num: str(sweep.executor.scratch_of(job)) for job in sweep.pending.values()}
    sweep.executor.cancel(list(sweep.pending))
    entry = sm.job_entry(e.job.num, e.job.overrides, e.job.job_dir, failed_record(
        launch_spec(e.job), e.job.job_dir, f"finished, but its results could not be written into the sweep folder "
        f"({e.error}); they are in {e.scratch} on {e.host}", took))
    sweep.entries[e.job.num] = {**entry, "log": str(Path(e.scratch) / "job.log"), "log_note": f"on {e.host}"}
    _cancelled(sweep, [*sweep.pending.values(), *(sweep.queue or [])],
               "cancelled: the sweep stopped, its folder could not take a finished job's results")
    sweep.pending.clear()
    if left:
        print("sweeper: the jobs that were still running were cancelled; what they wrote is in their scratch "
              "folders: " + ", ".join(f"#{n} {d}" for n, d in sorted(left.items())), file=sys.stderr)
    _stopped(sweep)


def stop_unstartable(sweep: Scheduler, job: Job, error: OSError) -> None:
    """A job's files could not be written into the sweep folder as it was about to start
    (a full disk): once the running jobs were read, the sweep stops the same way, the jobs
    not started recorded as cancelled, exit code 2."""
    print(f"\nsweeper: job #{job.num} could not start: its files could not be written into {job.job_dir} ({error}).",
          file=sys.stderr, flush=True)
    _cancelled(sweep, list(sweep.queue or []), "cancelled: the sweep stopped, its folder could not take a job's files")
    _stopped(sweep)


def _cancelled(sweep: Scheduler, jobs: list[Job], why: str) -> None:
    """The summary's entries of jobs the full sweep folder stopped (no record is written
    into it: it has no room)."""
    for job in jobs:
        sweep.entries[job.num] = sm.job_entry(job.num, job.overrides, job.job_dir, failed_record(
            launch_spec(job), job.job_dir, why, 0.0, status="cancelled"))


def _stopped(sweep: Scheduler) -> None:
    """summary.json written where it can be, what to do said, exit code 2."""
    try:
        sm.write_summary(sweep.sweep_dir, list(sweep.entries.values()), sweep.started, sweep.command, done=False)
        where = f"{sweep.sweep_dir / sm.SUMMARY_FILE} says where each job stands"
    except OSError as err:
        where = f"summary.json could not be written either ({err})"
    print(f"sweeper: the sweep stopped; {where}. Free space in {sweep.sweep_dir} (or choose another "
          "hydra.sweep.dir) and run the same command again: finished jobs whose results are in the folder "
          "are kept, the others run again.", file=sys.stderr, flush=True)
    raise SystemExit(2)
