"""The Ray launcher's core: a sweep's jobs launched on Ray and collected as they finish.

Why our own launcher: the published hydra-ray-launcher pinned an old Ray for years, pulls
boto3 and aiohttp, and loses every result when one worker crashes (shared/DESIGN.md).

How a sweep runs:
- Ray is embedded (a local Ray on 127.0.0.1, no dashboard, token authentication on, a
  watcher that ends it if the driver is killed: _reaper.py) unless an address is given
  (config `address` or $RAY_ADDRESS), in which case the driver checks that Ray's GCS
  answers there (_address.py) and asks the cluster for nothing at init.
- Each job is a Ray task with max_calls=1, so it gets a fresh worker process, holding
  1/jobs_per_gpu of a GPU where there are GPUs (sweeper/sweep/packing.py: jobs of one GPU
  time it one at a time under its lease, tasks/gpu_lease.py), all of a node's CPUs on a
  CPU-only cluster. Inside, the job runs in its own child process
  (sweeper.sweep.job_process), which turns crashes and time-outs into failed records with
  the log's tail; a packed job that ran out of GPU memory runs again alone.
- The job folder lives in node-local scratch; its record and artifacts (traces, module
  copies, log; not the compile caches) come back through Ray as one compressed bundle
  and land in the driver's sweep folder, so nodes need not share a disk.
- A task whose worker or node died is retried (max_retries_on_node_loss); a job that
  failed on its own is not.
- Finished jobs are kept: summary.json is rewritten (atomically) after each job, and a
  second run into the same sweep folder skips jobs whose result says ok.

The sweep logic it shares lives in sweeper/sweep (control: specs, checks, dry run, lock,
resume; progress; summary); Ray's own mechanics in _ray.py.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from hydra.core.utils import JobReturn, JobStatus, configure_log, setup_globals

from hydra_plugins.sweeper_ray._config import cluster_address, settings_problems, with_defaults
from hydra_plugins.sweeper_ray._machine import cpu_only, local_gpu_name, local_gpus, local_slots, nvml_gpus
from hydra_plugins.sweeper_ray._ray import (ResultsNotWritten, collect, init_ray, job_resources, record_without_worker,
                                             run_in_worker, salvage, scratch_key)
from sweeper.record import Record, write_record
from sweeper.stores import exchange
from sweeper.sweep import packing, pythons
from sweeper.sweep import summary as sm
from sweeper.sweep.machine import nvml_memory_gib
from sweeper.sweep.job_process import failed_record
from sweeper.sweep.control import (Job, check_jobs, confirm, discard_unused_sweep_dir, dry_run, earlier_record,
                                   keep_earlier_log, lock_sweep, make_jobs, reusable, save_hydra_files,
                                   sigterm_as_interrupt)
from sweeper.sweep.order import JobQueue, shape_group
from sweeper.sweep.spare_gpus import gpus_for
from sweeper.sweep.progress import Progress
from sweeper.sweep.validate import SweepConfigError, check_output_dir, stop_on_problem

log = logging.getLogger(__name__)


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    conf = with_defaults(launcher.conf)
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir)).resolve()
    sweep = None
    try:
        jobs = _checked_jobs(launcher, conf, job_overrides, initial_job_idx)
        if dry_run(jobs, sweep_dir, gpus=None if cluster_address(conf) else (nvml_gpus()[0] or 0)):
            print(packing_line(conf, jobs))
            print(expected_time(conf, jobs, sweep_dir, slots=local_slots(jobs))[0])
            return []
        stop_on_problem(check_output_dir, sweep_dir)
        lock_sweep(sweep_dir)  # held until this process ends
        sweep = RaySweep(conf, jobs, sweep_dir)
        sweep.run()
    except KeyboardInterrupt:
        if sweep is None:  # during the checks: nothing ran
            raise SystemExit(130) from None
        code = sm.close_sweep(sweep_dir, list(sweep.entries.values()), sweep.command, interrupted=True)
        _shutdown_ray()
        raise SystemExit(code)
    finally:  # a sweep that ran no job (refused, a dry run) leaves no empty folder; else a no-op
        discard_unused_sweep_dir(sweep_dir)
    code = sm.close_sweep(sweep_dir, list(sweep.entries.values()), sweep.command)
    if code:  # Hydra keeps no exit code of a launcher's own: a failed job ends the command here
        raise SystemExit(code)
    return [
        JobReturn(overrides=job.overrides, cfg=job.config, hydra_cfg=None, working_dir=str(job.job_dir),
                  task_name="sweeper", status=JobStatus.COMPLETED, _return_value=sweep.records[job.num]["status"])
        for job in jobs
    ]


def _shutdown_ray() -> None:
    """An interrupted sweep's Ray, stopped here rather than at interpreter exit: a SIGTERM
    that arrived while ray.init installed Ray's own signal handlers made the exit-time
    shutdown abort the driver (exit -6 after the sweep had recorded its cancellation)."""
    try:
        import ray

        if ray.is_initialized():
            ray.shutdown()
    except Exception:  # noqa: BLE001 - the reaper (_reaper.py) ends what is left
        pass


def _checked_jobs(launcher, conf: dict, job_overrides, initial_job_idx: int) -> list[Job]:
    """The sweep's jobs, once every check that needs no job run has passed (exit 2 if not)."""
    base = launcher.config  # the sweep-level keys (dry_run, confirm_above, yes) are the same for every job
    if not base.dry_run:  # counted before composing every job: a refusal costs no time
        confirm(len(job_overrides), {"confirm_above": base.confirm_above, "yes": base.yes})
    jobs = make_jobs(launcher, job_overrides, initial_job_idx)
    check_jobs(jobs, gpus_available=local_gpus(conf, jobs))
    stop_on_problem(check_launcher, conf)
    stop_on_problem(check_pythons, conf, jobs)
    return jobs


def check_pythons(conf: dict, jobs: list[Job]) -> None:
    """Each job's interpreter (config key `python`) into its spec; every environment named
    is checked here before any job starts, or, on a cluster, on its nodes once joined
    (RaySweep.submit)."""
    envs = pythons.assign_interpreters(jobs)
    if envs and cluster_address(conf):
        print(f"python environments {', '.join(envs)}: checked on the cluster's nodes once joined", flush=True)
    elif envs:
        for line in pythons.check(envs, need_triton=not cpu_only(jobs) and bool(nvml_gpus()[0])):
            print(line, flush=True)


class RaySweep:
    """One sweep's jobs on Ray: finished ones kept, the rest started as GPUs free up, in
    the order of sweeper/sweep/order.py (longest first; a group's first autotune=on job
    before the others of its shapes), collected as they end, summary.json rewritten after
    each; Ctrl-C cancels the rest.

    Jobs are submitted one free slot at a time rather than all at once, so that each job
    leaves with the autotune store as it is when the job starts (sweeper/stores/exchange.py)."""

    def __init__(self, conf: dict, jobs: list[Job], sweep_dir: Path) -> None:
        self.conf, self.jobs, self.sweep_dir = conf, jobs, sweep_dir
        self.command, self.started = sys.argv[1:], time.time()
        self.entries: dict[int, dict] = {}
        self.records: dict[int, Record] = {}
        self.pending: dict = {}  # Ray object ref -> Job
        self.queue: JobQueue | None = None  # jobs not submitted yet
        self.remote: Any = None  # Ray's remote function, with this sweep's resources
        self.to_run: list[Job] = []
        self.submitted_at: dict[int, float] = {}
        self.slots = 1
        self.gpu_slots: int | None = None
        self.gpus_of: dict[int, int] = {}  # job -> GPU slots it holds (spare GPUs lent; a packed job run alone)
        self.lend = False
        self.jobs_per_gpu, self.packing = 1, ""
        self.alone: dict[int, str] = {}  # job -> why it runs again alone on its GPU
        self.scratch_root = Path(conf["scratch_dir"]) / scratch_key(sweep_dir)  # on each node

    def run(self) -> None:
        to_run = self.to_run = self.keep_finished()
        try:
            if to_run:  # nothing to run (a finished sweep resumed): no Ray at all
                self.submit(to_run)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM while Ray starts: every job to run is cancelled
            self.cancel_pending()
            raise
        line, expected_s = expected_time(self.conf, to_run, self.sweep_dir, self.slots) if to_run else ("", None)
        if line:
            log.info(line)
        progress = Progress(len(self.jobs), len(self.jobs) - len(to_run), expected_s=expected_s)
        self.write_summary()
        progress.start()
        try:
            self.wait_all(progress)
        except KeyboardInterrupt:
            progress.stop()  # before the message, so that it prints below the live line
            self.cancel_pending()
            raise
        finally:
            progress.stop()  # the live line's last state stays on the screen

    def keep_finished(self) -> list[Job]:
        """The jobs to run: those without an ok record of the same overrides (resume)."""
        to_run = []
        for job in self.jobs:
            record = reusable(job) if self.conf["resume"] else None
            if record is None:
                earlier = earlier_record(job)
                kept_log = keep_earlier_log(job) if earlier and earlier.get("status") != "ok" else None
                attempts = exchange.earlier_attempts(job.spec.config, earlier, log=kept_log)
                if attempts:  # stopped runs of this job gave the store their partial tuning: the record says so
                    job.spec = dataclasses.replace(job.spec, earlier_attempts=attempts)
                to_run.append(job)
                continue
            self.entries[job.num] = sm.job_entry(job.num, job.overrides, job.job_dir, record, reused=True)
            self.records[job.num] = record
        return to_run

    def submit(self, to_run: list[Job]) -> None:
        import ray

        conf = self.conf
        sigterm_as_interrupt()  # while Ray starts too
        log.info(init_ray(conf))
        sigterm_as_interrupt()  # again after ray.init, which sets a handler of its own
        total = ray.cluster_resources()
        check_jobs(to_run, gpus_available=total.get("GPU", 0))
        self.jobs_per_gpu, self.packing = packing_of(conf, ray.nodes(), len(to_run), cpu_only(to_run))
        res = job_resources(conf, self.jobs_per_gpu)
        self.slots = max(1, int(min(total.get("GPU", 0) / res["num_gpus"] if res["num_gpus"] else 1e9,
                                    total.get("CPU", 1) / res["num_cpus"] if res["num_cpus"] else 1e9) + 1e-9))
        log.info(f"Launching {len(to_run)} jobs on Ray ({len(self.jobs) - len(to_run)} kept from an earlier run), "
                 f"{res['num_gpus']:g} GPU and {res['num_cpus']:g} CPU each, up to {self.slots} at a time"
                 + (f"; {self.packing}" if self.packing else ""))
        envs = pythons.assign_interpreters(to_run)
        if envs and cluster_address(conf):  # checked where the jobs will run
            need_triton = bool(total.get("GPU")) and not cpu_only(to_run)
            for line in stop_on_problem(pythons.check, envs, need_triton, True):
                log.info(line)
        self.options = {"max_retries": int(conf["max_retries_on_node_loss"]), **res}
        self.remote_fn = ray.remote(max_calls=1)(run_in_worker)
        self.remote = self.remote_fn.options(**self.options)
        self.gpu_slots = int(total.get("GPU", 0) // res["num_gpus"]) if res["num_gpus"] else None
        gpu_nodes = sum(1 for n in ray.nodes() if n.get("Alive") and n["Resources"].get("GPU", 0) > 0)
        self.lend = bool(conf["lend_spare_gpus"]) and res["num_gpus"] == 1 and gpu_nodes == 1
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
        """Submit queued jobs while slots are free (Ray would queue more, but they would
        leave without the store entries of the jobs running now). An autotune=on job may
        take the GPUs no queued job will need (spare_gpus.py)."""
        while self.queue and len(self.pending) < self.slots and ((free := self.free_gpus()) is None or free >= 1):
            job = self.queue.next(force=not self.pending)
            if job is None:  # the rest wait for their group's first autotune=on job
                return
            save_hydra_files(job)
            spec, remote, per_gpu = exchange.with_seed(job.spec), self.remote, self.jobs_per_gpu
            if job.num in self.alone:  # ran out of GPU memory beside others: the whole GPU this time
                remote, per_gpu = self.remote_fn.options(**{**self.options, "num_gpus": 1}), 1
                self.gpus_of[job.num] = self.jobs_per_gpu
            if self.lend:
                gpus = int(gpus_for(bool(job.spec.config["autotune"]), self.free_gpus() or 0, len(self.queue),
                                    1 + sum(1 for j in self.queue if j.spec.config["autotune"])))
                if gpus > 1:  # the job's own GPU and the spare ones, for its autotune benchmarking
                    spec = dataclasses.replace(spec, autotune_gpus=gpus)
                    remote = self.remote_fn.options(**{**self.options, "num_gpus": gpus})
                self.gpus_of[job.num] = gpus
            log.info(f"\t#{job.num} : {job.name}" + (f" (with {gpus - 1} spare GPUs for its autotuning)"
                                                     if self.lend and self.gpus_of.get(job.num, 1) > 1 else "")
                     + (" (alone on its GPU: it ran out of GPU memory beside others)" if job.num in self.alone else ""))
            timeout = job.spec.config["timeout_s"] or None
            ref = remote.remote(spec, str(self.scratch_root / job.job_dir.name), timeout,
                                str(self.conf["compile_threads"]), per_gpu, bool(self.conf["pause_while_timing"]))
            self.pending[ref] = job
            self.submitted_at[job.num] = time.time()

    def wait_all(self, progress: Progress) -> None:
        import ray

        while self.pending:
            ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=1.0)
            for ref in ready:
                job = self.pending.pop(ref)
                self.gpus_of.pop(job.num, None)
                took = time.time() - self.submitted_at[job.num]
                try:
                    record = collect(ref, job, took, self.scratch_root / job.job_dir.name)
                    record = exchange.bring_back(job.spec, job.job_dir, record)
                except ResultsNotWritten as e:
                    progress.stop()
                    self.stop_unwritable(e, took)
                if self.rerun_alone(job, record):
                    self.fill()
                    continue
                if job.num in self.alone:
                    record["job"]["rerun_alone"] = self.alone[job.num]
                    write_record(job.job_dir, record)
                self.finished(job, record)
                assert self.queue is not None  # made by submit() before any job ran
                self.queue.done(job)
                self.fill()
                progress.finished(record["status"], took, self.slots)
                self.write_summary()
            progress.show(min(len(self.pending), self.slots), self.slots)
        progress.show(0, self.slots)

    def stop_unwritable(self, e: ResultsNotWritten, took: float) -> None:
        """A finished job's results could not be written into the sweep folder (a full disk):
        the sweep stops here, with every job's state in summary.json where it can still be
        written, the results named where they still are (the job's scratch folder, kept), and
        exit code 2. The jobs still running are cancelled, their scratch folders kept too."""
        import ray

        print(f"\nsweeper: {e}.", file=sys.stderr, flush=True)
        left = {job.num: str(self.scratch_root / job.job_dir.name) for job in self.pending.values()}
        for ref in self.pending:
            ray.cancel(ref, force=True)
        entry = sm.job_entry(e.job.num, e.job.overrides, e.job.job_dir, failed_record(
            e.job.spec, e.job.job_dir, f"finished, but its results could not be written into the sweep folder "
            f"({e.error}); they are in {e.scratch} on {e.host}", took))
        self.entries[e.job.num] = {**entry, "log": str(Path(e.scratch) / "job.log"), "log_note": f"on {e.host}"}
        why = "cancelled: the sweep stopped, its folder could not take a finished job's results"
        for job in [*self.pending.values(), *(self.queue or [])]:
            self.entries[job.num] = sm.job_entry(job.num, job.overrides, job.job_dir, failed_record(
                job.spec, job.job_dir, why, 0.0, status="cancelled"))
        self.pending.clear()
        if left:
            print("sweeper: the jobs that were still running were cancelled; what they wrote is in their scratch "
                  "folders: " + ", ".join(f"#{n} {d}" for n, d in sorted(left.items())), file=sys.stderr)
        try:
            sm.write_summary(self.sweep_dir, list(self.entries.values()), self.started, self.command, done=False)
            where = f"{self.sweep_dir / sm.SUMMARY_FILE} says where each job stands"
        except OSError as err:
            where = f"summary.json could not be written either ({err})"
        print(f"sweeper: the sweep stopped; {where}. Free space in {self.sweep_dir} (or choose another "
              "hydra.sweep.dir) and run the same command again: finished jobs whose results are in the folder "
              "are kept, the others run again.", file=sys.stderr, flush=True)
        raise SystemExit(2)

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

    def write_summary(self) -> None:
        sm.write_summary(self.sweep_dir, list(self.entries.values()), self.started, self.command,
                         done=not self.pending and not self.queue)

    def cancel_pending(self) -> None:
        import ray

        queued = list(self.queue) if self.queue is not None else list(self.to_run)  # none submitted yet
        print(f"\n[sweep] interrupted: cancelling {len(self.pending)} running and {len(queued)} queued jobs; "
              "finished results are kept",
              flush=True)
        for ref in self.pending:
            ray.cancel(ref, force=True)
        running = {job.job_dir: self.scratch_root / job.job_dir.name for job in self.pending.values()}
        try:  # the stopped jobs' logs, and what the autotune jobs had tuned so far, for the store
            kept = salvage(running) if running else 0
            if any(exchange.shares(job.spec.config) for job in self.pending.values()):
                print(f"[sweep] autotune entries of {kept} stopped jobs brought back for the store", flush=True)
        except Exception as e:  # noqa: BLE001 - the finished results and the summary come first
            print(f"[sweep] what the stopped jobs left on their nodes could not be brought back: {type(e).__name__}: {e}",
                  flush=True)
        for ref, job in list(self.pending.items()):
            record = record_without_worker(job, "cancelled (Ctrl-C or SIGTERM) before it finished",
                                           time.time() - self.submitted_at[job.num],
                                           self.scratch_root / job.job_dir.name, status="cancelled")
            self.finished(job, exchange.bring_back(job.spec, job.job_dir, record))
        for job in queued:  # never submitted
            save_hydra_files(job)
            self.finished(job, record_without_worker(job, "cancelled (Ctrl-C or SIGTERM) before it started", 0.0,
                                                     self.scratch_root / job.job_dir.name, status="cancelled"))
        sm.write_summary(self.sweep_dir, list(self.entries.values()), self.started, self.command, done=False)


def expected_time(conf: dict, jobs: list[Job], sweep_dir: Path, slots: int) -> tuple[str, float | None]:
    """The sweep's expected duration from earlier sweeps' records (sweeper/sweep/estimate.py):
    a line to print, and the seconds (None when no job has a record)."""
    from sweeper.sweep import estimate

    gpu = None if cluster_address(conf) else (local_gpu_name(jobs) or "")  # "": this machine's CPU
    # outputs/DATE/TIME, outputs/nightly/DATE: every earlier sweep lies under outputs/
    return estimate.expected({j.num: j.overrides for j in jobs}, sweep_dir.parent.parent, gpu, slots)


def check_launcher(conf: dict) -> None:
    """Every launcher setting of the composed config (_config.settings_problems), all listed."""
    found = settings_problems(dict(conf))
    if found:
        raise SweepConfigError(f"{len(found)} launcher setting problem(s); no job was run:\n"
                               + "\n".join(f"  {p}" for p in found))


def packing_of(conf: dict, nodes: list[dict], jobs: int, cpu_jobs: bool) -> tuple[int, str]:
    """Jobs a GPU runs at once (sweeper/sweep/packing.py) on the Ray cluster of `nodes`, for a
    sweep of `jobs` jobs left, and a line that says why: the smallest GPU node decides; the
    GPU's memory is read by NVML for an embedded Ray (on a cluster, by cores alone); never
    more than the jobs need to fill every GPU."""
    conf = with_defaults(conf)
    gpu_nodes = [n["Resources"] for n in nodes if n.get("Alive") and n["Resources"].get("GPU", 0) >= 1]
    if cpu_jobs or not gpu_nodes:
        return 1, ""
    if conf.get("num_gpus_per_job") is not None:  # the user's share of a GPU a job decides
        return 1, f"packing: none (num_gpus_per_job={conf['num_gpus_per_job']} decides a job's GPUs)"
    node = min(gpu_nodes, key=lambda r: r.get("CPU", 1) / r["GPU"])
    memory = None if cluster_address(conf) else nvml_memory_gib()
    per_gpu, why = packing.jobs_per_gpu(conf["jobs_per_gpu"], memory, int(node.get("CPU", 1)), int(node["GPU"]))
    gpus = sum(int(r["GPU"]) for r in gpu_nodes)
    needed = max(1, -(-jobs // gpus))
    if per_gpu > needed and packing.parse_jobs_per_gpu(conf["jobs_per_gpu"]) is None:
        per_gpu, why = needed, f"{why}; {jobs} job(s) on {gpus} GPU(s) need no more"
    paused = ("; the others paused while one times its steps and modules (pause_while_timing)"
              if conf["pause_while_timing"] else "")
    return per_gpu, (f"packing: up to {per_gpu} jobs a GPU ({why}); each times its GPU under the GPU's lease{paused}"
                     if per_gpu > 1 else f"packing: one job a GPU ({why})")


def packing_line(conf: dict, jobs: list[Job]) -> str:
    """The dry run's word on packing, for this machine (an embedded Ray) or a cluster."""
    conf = with_defaults(conf)
    if cluster_address(conf):
        return (f"packing: jobs_per_gpu={conf['jobs_per_gpu']}, decided on the cluster's nodes once joined "
                "(auto: as many as their GPUs' cores allow, at most 4)")
    gpus = nvml_gpus()[0] or 0
    cpus = len(os.sched_getaffinity(0))
    nodes = [{"Alive": True, "Resources": {"CPU": cpus, "GPU": gpus}}]
    return packing_of(conf, nodes, len(jobs), cpu_only(jobs))[1] or "packing: none (CPU jobs run one at a time)"
