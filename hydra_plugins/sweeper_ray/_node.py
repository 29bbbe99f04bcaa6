"""What a worker's node gives its job (runs on the worker): the node's GPUs, the share of
its cores a job's compile may use, the GPU lease of a job that shares its GPU, and the
compile's thread setting (hydra.launcher.compile_threads)."""

from __future__ import annotations

import os
from pathlib import Path

from sweeper.job_spec import GpuLeaseSpec


def node_gpus() -> int:
    """The GPUs Ray declares on the node this runs on."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    return int(next((n["Resources"].get("GPU", 0) for n in ray.nodes() if n.get("NodeID") == node), 0))


def compile_threads_share(jobs_per_gpu: int = 1) -> int:
    """This node's cores divided by the jobs it runs at once (its GPUs times jobs_per_gpu,
    for a GPU job), capped at Inductor's own 32."""
    import ray

    cpus = len(os.sched_getaffinity(0))
    gpus = node_gpus()
    per_job = cpus // (gpus * max(1, jobs_per_gpu)) if gpus >= 1 and ray.get_gpu_ids() else cpus
    return max(1, min(32, per_job))


def cpu_siblings(cpus: list[int]) -> dict[int, tuple[int, ...]]:
    """Each logical CPU's hyperthread siblings (its physical core), from sysfs; a CPU alone
    where sysfs does not say."""
    out: dict[int, tuple[int, ...]] = {}
    for cpu in cpus:
        try:
            text = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
        except OSError:
            out[cpu] = (cpu,)
            continue
        got: list[int] = []
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            got.extend(range(int(lo), int(hi or lo) + 1))
        out[cpu] = tuple(got)
    return out


def lease_spec(jobs_per_gpu: int, pause: bool = False) -> GpuLeaseSpec | None:
    """The lease of the GPU Ray gave this job (tasks/gpu_lease.py): its key (the GPU's UUID
    where NVML reads it, else its Ray id) and, when the GPU is packed, the cores the job
    compiles on and those it adds while it holds the lease, and whether it pauses the GPU's
    other jobs while it times a launch-bound phase (`pause`: pause_while_timing). None for a
    job without a GPU."""
    import ray

    from sweeper.sweep import packing
    from sweeper.sweep.machine import nvml_uuid

    ids = [str(g) for g in ray.get_gpu_ids()]
    if not ids:
        return None
    key = nvml_uuid(ids[0]) or f"gpu{ids[0]}"
    if jobs_per_gpu <= 1:
        return GpuLeaseSpec(key, jobs_per_gpu, pause_others=bool(pause))
    cpus = sorted(os.sched_getaffinity(0))
    siblings, gpus = cpu_siblings(cpus), max(1, node_gpus())
    index = int(ids[0]) if ids[0].isdigit() and int(ids[0]) < gpus else 0
    shared = packing.shared_cpus(cpus, siblings, gpus)
    leased = sorted(set(shared) | set(packing.launch_cpus(cpus, siblings, index)))
    return GpuLeaseSpec(key, jobs_per_gpu, tuple(shared), tuple(leased), bool(pause))


def set_compile_threads(setting: str, lease: GpuLeaseSpec | None) -> None:
    """TORCHINDUCTOR_COMPILE_THREADS for the job (an explicit one wins): see the launcher's
    compile_threads setting (_config.py)."""
    from sweeper.sweep import packing

    if "TORCHINDUCTOR_COMPILE_THREADS" in os.environ:
        return
    per_gpu = lease.jobs_per_gpu if lease else 1
    if setting == "auto" and lease and lease.cpus_shared and per_gpu > 1:
        threads = packing.compile_threads(len(lease.cpus_shared), max(1, node_gpus()), per_gpu)
    elif setting == "share":
        threads = compile_threads_share(per_gpu)
    else:
        return
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(threads)  # a fresh worker per job
