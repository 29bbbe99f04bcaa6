"""The sweep's store of max-autotune results: every job's new timings and kernel configs
go back to the driver, and seed every autotune=on job that starts after it, in this sweep
and in later ones (config key `autotune_store`, a folder on the driver's machine).

What is kept, as Inductor keeps it in a job's own cache folder:
- **template timings**: every max-autotune choice (template configs against cuBLAS/cuDNN,
  per op and input shapes) in one JSON file, `<inductor cache>/cache/<system hash>`
  (torch/_inductor/codecache.py: PersistentCache). When that file already has every choice
  of an op, Inductor neither precompiles nor benchmarks them again (select_algorithm.py);
- **repeats**: a choice timed again by a later job (one that ran before the store had the
  op, or a store imported into another) keeps its new timing, and its earlier ones here, so
  that the store knows how far one choice's timings move between runs: the noise against
  which max-autotune's decisions are judged (sweeper/analysis/autotune_decisions.py);
- **kernel configs**: a Triton kernel's chosen config (its own autotuning among its configs,
  then coordinate descent), one `<inductor cache>/<xx>/<key>.best_config` file a kernel,
  whose path Inductor derives from the kernel's source (runtime/autotune_cache.py:
  AutotuneCache.create). A job that compiles a kernel of the same source finds the file and
  launches with that config, tuning nothing; Inductor itself refuses one made for another
  candidate list (its `configs_hash`). Each config also keeps its kernel's code key (the
  source without the kernel's name, `kernel_code`): a kernel renamed in a later compile
  (its number in the graph moved) finds it by that (sweeper/torch_internals/kernel_configs.py:
  renamed_config).

Jobs keep private caches, and on a Ray cluster nodes share no disk, so the entries travel
through the driver:
- driver, before a job starts: load() reads the store for the job's torch version, and the
  launcher puts it in the job's spec (`autotune_seed`);
- job, before it compiles: seed_autotune() (tasks/job_stores.py) merges the timings into
  the job's own cache and writes the kernel configs of its own system where Inductor looks
  for them;
- job, while it compiles (tasks/autotune_checkpoint.py) and after: write_autotune_entries()
  leaves the job's entries in its folder (ENTRIES_FILE), marked partial until the compile
  is over, so that a job killed or timed out mid-compile still gives what it tuned;
- driver, when the job's folder is back (finished, failed, timed out or cancelled):
  absorb() merges them into the store, under a lock and written atomically, so two sweeps
  on one machine never lose each other's entries and a killed driver never leaves half a
  file.

Keys: a folder per torch version (`torch-2.11.0+cu130`), in it a file per Inductor system
hash, which covers the GPU's name and the CUDA and Triton versions; nothing is reused
across them. `<system>.used` beside each is touched whenever a job is seeded from it
(`python -m sweeper.store show|prune` read it).
"""

from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path

from sweeper.autotune_info import AutotuneStoreInfo
from sweeper.job_spec import AutotuneSeed
from sweeper.record import atomic_write_text
from sweeper.stores.autotune_merge import merge_doc


class StoreError(Exception):
    pass


OFF = (None, "", "off", "none", "null", "false", False)
ENTRIES_FILE = "autotune_entries.json"  # in the job folder: the job's timings and configs, back to the driver


def enabled(value) -> bool:
    """The config's `autotune_store`: a folder, or off (null, off, none, false)."""
    return (value.lower() if isinstance(value, str) else value) not in OFF


def shared_by(config: dict) -> bool:
    """Whether a job of this config takes and gives store entries: autotune on, store not off."""
    return bool(config.get("autotune")) and enabled(config.get("autotune_store"))


def count_entries(cache: dict) -> int:
    """Timed choices in one PersistentCache `cache` dict: op -> inputs -> precision -> choice."""
    return sum(len(choices) for op in cache.values() for inputs in op.values() for choices in inputs.values())


def count_ops(cache: dict) -> int:
    """Autotuned ops (an op kind of given input shapes) in one `cache` dict."""
    return sum(len(by_inputs) for by_inputs in cache.values())


def read_doc(path: Path) -> dict:
    """A store or job document ({"system", "cache", "kernel_configs"}), {} if absent, or
    StoreError naming the file."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise StoreError(f"{path}: not a readable autotune cache file ({e})") from e
    return read_doc_bytes(data, str(path))


def read_doc_bytes(data: bytes, source: str) -> dict:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise StoreError(f"{source}: not a readable autotune cache file ({e})") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("cache", {}), dict) \
            or not isinstance(doc.get("kernel_configs", {}), dict):
        raise StoreError(f"{source}: not an autotune cache file (no 'cache' mapping)")
    problem = shape_problem(doc)
    if problem:
        raise StoreError(f"{source}: not an autotune cache file of this shape ({problem})")
    return doc


def shape_problem(doc: dict) -> str | None:
    """What in a document is not as the store keeps it, None if nothing: `cache` as op ->
    inputs -> precision -> choice -> timing, `kernel_configs` and `kernel_code` as
    mappings, `system` a mapping (or absent). Every reader then walks it without a check."""
    for op, by_inputs in (doc.get("cache") or {}).items():
        if not isinstance(by_inputs, dict):
            return f"cache[{op!r}] is {type(by_inputs).__name__}, not a mapping of inputs"
        for inputs, by_precision in by_inputs.items():
            if not isinstance(by_precision, dict) or not all(isinstance(c, dict) for c in by_precision.values()):
                return f"cache[{op!r}][{str(inputs)[:40]!r}] is not a mapping of precisions to choices"
    for key in ("kernel_code", "system", "repeats"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            return f"{key} is {type(doc[key]).__name__}, not a mapping"
    for op, by_inputs in (doc.get("repeats") or {}).items():  # op -> inputs -> precision -> choice -> [ms, ...]
        if not isinstance(by_inputs, dict):
            return f"repeats[{op!r}] is {type(by_inputs).__name__}, not a mapping of inputs"
        for inputs, by_precision in by_inputs.items():
            if not isinstance(by_precision, dict) or not all(
                    isinstance(c, dict) and all(isinstance(t, list) and all(_number(x) for x in t) for t in c.values())
                    for c in by_precision.values()):
                return f"repeats[{op!r}][{str(inputs)[:40]!r}] is not precisions to choices to lists of timings"
    system = doc.get("system") or {}
    for key in ("device",):  # what `store show` and `decisions` read of it
        if system.get(key) is not None and not isinstance(system[key], dict):
            return f"system.{key} is {type(system[key]).__name__}, not a mapping"
    return None


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _set_aside(path: Path, error: StoreError) -> str:
    """Rename an unreadable store file to *.corrupt (kept for a look, out of the way)."""
    path.rename(path.with_suffix(".corrupt"))
    return f"{error}; set aside as {path.with_suffix('.corrupt').name}"


def write_doc(path: Path, doc: dict) -> None:
    atomic_write_text(path, json.dumps(doc, indent=1))


@contextmanager
def locked(folder: Path, system: str):
    """The store's lock for one system's file: every reader and writer of the store takes it."""
    path = folder / f"{system}.lock"
    existed = path.exists()
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if not existed and not (folder / f"{system}.json").exists():
                path.unlink(missing_ok=True)  # a lock for a file that never came to be (a refused import)
            fcntl.flock(lock, fcntl.LOCK_UN)


def torch_folder(store: Path, torch_version: str) -> Path:
    return Path(store).expanduser() / f"torch-{torch_version}"


def mark_used(folder: Path, system: str) -> None:
    (folder / f"{system}.used").touch()


def merge_into_store(folder: Path, system: str, doc: dict) -> tuple[int, int]:
    """One system's document merged into the store's file for it, under its lock:
    (new timed choices, new kernel configs). A corrupt store file is set aside and started
    afresh (absorb() and `python -m sweeper.store import` both come here)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{system}.json"
    with locked(folder, system):
        try:
            shared = read_doc(target) or {"system": doc.get("system"), "cache": {}, "kernel_configs": {}}
        except StoreError as e:
            _set_aside(target, e)
            shared = {"system": doc.get("system"), "cache": {}, "kernel_configs": {}}
        new = merge_doc(shared, doc)
        write_doc(target, shared)
        mark_used(folder, system)
    return new


def load(store: Path, torch_version: str) -> AutotuneSeed:
    """Driver: the store's entries for one torch version, as a job's `autotune_seed`. A
    store file that cannot be read is set aside (renamed *.corrupt) with a note, never a
    failed sweep."""
    folder = torch_folder(store, torch_version)
    systems, notes = {}, []
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        with locked(folder, f.stem):
            try:
                doc = read_doc(f)
            except StoreError as e:
                notes.append(_set_aside(f, e))
                continue
            if doc.get("cache") or doc.get("kernel_configs"):
                systems[f.stem] = doc
                mark_used(folder, f.stem)
    return AutotuneSeed(str(folder), torch_version, systems, tuple(notes))


def store_info(systems: dict[str, dict]) -> AutotuneStoreInfo:
    """Counts of a document set: timed choices, ops, kernel configs."""
    return {"job_entries": sum(count_entries(d.get("cache") or {}) for d in systems.values()),
            "job_ops": sum(count_ops(d.get("cache") or {}) for d in systems.values()),
            "job_kernel_configs": sum(len(d.get("kernel_configs") or {}) for d in systems.values())}


def _entries_of(job_dir: Path) -> dict | None:
    """A job folder's ENTRIES_FILE, None when there is none; StoreError when unreadable."""
    path = Path(job_dir) / ENTRIES_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise StoreError(f"{path}: not readable ({e})") from e


def left_in(job_dir: Path) -> AutotuneStoreInfo | None:
    """What a job's ENTRIES_FILE holds, for the record of a job that could not write its
    own (timed out, killed, cancelled): the counts, whether they are partial, the seconds
    its phase had run when last written, and what it started with. None when it left none."""
    try:
        doc = _entries_of(job_dir)
    except StoreError as e:
        return {"notes": [str(e)]}
    if doc is None:
        return None
    progress = doc.get("progress") or {}
    # what the job started with (seeded_*), as its own record would say
    out: AutotuneStoreInfo = {**(progress.get("started_with") or {}), **store_info(doc.get("systems") or {}),
                              "partial": bool(doc.get("partial"))}
    if progress.get("kernel_config_hits") is not None:
        out["kernel_config_hits"] = progress["kernel_config_hits"]
    if progress.get("phase_started_at"):
        out["stopped_in"] = progress.get("phase")
        out["phase_s_at_last_write"] = round(doc.get("written_at", 0) - progress["phase_started_at"], 1)
        out["phase_started_at"] = progress["phase_started_at"]
    return out


def absorb(store: Path, job_dir: Path) -> AutotuneStoreInfo | None:
    """Driver: merge a job's entries (job_dir/ENTRIES_FILE, then removed: the store holds
    them) into the store; returns how many timed choices and kernel configs were new there
    and whether the job's were partial, None when the job left none."""
    entries = _entries_of(job_dir)
    if entries is None:
        return None
    folder = torch_folder(store, str(entries.get("torch")))
    new = new_configs = 0
    for system, doc in (entries.get("systems") or {}).items():
        added, configs = merge_into_store(folder, system, doc)
        new, new_configs = new + added, new_configs + configs
    (Path(job_dir) / ENTRIES_FILE).unlink()
    return {"new_in_store": new, "new_kernel_configs_in_store": new_configs, "partial": bool(entries.get("partial"))}
