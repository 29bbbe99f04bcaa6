"""The Ray launcher's core: a sweep's jobs launched on Ray and collected as they finish.

Why our own launcher: the published hydra-ray-launcher (1.2.2 allows any Ray 2.x, though it
pinned an old Ray for years) pulls boto3 and aiohttp, and loses every result when one worker
crashes (shared/DESIGN.md).

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

The scheduling policy (order, slots and packing, spare GPUs, the re-run alone, resume,
Ctrl-C, a full disk) is sweeper/sweep/scheduler.py, which imports no Ray; this launcher
hands it the checked jobs and a RayExecutor (_executor.py), which holds everything Ray (with
_ray.py: the worker side, the bundle, salvage). The rest of the sweep logic lives in
sweeper/sweep (control: specs, checks, dry run, lock, resume; progress; summary).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

from hydra.core.utils import JobReturn, JobStatus, configure_log, setup_globals

from hydra_plugins.sweeper_ray._config import settings_problems
from hydra_plugins.sweeper_ray._executor import RayExecutor
from hydra_plugins.sweeper_ray._machine import cpu_only, local_gpu_name, local_gpus, local_slots, nvml_gpus
from sweeper.sweep import packing, pythons
from sweeper.sweep import summary as sm
from sweeper.sweep.machine import nvml_memory_gib
from sweeper.sweep.control import (Job, check_jobs, confirm, discard_unused_sweep_dir, dry_run, lock_sweep,
                                   make_jobs)
from sweeper.sweep.scheduler import Scheduler
from sweeper.sweep.settings import LauncherSettings, settings_of
from sweeper.sweep.validate import SweepConfigError, check_output_dir, stop_on_problem

log = logging.getLogger(__name__)


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir)).resolve()
    sweep = None
    try:
        jobs, conf = _checked_jobs(launcher, job_overrides, initial_job_idx)
        if dry_run(jobs, sweep_dir, gpus=None if conf.cluster_address else (nvml_gpus()[0] or 0)):
            print(packing_line(conf, jobs))
            print(expected_time(conf, jobs, sweep_dir, slots=local_slots(jobs))[0])
            return []
        stop_on_problem(check_output_dir, sweep_dir)
        lock_sweep(sweep_dir)  # held until this process ends
        sweep = Scheduler(conf, jobs, sweep_dir, RayExecutor(conf, sweep_dir))
        sweep.run(expected=lambda to_run, slots: expected_time(conf, to_run, sweep_dir, slots))
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


def _checked_jobs(launcher, job_overrides, initial_job_idx: int) -> tuple[list[Job], LauncherSettings]:
    """The sweep's jobs, once every check that needs no job run has passed (exit 2 if not),
    and the launcher's settings, typed once their values are checked."""
    base = launcher.config  # the sweep-level keys (dry_run, confirm_above, yes) are the same for every job
    if not base.dry_run:  # counted before composing every job: a refusal costs no time
        confirm(len(job_overrides), {"confirm_above": base.confirm_above, "yes": base.yes})
    jobs = make_jobs(launcher, job_overrides, initial_job_idx)
    stop_on_problem(check_settings, launcher.conf)
    conf = settings_of(launcher.conf)
    check_jobs(jobs, gpus_available=local_gpus(conf, jobs))
    stop_on_problem(check_pythons, conf, jobs)
    return jobs, conf


def check_pythons(conf: LauncherSettings, jobs: list[Job]) -> None:
    """Each job's interpreter (config key `python`) into its spec; every environment named
    is checked here before any job starts, or, on a cluster, on its nodes once joined
    (RaySweep.submit)."""
    envs = pythons.assign_interpreters(jobs)
    if envs and conf.cluster_address:
        print(f"python environments {', '.join(envs)}: checked on the cluster's nodes once joined", flush=True)
    elif envs:
        for line in pythons.check(envs, need_triton=not cpu_only(jobs) and bool(nvml_gpus()[0])):
            print(line, flush=True)


def expected_time(conf: LauncherSettings, jobs: list[Job], sweep_dir: Path, slots: int) -> tuple[str, float | None]:
    """The sweep's expected duration from earlier sweeps' records (sweeper/sweep/estimate.py):
    a line to print, and the seconds (None when no job has a record)."""
    from sweeper.sweep import estimate

    gpu = None if conf.cluster_address else (local_gpu_name(jobs) or "")  # "": this machine's CPU
    root, depth = estimate.earlier_sweeps_root(sweep_dir)  # outputs/ for outputs/DATE/TIME; beside /tmp/x for /tmp/x
    return estimate.expected({j.num: j.overrides for j in jobs}, root, gpu, slots, depth)


def check_settings(conf) -> None:
    """Every launcher setting of the composed config (_config.settings_problems), all listed."""
    found = settings_problems(dict(conf))
    if found:
        raise SweepConfigError(f"{len(found)} launcher setting problem(s); no job was run:\n"
                               + "\n".join(f"  {p}" for p in found))


def packing_of(conf: LauncherSettings, nodes: list[dict], jobs: int, cpu_jobs: bool) -> tuple[int, str]:
    """Jobs a GPU runs at once on the Ray cluster of `nodes` (sweeper/sweep/packing.py:
    packing_of), this machine's GPU memory read by NVML for an embedded Ray."""
    on_cluster = bool(conf.cluster_address)
    return packing.packing_of(conf, nodes, jobs, cpu_jobs, None if on_cluster else nvml_memory_gib(), on_cluster)


def packing_line(conf: LauncherSettings, jobs: list[Job]) -> str:
    """The dry run's word on packing, for this machine (an embedded Ray) or a cluster."""
    if conf.cluster_address:
        return (f"packing: jobs_per_gpu={conf.jobs_per_gpu}, decided on the cluster's nodes once joined "
                "(auto: as many as their GPUs' cores allow, at most 4)")
    gpus = nvml_gpus()[0] or 0
    cpus = len(os.sched_getaffinity(0))
    nodes = [{"Alive": True, "Resources": {"CPU": cpus, "GPU": gpus}}]
    return packing_of(conf, nodes, len(jobs), cpu_only(jobs))[1] or "packing: none (CPU jobs run one at a time)"
