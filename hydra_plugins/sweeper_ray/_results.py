"""A finished job's folder into the driver's sweep folder, whatever happened to its worker
(the Ray executor's collect, _executor.py), by one of two paths:

- without shared storage (the default): the worker packs the job folder (compile caches left
  out) into one compressed bundle that comes back through Ray, and the driver unpacks it;
- with shared storage (hydra.launcher.storage_path, sweeper/stores/storage.py): the worker
  writes the job folder and its compile there itself, and only the record (and a job's
  autotune entries, kilobytes) comes back; the driver writes the record, its artifact paths
  pointing into the storage.

A job whose worker or node was lost, or that was cancelled, has its log and autotune entries
brought back from its node's scratch folder (salvage)."""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
import shutil
import tarfile
from pathlib import Path

from hydra_plugins.sweeper_ray import ray_internals
from sweeper.job_spec import JobSpec
from sweeper.record import Record, atomic_write_bytes, no_colour, relocate, write_record
from sweeper.stores import compile_store
from sweeper.stores.autotune_store import ENTRIES_FILE
from sweeper.stores.storage import SWEEPS, Storage, StorageError
from sweeper.sweep.control import Job, launch_spec
from sweeper.sweep.executor import ResultsNotWritten
from sweeper.sweep.job_process import failed_record

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


def to_storage(record: Record, job_dir: Path, config: dict, storage_uri: str, stored_at: str,
               node_stores: Path, where: dict) -> dict:
    """Worker, with shared storage: the job's compile into the storage's compile store
    (keeping this node's copy), its folder to `stored_at` there, the scratch folder removed;
    returns what goes back to the driver: the record, its artifact paths pointing into the
    storage, and the job's autotune entries (kilobytes) for the driver's store. Where the
    storage cannot take the folder, the bundle goes back as without storage, with a note."""
    storage = Storage(storage_uri)
    if compile_store.shared_by(config):
        try:
            kept = compile_store.keep_in_storage(storage, job_dir, config, node_stores)
        except (compile_store.StoreError, StorageError, OSError) as e:
            kept = None
            record.setdefault("timings", {}).setdefault("compile_store", {}).setdefault("notes", []).append(
                f"its compile could not be kept in {storage.location()}: {e}")
        if kept is not None:
            record.setdefault("timings", {}).setdefault("compile_store", {})["kept_bytes"] = kept
    entries = job_dir / ENTRIES_FILE
    try:
        stored_bytes = storage.put_tree(job_dir, stored_at, leave_out=("cache", "job.json", ENTRIES_FILE))
    except (OSError, StorageError) as e:
        record["job"]["storage_note"] = (f"its folder could not be written to {storage.location(stored_at)} ({e}): "
                                         "it came back through Ray instead")
        return {"record": record, "bundle": pack(job_dir), **where}
    record = relocate(record, where["scratch"], storage.location(stored_at))
    record["job"]["stored_at"], record["job"]["stored_bytes"] = storage.location(stored_at), stored_bytes
    record["job"]["storage"] = storage.uri  # resume checks the folder is still there (control.stored_artifacts_missing)
    out = {"record": record, "entries": entries.read_bytes() if entries.is_file() else None,
           "stored": storage.location(stored_at), **where}
    remove_scratch(job_dir)  # everything worth keeping is in the storage
    out["back_bytes"] = len(pickle.dumps(out))  # about what Ray carries back to the driver
    return out


def stored_at(sweep_key: str, job: Job) -> str:
    """Where a job's folder goes in the storage."""
    return f"{SWEEPS}/{sweep_key}/{job.job_dir.name}"


def spec_bytes(spec: JobSpec) -> int:
    """About the bytes of a job's spec as Ray carries it to the worker: an earlier compile's
    bytes (without shared storage) counted, not copied."""
    seed = spec.compile_seed
    if seed is None:
        return len(pickle.dumps(spec))
    light = dataclasses.replace(spec, compile_seed=dataclasses.replace(seed, data=None, libs=None))
    return seed.carried_bytes() + len(pickle.dumps(light))


def bundle_bytes(result: dict) -> int:
    """About the bytes a job's bundle brought back: the bundle and the record."""
    return len(result["bundle"]) + len(json.dumps(result["record"], default=str))


def collect(ref, job: Job, duration: float, scratch_job_dir: Path, out_bytes: int | None = None) -> Record:
    """The job's record in the sweep folder, whatever happened to its worker; with shared
    storage, its artifacts stay there (to_storage). The record says how many bytes went
    out to the job and came back (job.driver_bytes)."""
    import ray

    try:
        result = ray.get(ref)
    except ray.exceptions.RayError as e:
        reason = f"Ray task failed ({type(e).__name__}): {ray_error_line(e)}"
        salvage({job.job_dir: scratch_job_dir})
        return record_without_worker(job, reason, duration, scratch_job_dir)
    stored = "bundle" not in result
    record = result["record"] if stored else relocate(result["record"], result["scratch"], str(job.job_dir))
    info = record["job"]
    info["dir"], info["host"], info["ray_node_id"] = str(job.job_dir), result["host"], result["node_id"]
    info["gpu_ids"] = result.get("gpu_ids")  # the GPUs Ray gave the job (more than one: spare ones lent)
    record["job"]["driver_bytes"] = {"out": out_bytes,
                                     "back": result.get("back_bytes") if stored else bundle_bytes(result)}
    arts = record.setdefault("artifacts", {})
    if str(arts.get("cache") or "").startswith(result["scratch"].rstrip("/") + "/"):  # goes with the scratch folder
        arts["cache_note"] = (f"the job's compile cache {arts['cache']} on {result['host']} was removed with its "
                              "scratch folder once its results were back; its compile is kept in the compile store")
        arts["cache"] = None
    try:
        if stored:
            job.job_dir.mkdir(parents=True, exist_ok=True)
            if result.get("entries") is not None:  # for the autotune store (exchange.bring_back)
                atomic_write_bytes(job.job_dir / ENTRIES_FILE, result["entries"])
        else:
            unpack(result["bundle"], job.job_dir)
        write_record(job.job_dir, record)
    except OSError as e:
        raise ResultsNotWritten(job, e, result.get("stored") or result["scratch"], result["host"]) from None
    if not stored:
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
    record = failed_record(launch_spec(job), job.job_dir, reason, duration, status=status)
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
        return ray_internals.logs_dir()
    except Exception:  # noqa: BLE001 - private API; a pointer, never a failure
        return None
