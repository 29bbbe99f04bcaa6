"""Where a sweep's jobs run, as the scheduler (sweeper/sweep/scheduler.py) sees it: the
`Executor` protocol, the `Cluster` an executor starts or joins, and what each job asks of it
(pure: no Ray; Ray's executor is hydra_plugins/sweeper_ray/_executor.py, the tests' one
sweeper/sweep/memory_executor.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

from sweeper.job_spec import JobSpec
from sweeper.record import Record
from sweeper.sweep.control import Job
from sweeper.sweep.settings import LauncherSettings


@dataclass(frozen=True)
class Cluster:
    """What an executor runs jobs on, once started or joined: its nodes as Ray lists them
    ({"Alive", "NodeID", "Resources": {"CPU", "GPU"}}), this machine's GPU memory where the
    sweep runs here (None on a cluster: packing then goes by cores alone), and whether it
    was joined rather than started here."""

    nodes: tuple[dict, ...]
    gpu_memory_gib: float | None = None
    on_cluster: bool = False

    def total(self, resource: str) -> float:
        return float(sum(n["Resources"].get(resource, 0) for n in self.nodes if n.get("Alive")))


class ResultsNotWritten(Exception):
    """A finished job's results could not be written into the sweep folder (a full disk, a
    folder gone read-only): they are still in its scratch folder, on its node."""

    def __init__(self, job: Job, error: OSError, scratch: str, host: str) -> None:
        super().__init__(f"#{job.num}'s results could not be written into {job.job_dir}: {error}; "
                         f"they are still in {scratch} on {host}")
        self.job, self.error, self.scratch, self.host = job, error, scratch, host


class Executor(Protocol):
    """Where a sweep's jobs run. A handle is whatever submit() returns for one job."""

    def start(self) -> Cluster:
        """Start the machines (or join them), and say what they have."""

    def check_pythons(self, envs: dict[str, str], need_triton: bool) -> list[str]:
        """Each named Python environment, checked where the jobs will run (a joined cluster's
        nodes): a line each, or SweepConfigError."""

    def submit(self, job: Job, spec: JobSpec, resources: dict, jobs_per_gpu: int) -> Any:
        """Start one job with `resources` ({"num_gpus", "num_cpus"}), `jobs_per_gpu` jobs
        sharing its GPU; returns its handle."""

    def wait(self, handles: list, timeout_s: float) -> list:
        """The handles among `handles` whose job has ended, waiting at most `timeout_s`."""

    def collect(self, handle: Any, job: Job, took_s: float) -> Record:
        """The ended job's record, its folder in the sweep folder (ResultsNotWritten if it
        cannot be written there); a failed record when its worker was lost."""

    def cancel(self, handles: list) -> None:
        """Stop these jobs now."""

    def salvage(self, jobs: list[Job]) -> int:
        """What stopped jobs left where they ran (their log, their autotune entries), brought
        into their sweep folders; how many gave autotune entries."""

    def scratch_of(self, job: Job) -> Path | str:
        """Where a running job writes (named in the messages of a stopped sweep)."""

    def record_without_worker(self, job: Job, reason: str, took_s: float, status: str) -> Record:
        """The record of a job whose worker never sent its folder back, written."""


def job_resources(settings: LauncherSettings, cluster: Cluster, jobs_per_gpu: int = 1) -> dict:
    """What each job asks for: a 1/jobs_per_gpu share of one GPU where the cluster has GPUs,
    all of a node's CPUs on a cluster without (compiling and CPU kernels use every core), or
    what the settings say (num_gpus_per_job, num_cpus_per_job)."""
    if settings.num_gpus_per_job is not None:
        want_gpus = settings.num_gpus_per_job
    else:
        want_gpus = 1 / jobs_per_gpu if cluster.total("GPU") else 0
    if settings.num_cpus_per_job is not None:
        cpus = settings.num_cpus_per_job
    elif want_gpus:
        cpus = 1
    else:
        cpus = max((n["Resources"].get("CPU", 1) for n in cluster.nodes if n.get("Alive")), default=1)
    return {"num_gpus": want_gpus, "num_cpus": cpus}


def slots_of(cluster: Cluster, resources: dict) -> int:
    """Jobs that fit on the cluster at once with `resources` each."""
    by_gpu = cluster.total("GPU") / resources["num_gpus"] if resources["num_gpus"] else 1e9
    by_cpu = cluster.total("CPU") / resources["num_cpus"] if resources["num_cpus"] else 1e9
    return max(1, int(min(by_gpu, by_cpu) + 1e-9))


def cpu_only(jobs: Sequence[Job]) -> bool:
    return all(j.spec.config["device"] == "cpu" for j in jobs)
