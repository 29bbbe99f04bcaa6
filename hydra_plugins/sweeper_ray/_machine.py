"""This machine's GPUs, read by NVML before Ray starts (no torch import): for the checks
and the dry run, which must answer as a real run would, in about a second."""

from __future__ import annotations

from hydra_plugins.sweeper_ray._config import cluster_address
from sweeper.sweep.control import Job


def nvml_gpus() -> tuple[int | None, str | None]:
    """(GPUs on this machine, the first one's model as records name it), read by NVML
    without importing torch: (None, None) when pynvml is missing, (0, None) with no driver."""
    try:
        import pynvml
    except ImportError:
        return None, None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no NVIDIA driver: no GPU a job could use
        return 0, None
    try:
        count = pynvml.nvmlDeviceGetCount()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)) if count else None
        return count, (name.decode() if isinstance(name, bytes) else name)
    finally:
        pynvml.nvmlShutdown()


def cpu_only(jobs: list[Job]) -> bool:
    return all(j.spec["config"]["device"] == "cpu" for j in jobs)


def local_gpu_name(jobs: list[Job]) -> str | None:
    """The GPU model this machine's jobs run on; None for CPU jobs."""
    return None if cpu_only(jobs) else nvml_gpus()[1]


def local_slots(jobs: list[Job]) -> int:
    """How many jobs an embedded Ray runs at a time here (one a GPU; one on a CPU): for the
    dry run's estimate, before Ray starts."""
    if cpu_only(jobs):
        return 1
    return max(1, nvml_gpus()[0] or 1)


def local_gpus(conf: dict, jobs: list[Job]) -> int | None:
    """The GPUs an embedded Ray would have, counted before it starts, when a job asks for
    device=cuda: so that a dry run and a real run refuse alike. None on a cluster (Ray
    counts its GPUs once joined), when no job asks for CUDA, or without pynvml (Ray's own
    count decides once it has started)."""
    if cluster_address(conf):
        return None
    if not any(j.spec["config"]["device"] == "cuda" for j in jobs):
        return None
    return nvml_gpus()[0]
