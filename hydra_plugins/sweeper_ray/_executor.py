"""The Ray executor: where the scheduler's jobs run (sweeper/sweep/executor.py, Executor).

Ray is embedded (a local Ray on 127.0.0.1, no dashboard, token authentication on, a watcher
that ends it if the driver is killed: _reaper.py) unless an address is given, in which case
the driver joins that cluster (_address.py). Each job is a Ray task with max_calls=1 (a fresh
worker process) that runs the job in its own child process in node-local scratch and sends
its folder back as one bundle (_ray.py); a task whose worker or node died is retried
(max_retries_on_node_loss)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra_plugins.sweeper_ray import _ray, _results
from sweeper.job_spec import JobSpec
from sweeper.record import Record
from sweeper.sweep import pythons
from sweeper.sweep.control import Job, sigterm_as_interrupt
from sweeper.sweep.machine import nvml_memory_gib
from sweeper.stores.storage import COMPILE_STORE, SWEEPS, Storage
from sweeper.sweep.executor import Cluster
from sweeper.sweep.settings import LauncherSettings

log = logging.getLogger(__name__)


class RayExecutor:
    """Jobs as Ray tasks, as the launcher's settings say."""

    def __init__(self, conf: LauncherSettings, sweep_dir: Path) -> None:
        self.conf = conf
        self.sweep_key = _ray.scratch_key(sweep_dir)
        self.scratch_root = Path(conf.scratch_dir) / self.sweep_key  # on each node
        self.storage = Storage.of(conf.storage_path)
        self.storage_key = _ray.storage_key(sweep_dir) if self.storage else self.sweep_key
        self.remote_fn: Any = None
        self.out_bytes: dict[int, int] = {}  # job -> bytes its spec took to the worker

    def scratch_of(self, job: Job) -> Path:
        return self.scratch_root / job.job_dir.name

    def start(self) -> Cluster:
        import ray

        sigterm_as_interrupt()  # while Ray starts too
        log.info(_ray.init_ray(self.conf))
        sigterm_as_interrupt()  # again after ray.init, which sets a handler of its own
        self.remote_fn = ray.remote(max_calls=1)(_ray.run_in_worker)
        if self.storage:  # said, and where: this run's own folder there
            where = self.storage.location(f"{SWEEPS}/{self.storage_key}")
            print(f"storage: the jobs' traces, logs and modules go to {where} (this run's own folder), the compile "
                  f"store to {self.storage.location(COMPILE_STORE)}", flush=True)
        on_cluster = bool(self.conf.cluster_address)
        return Cluster(tuple(ray.nodes()), None if on_cluster else nvml_memory_gib(), on_cluster)

    def check_pythons(self, envs: dict[str, str], need_triton: bool) -> list[str]:
        from sweeper.sweep.validate import stop_on_problem

        return stop_on_problem(pythons.check, envs, need_triton, _ray.check_on_nodes)

    def submit(self, job: Job, spec: JobSpec, resources: dict, jobs_per_gpu: int) -> Any:
        options = {"max_retries": self.conf.max_retries_on_node_loss, **resources}
        self.out_bytes[job.num] = _results.spec_bytes(spec)
        return self.remote_fn.options(**options).remote(
            spec, str(self.scratch_of(job)), job.spec.config["timeout_s"] or None, self.conf.compile_threads,
            jobs_per_gpu, self.conf.pause_while_timing, self.storage.uri if self.storage else None,
            _results.stored_at(self.storage_key, job))

    def wait(self, handles: list, timeout_s: float) -> list:
        import ray

        ready, _ = ray.wait(handles, num_returns=1, timeout=timeout_s)
        return ready

    def collect(self, handle: Any, job: Job, took_s: float) -> Record:
        return _results.collect(handle, job, took_s, Path(self.scratch_of(job)), self.out_bytes.pop(job.num, None))

    def cancel(self, handles: list) -> None:
        import ray

        for ref in handles:
            ray.cancel(ref, force=True)

    def salvage(self, jobs: list[Job]) -> int:
        return _results.salvage({job.job_dir: self.scratch_of(job) for job in jobs})

    def record_without_worker(self, job: Job, reason: str, took_s: float, status: str) -> Record:
        return _results.record_without_worker(job, reason, took_s, self.scratch_of(job), status=status)
