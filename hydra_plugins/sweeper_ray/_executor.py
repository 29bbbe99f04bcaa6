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

from hydra_plugins.sweeper_ray import _ray
from hydra_plugins.sweeper_ray._config import cluster_address
from sweeper.job_spec import JobSpec
from sweeper.record import Record
from sweeper.sweep import pythons
from sweeper.sweep.control import Job, sigterm_as_interrupt
from sweeper.sweep.machine import nvml_memory_gib
from sweeper.sweep.executor import Cluster

log = logging.getLogger(__name__)


class RayExecutor:
    """Jobs as Ray tasks; `conf`: the launcher's settings, defaults filled."""

    def __init__(self, conf: dict, sweep_dir: Path) -> None:
        self.conf = conf
        self.scratch_root = Path(conf["scratch_dir"]) / _ray.scratch_key(sweep_dir)  # on each node
        self.remote_fn: Any = None

    def scratch_of(self, job: Job) -> Path:
        return self.scratch_root / job.job_dir.name

    def start(self) -> Cluster:
        import ray

        sigterm_as_interrupt()  # while Ray starts too
        log.info(_ray.init_ray(self.conf))
        sigterm_as_interrupt()  # again after ray.init, which sets a handler of its own
        self.remote_fn = ray.remote(max_calls=1)(_ray.run_in_worker)
        on_cluster = bool(cluster_address(self.conf))
        return Cluster(tuple(ray.nodes()), None if on_cluster else nvml_memory_gib(), on_cluster)

    def check_pythons(self, envs: dict[str, str], need_triton: bool) -> list[str]:
        from sweeper.sweep.validate import stop_on_problem

        return stop_on_problem(pythons.check, envs, need_triton, _ray.check_on_nodes)

    def submit(self, job: Job, spec: JobSpec, resources: dict, jobs_per_gpu: int) -> Any:
        options = {"max_retries": int(self.conf["max_retries_on_node_loss"]), **resources}
        return self.remote_fn.options(**options).remote(
            spec, str(self.scratch_of(job)), job.spec.config["timeout_s"] or None, str(self.conf["compile_threads"]),
            jobs_per_gpu, bool(self.conf["pause_while_timing"]))

    def wait(self, handles: list, timeout_s: float) -> list:
        import ray

        ready, _ = ray.wait(handles, num_returns=1, timeout=timeout_s)
        return ready

    def collect(self, handle: Any, job: Job, took_s: float) -> Record:
        return _ray.collect(handle, job, took_s, self.scratch_of(job))

    def cancel(self, handles: list) -> None:
        import ray

        for ref in handles:
            ray.cancel(ref, force=True)

    def salvage(self, jobs: list[Job]) -> int:
        return _ray.salvage({job.job_dir: self.scratch_of(job) for job in jobs})

    def record_without_worker(self, job: Job, reason: str, took_s: float, status: str) -> Record:
        return _ray.record_without_worker(job, reason, took_s, self.scratch_of(job), status=status)
