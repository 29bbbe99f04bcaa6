"""Several jobs on one GPU (pure: counts in, numbers out).

A job spends most of its life compiling on the CPU (on an H200, 140 s of a 193 s job of the
mission's command), while holding its GPU: one job a GPU leaves the GPU idle most of the
sweep. So a GPU takes up to `hydra.launcher.jobs_per_gpu` jobs at once, and everything a job
times on the GPU is done under that GPU's lease (tasks/gpu_lease.py), one job at a time.

`auto` packs as many jobs as the GPU's memory and the node's cores allow:
- memory: a job of the models this project has measured peaked at 15 GB (mixnet_l batch 128
  training, max-autotune); MEMORY_PER_JOB_GIB leaves room for autotuning's extra buffers. A
  job that still runs out of memory beside others is run again alone (the launcher).
- cores: each GPU keeps LAUNCH_CPUS cores for the job that holds its lease (its launches
  must not wait behind another job's compile); the rest are shared out, CORES_PER_JOB
  a compiling job (its Python front end, and a few compile workers).
- at most MAX_JOBS_PER_GPU: more only lengthens the queue for the lease.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweeper.sweep.settings import LauncherSettings

MEMORY_PER_JOB_GIB = 24
LAUNCH_CPUS = 2  # per GPU: the launching thread, and autograd's device thread for the backward
CORES_PER_JOB = 3
MAX_JOBS_PER_GPU = 4


class PackingError(ValueError):
    """A jobs_per_gpu value that is not `auto` or a positive whole number."""


def parse_jobs_per_gpu(value) -> int | None:
    """None for `auto`, else the whole number asked for (>= 1)."""
    text = str(value).strip().lower()
    if text == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1 or str(n) != text:
        raise PackingError(f"hydra.launcher.jobs_per_gpu={value}: auto, or a whole number >= 1 "
                           "(1: one job a GPU at a time)")
    return n


def jobs_per_gpu(value, gpu_memory_gib: float | None, cpus: int, gpus: int) -> tuple[int, str]:
    """How many jobs one GPU takes at once, and why, on a node of `cpus` cores and `gpus`
    GPUs of `gpu_memory_gib` each (None: not known). No GPU: 1."""
    asked = parse_jobs_per_gpu(value)
    if gpus < 1:
        return 1, "no GPU: one job at a time"
    if asked is not None:
        return asked, f"jobs_per_gpu={asked}"
    by_cores = max(1, (cpus - LAUNCH_CPUS * gpus) // (CORES_PER_JOB * gpus))
    by_memory = max(1, int(gpu_memory_gib // MEMORY_PER_JOB_GIB)) if gpu_memory_gib else MAX_JOBS_PER_GPU
    n = max(1, min(by_cores, by_memory, MAX_JOBS_PER_GPU))
    memory = f"{gpu_memory_gib:.0f} GiB / {MEMORY_PER_JOB_GIB} GiB a job" if gpu_memory_gib else "memory not known"
    return n, (f"auto: {memory}, {cpus} cores / {gpus} GPU(s) with {LAUNCH_CPUS} kept a GPU for its lease holder "
               f"and {CORES_PER_JOB} a compiling job, at most {MAX_JOBS_PER_GPU}")


def packing_of(settings: LauncherSettings, nodes, jobs: int, cpu_jobs: bool, gpu_memory_gib: float | None,
               on_cluster: bool) -> tuple[int, str]:
    """Jobs a GPU runs at once on a cluster of `nodes` (as Ray lists them), for a sweep of
    `jobs` jobs left, and a line that says why: the smallest GPU node decides; the GPU's
    memory counts where the sweep runs on this machine (on a cluster, cores alone); never
    more than the jobs need to fill every GPU. `settings`: the launcher's (jobs_per_gpu,
    num_gpus_per_job, pause_while_timing)."""
    gpu_nodes = [n["Resources"] for n in nodes if n.get("Alive") and n["Resources"].get("GPU", 0) >= 1]
    if cpu_jobs or not gpu_nodes:
        return 1, ""
    if settings.num_gpus_per_job is not None:  # the user's share of a GPU a job decides
        return 1, f"packing: none (num_gpus_per_job={settings.num_gpus_per_job:g} decides a job's GPUs)"
    node = min(gpu_nodes, key=lambda r: r.get("CPU", 1) / r["GPU"])
    memory = None if on_cluster else gpu_memory_gib
    per_gpu, why = jobs_per_gpu(settings.jobs_per_gpu, memory, int(node.get("CPU", 1)), int(node["GPU"]))
    gpus = sum(int(r["GPU"]) for r in gpu_nodes)
    needed = max(1, -(-jobs // gpus))
    if per_gpu > needed and parse_jobs_per_gpu(settings.jobs_per_gpu) is None:
        per_gpu, why = needed, f"{why}; {jobs} job(s) on {gpus} GPU(s) need no more"
    paused = ("; the others paused while one times its steps and modules (pause_while_timing)"
              if settings.pause_while_timing else "")
    return per_gpu, (f"packing: up to {per_gpu} jobs a GPU ({why}); each times its GPU under the GPU's lease{paused}"
                     if per_gpu > 1 else f"packing: one job a GPU ({why})")


def launch_cpus(cpus: list[int], siblings: dict[int, tuple[int, ...]], gpu_index: int,
                per_gpu: int = LAUNCH_CPUS) -> list[int]:
    """The cores kept for the lease holder of the node's GPU number `gpu_index`: `per_gpu`
    logical CPUs from the end of the node's list, a physical core's hyperthreads together
    (`siblings`: CPU -> the logical CPUs of its physical core), so that a compiling job
    never shares a physical core with the launching thread. Different GPUs get different
    cores."""
    cores: list[tuple[int, ...]] = []
    for cpu in reversed(sorted(cpus)):
        group = tuple(sorted(c for c in siblings.get(cpu, (cpu,)) if c in cpus))
        if group not in cores:
            cores.append(group)
    need = max(1, -(-per_gpu // max(1, len(cores[0]) if cores else 1)))  # physical cores per GPU
    taken = cores[gpu_index * need:(gpu_index + 1) * need]
    return sorted(c for group in taken for c in group)


def shared_cpus(cpus: list[int], siblings: dict[int, tuple[int, ...]], gpus: int,
                per_gpu: int = LAUNCH_CPUS) -> list[int]:
    """The node's cores less every GPU's launch cores: where packed jobs compile. Never
    empty: on a node too small to keep cores aside, every core."""
    kept = {c for i in range(gpus) for c in launch_cpus(cpus, siblings, i, per_gpu)}
    rest = sorted(c for c in cpus if c not in kept)
    return rest or sorted(cpus)


def compile_threads(shared: int, gpus: int, per_gpu: int) -> int:
    """Inductor compile workers for each of the jobs a node runs at once: twice its share of
    the node's shared cores (at least 2, at most Inductor's own 32). Twice, because a pool
    idles while its job's single-threaded front end generates the next kernels, and jobs
    packed together do not all compile at the same moment; a plain share (compile_threads=
    share) made two jobs on two H200s compile slower (docs/findings.md)."""
    return max(2, min(32, -(-2 * shared // max(1, gpus * per_gpu))))
