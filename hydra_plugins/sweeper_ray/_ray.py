"""Ray's part of the launcher: starting or joining Ray, the job on a worker (a child
process, then its folder packed), and the record back in the driver's sweep folder
whatever happened to the worker (_executor.py hands these to the scheduler)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import shutil
import signal
import sys
import tarfile
from pathlib import Path

from hydra_plugins.sweeper_ray._address import check_ray_address
from hydra_plugins.sweeper_ray._config import cluster_address, with_defaults
from hydra_plugins.sweeper_ray._reaper import watch_embedded_ray
from sweeper.job_spec import JobSpec
from sweeper.record import Record, atomic_write_bytes, no_colour, relocate, write_record
from sweeper.sweep.control import Job
from sweeper.sweep.job_process import failed_record
from sweeper.sweep.executor import ResultsNotWritten
from sweeper.sweep.validate import SweepConfigError, stop_on_problem
from sweeper.stores.autotune_store import ENTRIES_FILE

_REPO_ROOT = Path(__file__).resolve().parents[2]


def init_ray(conf: dict) -> str:
    conf = with_defaults(conf)
    address = cluster_address(conf)
    if not address:
        _loopback_only()
    import ray

    if ray.is_initialized():
        return "already initialized"
    if address:
        # An existing cluster: ask it for nothing (resources, dashboard) at init. A wrong
        # address would keep ray.init retrying or hanging for minutes: check it in seconds.
        stop_on_problem(check_ray_address, address, float(conf["connect_timeout_s"]))
        stop_on_problem(_join, address, dict(conf["runtime_env"] or {}) or None)
        return f"joined Ray cluster at {address}"
    # Workers inherit the driver's environment. PYTHONPATH goes there, not into a
    # runtime_env: Ray prestarts idle workers only for the default environment, and a
    # fresh worker per job (max_calls=1) then starts in about 0.5 s instead of 0.9 s
    # (2-core CPU machine, bench/results/ray_overhead_cpu.md).
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(_REPO_ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), *paths]))
    _quiet_start()
    # Watched from before ray.init: a driver killed outright, or stopped while Ray starts,
    # leaves no Ray process behind (_reaper.py).
    watch_embedded_ray()
    # "local": a new Ray of this sweep's own. With no address, ray.init joins the cluster
    # that `ray start` last wrote down on this machine (/tmp/ray/ray_current_cluster), with
    # its exposure and its token, or retries for minutes one that has since stopped.
    try:
        ray.init(address="local", include_dashboard=False)
    except SystemExit as e:  # Ray's own SIGTERM handler, set during init, exits with the signal's number
        if e.code == signal.SIGTERM:
            raise KeyboardInterrupt("SIGTERM while Ray started") from None
        raise
    # ray.init leaves a native SIGTERM handler of the driver's core worker that aborts the
    # process (exit 134): the sweep's own goes back at once, so that only a SIGTERM in the
    # last moments of ray.init itself meets it (docs/reliability.md)
    from sweeper.sweep.control import sigterm_as_interrupt

    sigterm_as_interrupt()
    return f"started an embedded local Ray on 127.0.0.1 (no dashboard, {token_auth_state()})"


def _quiet_start() -> None:
    """Two things Ray prints that a sweep's user should not read: with RAY_AUTH_MODE unset,
    Ray 2.60 turns token authentication on and says "Set RAY_AUTH_MODE=disabled to opt
    out", an invitation to weaken what this launcher keeps on; setting the mode to token
    explicitly, as Ray's own default does, keeps it on without the hint. And in a log
    written to a file (stdout not a terminal), the colour codes around each job line's
    prefix (RAY_COLOR_PREFIX=0 drops them; the driver prints those lines)."""
    if "RAY_AUTH_MODE" not in os.environ:
        try:
            from ray._private.authentication.authentication_token_setup import _enable_token_auth
        except ImportError:  # another Ray version: its own default stands
            pass
        else:
            _enable_token_auth()  # RAY_AUTH_MODE=token, and Ray's cached config told
    if not sys.stdout.isatty():
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")


def _join(address: str, runtime_env: dict | None) -> None:
    import ray

    try:
        ray.init(address=address, runtime_env=runtime_env)
    except Exception as e:  # a cluster that answered the check but refused this driver
        message = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        raise SweepConfigError(f"joining the Ray cluster at {address} failed: {type(e).__name__}: {message}; "
                               "check hydra.launcher.address / RAY_ADDRESS and that this Ray version "
                               "matches the cluster's") from None


def token_auth_state() -> str:
    """What Ray says of its token authentication, as it is: Ray 2.60 turns it on for a local
    cluster unless RAY_AUTH_MODE turns it off, which is worth a warning."""
    try:
        from ray._private.authentication.authentication_utils import is_token_auth_enabled
    except ImportError:  # another Ray version: say so rather than claim either way
        return "token authentication: unknown with this Ray version"
    if is_token_auth_enabled():
        return "token authentication on"
    print("sweeper: warning: Ray's token authentication is off (RAY_AUTH_MODE="
          f"{os.environ.get('RAY_AUTH_MODE', 'unset')}); any local process can submit work to this Ray",
          file=sys.stderr, flush=True)
    return "token authentication OFF"


def _loopback_only() -> None:
    """Keep an embedded Ray off the network. Passing 127.0.0.1 as the node address does not
    do it: Ray 2.60 swaps it for the machine's reachable address
    (services.resolve_ip_for_localhost), and its GCS, raylet and workers then listen on
    every interface. Its local-only mode (the default on macOS and Windows) does:
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes the node address 127.0.0.1 and every Ray
    process listen there (tests/test_ray_launcher.py). Ray reads the variable when it is
    imported, and its processes inherit it from here."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:  # ray was imported before this (e.g. in a test): its copy too
        setattr(constants, "ENABLE_RAY_CLUSTER", False)


def scratch_key(sweep_dir: Path) -> str:
    return f"{sweep_dir.name}-{hashlib.sha1(str(sweep_dir).encode()).hexdigest()[:8]}"


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


def gpu_lease(jobs_per_gpu: int, pause: bool = False) -> dict | None:
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
    lease = {"key": nvml_uuid(ids[0]) or f"gpu{ids[0]}", "jobs_per_gpu": jobs_per_gpu,
             "cpus_shared": None, "cpus_leased": None, "pause_others": bool(pause)}
    if jobs_per_gpu > 1:
        cpus = sorted(os.sched_getaffinity(0))
        siblings, gpus = cpu_siblings(cpus), max(1, node_gpus())
        index = int(ids[0]) if ids[0].isdigit() and int(ids[0]) < gpus else 0
        shared = packing.shared_cpus(cpus, siblings, gpus)
        lease["cpus_shared"] = shared
        lease["cpus_leased"] = sorted(set(shared) | set(packing.launch_cpus(cpus, siblings, index)))
    return lease


def set_compile_threads(setting: str, lease: dict | None) -> None:
    """TORCHINDUCTOR_COMPILE_THREADS for the job (an explicit one wins): see the launcher's
    compile_threads setting (_config.py)."""
    from sweeper.sweep import packing

    if "TORCHINDUCTOR_COMPILE_THREADS" in os.environ:
        return
    per_gpu = int((lease or {}).get("jobs_per_gpu") or 1)
    if setting == "auto" and lease and lease.get("cpus_shared") and per_gpu > 1:
        threads = packing.compile_threads(len(lease["cpus_shared"]), max(1, node_gpus()), per_gpu)
    elif setting == "share":
        threads = compile_threads_share(per_gpu)
    else:
        return
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(threads)  # a fresh worker per job


def run_in_worker(spec: JobSpec, scratch_job_dir: str, timeout_s: float | None,
                  compile_threads: str = "all", jobs_per_gpu: int = 1, pause_while_timing: bool = False) -> dict:
    """Runs on a Ray worker: the job in a child process, then its folder as a bundle."""
    import socket

    from sweeper.sweep.job_process import progress_printer, run_job_process

    lease = gpu_lease(jobs_per_gpu, pause_while_timing)
    if lease is not None:
        spec = dataclasses.replace(spec, gpu_lease=lease)
    set_compile_threads(compile_threads, lease)

    job_dir = Path(scratch_job_dir)
    if job_dir.exists():  # an earlier attempt: keep its compile cache, drop the rest
        for p in job_dir.iterdir():
            if p.name != "cache":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    record = run_job_process(spec, job_dir, timeout_s, progress_printer(spec.job_id))
    import ray

    bundle = pack(job_dir)
    # the scratch folder stays until the driver has written the bundle into the sweep folder
    # (discard_scratch): a driver that cannot (a full disk) names it as where the results are
    return {"record": record, "bundle": bundle, "scratch": str(job_dir), "host": socket.gethostname(),
            "node_id": ray.get_runtime_context().get_node_id(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}


def remove_scratch(job_dir: Path) -> None:
    """A finished job's scratch folder, and the sweep's folder above it once empty."""
    shutil.rmtree(job_dir, ignore_errors=True)
    try:
        job_dir.parent.rmdir()
    except OSError:  # other jobs of the sweep still there
        pass


def discard_scratch(result: dict) -> None:
    """A job's scratch folder, once its results are written into the sweep folder: removed
    here when the job ran on the driver's node, else by a small task on its node."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    path = Path(result["scratch"])
    if result.get("node_id") in (None, ray.get_runtime_context().get_node_id()):
        remove_scratch(path)
        return
    ray.remote(remove_scratch).options(  # not waited for: a node gone meanwhile took its files with it
        num_cpus=0, max_retries=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(result["node_id"], soft=True)).remote(path)


def pack(job_dir: Path) -> bytes:
    """The job folder, compile caches left out, as tar.gz bytes. Fast compression: its
    traces are compressed already, and a cold max-autotune job's compile for the compile
    store is large (105 MB for resnet18 inference on an H200)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for p in sorted(job_dir.iterdir()):
            if p.name not in ("cache", "job.json"):
                tar.add(p, arcname=p.name)
    return buf.getvalue()


def unpack(bundle: bytes, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("traces", "modules", "reference"):
        shutil.rmtree(dest / name, ignore_errors=True)  # nothing stale from an earlier run
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


def ray_error_line(e: BaseException) -> str:
    """What a Ray error says went wrong, in one line without colour codes: a task's
    exception is its message's last line (`PermissionError: ... '/proc/x'`); its first is
    only the task's name and process (`ray::run_in_worker() (pid=...)`)."""
    lines = [x.strip() for x in no_colour(str(e)).strip().splitlines() if x.strip()]
    if not lines:
        return type(e).__name__
    last = lines[-1] if isinstance(e, ray_task_error()) and len(lines) > 1 else lines[0]
    return last[:300]


def ray_task_error() -> type:
    import ray

    return ray.exceptions.RayTaskError


def collect(ref, job: Job, duration: float, scratch_job_dir: Path) -> Record:
    """The job's record in the sweep folder, whatever happened to its worker."""
    import ray

    try:
        result = ray.get(ref)
    except ray.exceptions.RayError as e:
        reason = f"Ray task failed ({type(e).__name__}): {ray_error_line(e)}"
        salvage({job.job_dir: scratch_job_dir})
        return record_without_worker(job, reason, duration, scratch_job_dir)
    record = relocate(result["record"], result["scratch"], str(job.job_dir))
    record["job"]["host"] = result["host"]
    record["job"]["ray_node_id"] = result["node_id"]
    record["job"]["gpu_ids"] = result.get("gpu_ids")  # the GPUs Ray gave the job (more than one: spare ones lent)
    arts = record.setdefault("artifacts", {})
    if str(arts.get("cache") or "").startswith(result["scratch"].rstrip("/") + "/"):  # goes with the scratch folder
        arts["cache_note"] = (f"the job's compile cache {arts['cache']} on {result['host']} was removed with its "
                              "scratch folder once its results were back; its compile is kept in the compile store")
        arts["cache"] = None
    try:
        unpack(result["bundle"], job.job_dir)
        write_record(job.job_dir, record)
    except OSError as e:
        raise ResultsNotWritten(job, e, result["scratch"], result["host"]) from None
    discard_scratch(result)  # only now: everything worth keeping is in the sweep folder
    return record


LOG_TAIL_BYTES = 4 << 20  # of a stopped job's log, brought back from its node


def _left_in_scratch(scratch_job_dirs: list[str]) -> dict[str, dict]:
    """Runs on a node: what jobs stopped there left in its scratch folder (their autotune
    entries, the end of their log), read, then the folders removed."""
    out = {}
    for d in scratch_job_dirs:
        entries, log = Path(d) / ENTRIES_FILE, Path(d) / "job.log"
        if not Path(d).is_dir():
            continue
        got = {"entries": entries.read_bytes() if entries.is_file() else None, "log": None}
        if log.is_file():
            with open(log, "rb") as f:
                f.seek(max(0, log.stat().st_size - LOG_TAIL_BYTES))
                got["log"] = f.read()
        out[d] = got
        remove_scratch(Path(d))
    return out


def salvage(dirs: dict[Path, Path], timeout_s: float = 30.0) -> int:
    """What jobs stopped without sending their folder back (cancelled, their worker or node
    lost) left in the scratch folder where they ran (job_dir -> scratch_job_dir): their
    autotune entries, for the store, and their log, into their sweep folders; read by a
    task on every live node, which then removes those scratch folders. Where a job left
    entries on two nodes (a retried job), the later write wins. Returns how many jobs gave
    autotune entries."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    scratch = [str(s) for s in dirs.values()]
    task = ray.remote(_left_in_scratch)
    refs = [task.options(num_cpus=0, max_retries=0,
                         scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(scratch)
            for n in ray.nodes() if n.get("Alive")]
    found: dict[str, dict] = {}
    for ref in refs:
        try:
            got = ray.get(ref, timeout=timeout_s)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):  # that node is gone: its files too
            continue
        for d, left in got.items():
            if d not in found or _written_at(left["entries"]) > _written_at(found[d]["entries"]):
                found[d] = left
    for job_dir, scratch_dir in dirs.items():
        kept = found.get(str(scratch_dir))
        if kept:
            job_dir.mkdir(parents=True, exist_ok=True)
            if kept["log"] is not None:
                (job_dir / "job.log").write_bytes(kept["log"])
            if kept["entries"] is not None:
                atomic_write_bytes(job_dir / ENTRIES_FILE, kept["entries"])
    return sum(1 for left in found.values() if left["entries"] is not None)


def _written_at(data: bytes | None) -> float:
    if data is None:
        return -1.0
    try:
        return float(json.loads(data).get("written_at") or 0)
    except (ValueError, AttributeError):
        return 0.0


def record_without_worker(job: Job, reason: str, duration: float, scratch_job_dir: Path,
                          status: str = "failed") -> Record:
    """The record of a job whose worker never sent its folder back (it died, or the sweep
    was cancelled). Its log stayed in the node's scratch folder: salvage() brings it (and
    its autotune entries) into the sweep folder, or it is copied here where this machine
    can read it; where neither could be done (a lost node), the record names where it was.
    Either way the path a user is shown exists, and Ray's own logs are named."""
    job.job_dir.mkdir(parents=True, exist_ok=True)
    scratch_log = scratch_job_dir / "job.log"
    if scratch_log.is_file():
        shutil.copy(scratch_log, job.job_dir / "job.log")
    record = failed_record(job.spec, job.job_dir, reason, duration, status=status)
    if not (job.job_dir / "job.log").exists():
        record["artifacts"]["log"] = None
        record["log_note"] = (f"no log here: the job never started, or ran on another node "
                              f"(its log there: {scratch_log})")
    record["artifacts"]["ray_logs"] = ray_logs_dir()
    write_record(job.job_dir, record)
    return record


def ray_logs_dir() -> str | None:
    """Where Ray writes its workers' own logs (this session's), None if unknown."""
    try:
        import ray

        return ray._private.worker.global_worker.node.get_logs_dir_path()
    except Exception:  # noqa: BLE001 - private API; a pointer, never a failure
        return None


def check_on_nodes(envs: dict[str, str], need_triton: bool) -> tuple[dict[str, dict], list[str]]:
    """The same check on every alive node of the joined Ray cluster (a task pinned to each)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from sweeper.sweep.pythons import probe, problem

    remote = ray.remote(num_cpus=0)(probe)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = {(name, n["NodeID"], n.get("NodeManagerAddress")): remote.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(exe)
        for name, exe in envs.items() for n in nodes}
    infos: dict[str, dict] = {}
    problems: list[str] = []
    for (name, _, address), ref in refs.items():
        info = ray.get(ref)
        infos.setdefault(name, info)
        p = problem(name, info, need_triton)
        if p:
            problems.append(f"on node {address}: {p}")
    return infos, problems
