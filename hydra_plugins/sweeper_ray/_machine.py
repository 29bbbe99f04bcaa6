"""This machine's GPUs (sweeper/sweep/machine.py: NVML, no torch import) for the checks and
the dry run, which must answer as a real run would, in about a second."""

from __future__ import annotations

from sweeper.sweep.control import Job
from sweeper.sweep.machine import nvml_gpus
from sweeper.sweep.executor import cpu_only
from sweeper.sweep.settings import LauncherSettings


def local_gpu_name(jobs: list[Job]) -> str | None:
    """The GPU model this machine's jobs run on; None for CPU jobs."""
    return None if cpu_only(jobs) else nvml_gpus()[1]


def local_slots(jobs: list[Job]) -> int:
    """How many jobs an embedded Ray runs at a time here (one a GPU; one on a CPU): for the
    dry run's estimate, before Ray starts."""
    if cpu_only(jobs):
        return 1
    return max(1, nvml_gpus()[0] or 1)


def local_gpus(settings: LauncherSettings, jobs: list[Job]) -> int | None:
    """The GPUs an embedded Ray would have, counted before it starts, when a job asks for
    device=cuda: so that a dry run and a real run refuse alike. None on a cluster (Ray
    counts its GPUs once joined), when no job asks for CUDA, or without pynvml (Ray's own
    count decides once it has started)."""
    if settings.cluster_address:
        return None
    if not any(j.spec.config["device"] == "cuda" for j in jobs):
        return None
    return nvml_gpus()[0]
