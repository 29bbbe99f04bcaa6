"""The sweep's scheduling policy, without Ray: which jobs run, in which order, how many at a
time and on how many GPUs, and what becomes of each as it ends. Where the jobs run is an
`Executor`'s business (sweeper/sweep/executor.py; Ray's: hydra_plugins/sweeper_ray/_executor.py;
one that runs nothing, for the tests and benches: sweeper/sweep/memory_executor.py).

- Finished jobs are kept (resume): a job whose ok record of the same overrides is in the
  sweep folder is not run again.
- Jobs start one free slot at a time, in the order of sweeper/sweep/order.py (longest first;
  a group's first autotune=on job before the others of its shapes), so that each leaves
  with the autotune store as it is when it starts (sweeper/stores/exchange.py).
- Slots: the cluster's GPUs over each job's share of one (packing: sweeper/sweep/packing.py),
  or its CPUs over each job's. An autotune=on job may take the GPUs no queued job will
  need (spare_gpus.py). A packed job that ran out of GPU memory runs again alone, once.
- summary.json is rewritten as jobs end, at most every SUMMARY_EVERY_S seconds and at the
  end; Ctrl-C (or SIGTERM) cancels the rest and keeps what finished; a finished job whose results cannot be written (a full disk) stops the
  sweep with exit code 2, every job's state said.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeper.record import Record, write_record
from sweeper.stores import exchange
from sweeper.stores.storage import Storage
from sweeper.sweep import packing, pythons, stopping
from sweeper.sweep import summary as sm
from sweeper.sweep.collector import Collected, Collector
from sweeper.sweep.control import (Job, check_jobs, earlier_record, keep_earlier_log, launch_spec, reusable,
                                   save_hydra_files, stored_artifacts_missing)
from sweeper.sweep.executor import Executor, ResultsNotWritten, cpu_only, job_resources, slots_of
from sweeper.sweep.order import JobQueue, shape_group
from sweeper.sweep.progress import Progress
from sweeper.sweep.settings import LauncherSettings
from sweeper.sweep.spare_gpus import gpus_for
from sweeper.words import count

log = logging.getLogger(__name__)

COLLECT_BEHIND = 2  # finished jobs whose results are being read before the loop waits for them
SUMMARY_EVERY_S = 2.0  # summary.json's rewrites while jobs run, at most one in this many seconds
# ...and at most this share of the driver's time: a rewrite waits SUMMARY_SHARE^-1 times the last
# one's seconds (a 10,000-job summary is 7.6 MB: rewritten every 2 s, its writes grew with the sweep)
SUMMARY_SHARE = 0.05


@dataclass
class Scheduler:
    """One sweep's jobs on an executor: finished ones kept, the rest started as slots free
    up, collected as they end, summary.json rewritten as they do; Ctrl-C cancels the rest.
    `settings`: the launcher's (sweeper/sweep/settings.py)."""

    settings: LauncherSettings
    jobs: list[Job]
    sweep_dir: Path
    executor: Executor
    command: list[str] = field(default_factory=lambda: sys.argv[1:])
    started: float = field(default_factory=time.time)
    entries: dict[int, dict] = field(default_factory=dict)
    records: dict[int, Record] = field(default_factory=dict)
    pending: dict[Any, Job] = field(default_factory=dict)  # handle -> job
    queue: JobQueue | None = None  # jobs not submitted yet
    to_run: list[Job] = field(default_factory=list)
    submitted_at: dict[int, float] = field(default_factory=dict)
    slots: int = 1
    gpu_slots: int | None = None
    gpus_of: dict[int, int] = field(default_factory=dict)  # job -> GPU slots it holds (spare GPUs lent; alone)
    lend: bool = False
    jobs_per_gpu: int = 1
    packing: str = ""
    resources: dict = field(default_factory=dict)
    alone: dict[int, str] = field(default_factory=dict)  # job -> why it runs again alone on its GPU
    summary_at: float = 0.0  # when summary.json was last written
    summary_took: float = 0.0  # seconds the last write of summary.json took
    collector: Collector | None = None  # the finished jobs whose results are being read (wait_all)
    unstartable: tuple[Job, OSError] | None = None  # a job whose files the sweep folder could not take

    @functools.cached_property
    def storage(self) -> Storage | None:
        """The shared storage the workers keep the compile store in (storage_path), if any."""
        return Storage.of(self.settings.storage_path)

    def run(self, expected=None) -> None:
        """Every job to its end. `expected(jobs, slots)`: the sweep's expected duration (a
        line, seconds) from earlier sweeps, for the progress line. Ctrl-C or SIGTERM at any
        point of it (while the executor starts, between the submission and the wait: a
        SIGTERM there once left no summary.json) cancels every job not finished."""
        progress = None
        try:
            to_run = self.to_run = self.keep_finished()
            if to_run:  # nothing to run (a finished sweep resumed): no executor at all
                self.submit(to_run)
            line, expected_s = expected(to_run, self.slots) if to_run and expected else ("", None)
            if line:
                log.info(line)
            progress = Progress(len(self.jobs), len(self.jobs) - len(to_run), expected_s=expected_s)
            self.write_summary(force=True)
            progress.start()
            self.wait_all(progress)
        except KeyboardInterrupt:
            if progress is not None:
                progress.stop()  # before the message, so that it prints below the live line
            stopping.cancel(self)
            raise
        finally:
            if progress is not None:
                progress.stop()  # the live line's last state stays on the screen

    def keep_finished(self) -> list[Job]:
        """The jobs to run: those without an ok record of the same overrides (resume)."""
        to_run = []
        for job in self.jobs:
            record = reusable(job, stored_artifacts_missing) if self.settings.resume else None
            if record is None:
                earlier = earlier_record(job)
                kept_log = keep_earlier_log(job) if earlier and earlier.get("status") != "ok" else None
                attempts = exchange.earlier_attempts(job.spec.config, earlier, log=kept_log)
                if attempts:  # stopped runs of this job gave the store their partial tuning: the record says so
                    job.earlier_attempts = attempts
                to_run.append(job)
                continue
            self.entries[job.num] = sm.job_entry(job.num, job.overrides, job.job_dir, record, reused=True)
            self.records[job.num] = record
        return to_run

    def submit(self, to_run: list[Job]) -> None:
        """The executor started, the slots counted, the first jobs started."""
        cluster = self.executor.start()
        check_jobs(to_run, gpus_available=cluster.total("GPU"))
        self.jobs_per_gpu, self.packing = packing.packing_of(self.settings, cluster.nodes, len(to_run),
                                                             cpu_only(to_run), cluster.gpu_memory_gib,
                                                             cluster.on_cluster)
        res = self.resources = job_resources(self.settings, cluster, self.jobs_per_gpu)
        self.slots = slots_of(cluster, res)
        log.info(f"Launching {count(len(to_run), 'job')} on Ray ({len(self.jobs) - len(to_run)} kept from an earlier run), "
                 f"{res['num_gpus']:g} GPU and {res['num_cpus']:g} CPU each, up to {self.slots} at a time"
                 + (f"; {self.packing}" if self.packing else ""))
        envs = pythons.assign_interpreters(to_run)
        if envs and cluster.on_cluster:  # checked where the jobs will run
            for line in self.executor.check_pythons(envs, bool(cluster.total("GPU")) and not cpu_only(to_run)):
                log.info(line)
        self.gpu_slots = int(cluster.total("GPU") // res["num_gpus"]) if res["num_gpus"] else None
        gpu_nodes = sum(1 for n in cluster.nodes if n.get("Alive") and n["Resources"].get("GPU", 0) > 0)
        self.lend = self.settings.lend_spare_gpus and res["num_gpus"] == 1 and gpu_nodes == 1
        tuned = {shape_group(j.spec.config) for j in self.jobs  # kept from an earlier run: their timings are in the store
                 if j.num in self.records and exchange.shares(j.spec.config)}
        self.queue = JobQueue(to_run, config=lambda j: j.spec.config, num=lambda j: j.num,
                              shares=exchange.shares, tuned=tuned)
        self.fill()

    def free_gpus(self) -> int | None:
        """GPU slots no running job holds (None on a cluster without GPUs)."""
        if self.gpu_slots is None:
            return None
        return self.gpu_slots - int(sum(self.gpus_of.get(j.num, 1) for j in self.pending.values()))

    def fill(self) -> None:
        """Start queued jobs while slots are free (an executor would queue more, but they
        would leave without the store entries of the jobs running now). An autotune=on job
        may take the GPUs no queued job will need (spare_gpus.py)."""
        while (self.queue and not self.unstartable and len(self.pending) < self.slots
               and ((free := self.free_gpus()) is None or free >= 1)):
            # a job waits for its group's first autotune=on job until that one's entries are in
            # the store: forced out only when nothing runs and no finished job is still being read
            job = self.queue.next(force=not self.pending and not (self.collector and len(self.collector)))
            if job is None:  # the rest wait for their group's first autotune=on job
                return
            try:
                save_hydra_files(job)
            except OSError as e:  # a full sweep folder: no job starts; the sweep stops once the running ones are read
                self.queue.put_back(job)
                self.unstartable = (job, e)
                return
            res, per_gpu = self.resources, self.jobs_per_gpu
            if job.num in self.alone:  # ran out of GPU memory beside others: the whole GPU this time
                res, per_gpu = {**res, "num_gpus": 1}, 1
                self.gpus_of[job.num] = self.jobs_per_gpu
            gpus = 1
            if self.lend:
                gpus = int(gpus_for(bool(job.spec.config["autotune"]), self.free_gpus() or 0, len(self.queue),
                                    1 + sum(1 for j in self.queue if j.spec.config["autotune"])))
                if gpus > 1:  # the job's own GPU and the spare ones, for its autotune benchmarking
                    res = {**res, "num_gpus": gpus}
                self.gpus_of[job.num] = gpus
            spec = launch_spec(job, *exchange.seeds(job.spec.config, self.storage),
                               autotune_gpus=gpus if gpus > 1 else None)
            log.info(f"\t#{job.num} : {job.name}" + (f" (with {gpus - 1} spare GPUs for its autotuning)"
                                                     if self.lend and gpus > 1 else "")
                     + (" (alone on its GPU: it ran out of GPU memory beside others)" if job.num in self.alone else ""))
            handle = self.executor.submit(job, spec, res, per_gpu)
            self.pending[handle] = job
            self.submitted_at[job.num] = time.time()

    def wait_all(self, progress: Progress, poll_s: float = 1.0) -> None:
        """Jobs collected as they end, their results read off this loop (collector.py): a
        freed slot takes the next job at once, and what follows from a job's record (a
        re-run alone, the queue's next group, the summary) once it is read."""
        collector = self.collector = Collector(self.collect)
        try:
            while self.pending or len(collector):
                ended = self.executor.wait(list(self.pending), 0.05 if len(collector) else poll_s) if self.pending else []
                for handle in ended:
                    job = self.pending.pop(handle)
                    self.gpus_of.pop(job.num, None)
                    collector.add(handle, job, time.time() - self.submitted_at[job.num])
                if ended:
                    self.fill()
                # the loop waits on the collector once it is COLLECT_BEHIND jobs behind, and
                # when nothing runs: results never pile up unread
                behind = not self.pending or len(collector) >= COLLECT_BEHIND
                for got in collector.done(timeout=poll_s if behind else 0.0):
                    self.collected(got, progress)
                progress.show(min(len(self.pending), self.slots), self.slots)
        finally:
            collector.close()
        if self.unstartable:
            progress.stop()
            stopping.stop_unstartable(self, *self.unstartable)
        progress.show(0, self.slots)
        self.write_summary(force=True)

    def collect(self, handle: Any, job: Job, took: float) -> Record:
        """On the collector's thread: the job's record, its results in the sweep folder, and
        the stores' entries it brought back taken in."""
        record = self.executor.collect(handle, job, took)
        return exchange.bring_back(job.spec, job.job_dir, record)

    def collected(self, got: Collected, progress: Progress) -> None:
        job, record, took = got.job, got.record, got.took
        if isinstance(got.error, ResultsNotWritten):
            progress.stop()
            stopping.stop_unwritable(self, got.error, took)
        if got.error is not None:
            raise got.error
        assert record is not None
        if self.rerun_alone(job, record):
            self.fill()
            return
        if job.num in self.alone:
            record["job"]["rerun_alone"] = self.alone[job.num]
            write_record(job.job_dir, record)
        self.finished(job, record)
        said = self.entries[job.num]
        if said.get("storage_missed"):  # said as it happens, not only in the closing report
            log.warning(f"#{job.num}: {said['storage_missed']}")
        if said.get("retried"):
            log.warning(f"#{job.num} ran again after its worker or node was lost: {said['retried']}")
        if str(said.get("accuracy") or "").startswith("failed"):
            log.warning(f"#{job.num}: the compiled step does not compute what eager does: accuracy {said['accuracy']}")
        assert self.queue is not None  # made by submit() before any job ran
        self.queue.done(job)
        self.fill()
        progress.finished(record["status"], took, self.slots)
        self.write_summary()

    def rerun_alone(self, job: Job, record: Record) -> bool:
        """A job that ran out of GPU memory while it shared its GPU goes back to the front of
        the queue, to run again with the GPU to itself (once); True if so."""
        reason = str(record.get("reason") or "")
        if (self.jobs_per_gpu <= 1 or job.num in self.alone or record.get("status") != "failed"
                or not reason.startswith("out of GPU memory")):
            return False
        self.alone[job.num] = f"ran out of GPU memory beside other jobs, then ran alone: {reason[:200]}"
        keep_earlier_log(job)  # job.attempt<N>.log: the run that ran out
        log.info(f"#{job.num} ran out of GPU memory beside other jobs: it runs again alone on its GPU")
        assert self.queue is not None
        self.queue.put_back(job)
        return True

    def finished(self, job: Job, record: Record) -> None:
        self.records[job.num] = record
        self.entries[job.num] = sm.job_entry(job.num, job.overrides, job.job_dir, record)

    def write_summary(self, force: bool = False) -> None:
        """summary.json rewritten: always when `force`d or when the sweep is done, else at
        most every SUMMARY_EVERY_S seconds (rewriting it after every job made a 1,000-job
        sweep's driver write it 1,000 times at up to 0.7 MB: bench/results/scheduler/)."""
        done = not self.pending and not self.queue
        now = time.time()
        wait = max(SUMMARY_EVERY_S, self.summary_took / SUMMARY_SHARE)
        if not (force or done) and now - self.summary_at < wait:
            return
        sm.write_summary(self.sweep_dir, list(self.entries.values()), self.started, self.command, done=done)
        self.summary_at = time.time()
        self.summary_took = self.summary_at - now
