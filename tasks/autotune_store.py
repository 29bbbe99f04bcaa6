"""The sweep's store of max-autotune results: every job's new timings go back to the
driver with its results, and seed every autotune=on job that starts after it, in this
sweep and in later ones (config key `autotune_store`, a folder on the driver's machine).

Inductor keeps the timings of every max-autotune choice (template configs against
cuBLAS/cuDNN, per op and input shapes) in one JSON file, `<inductor cache>/cache/<system
hash>` (torch/_inductor/codecache.py: PersistentCache). When that file already has every
choice of an op, Inductor neither precompiles nor benchmarks them again
(select_algorithm.py: make_precompile_fn, do_autotuning). Jobs keep private caches, and on
a Ray cluster nodes share no disk, so the entries travel through the driver:

- driver, before a job starts: load() reads the store for the job's torch version, and the
  launcher puts it in the job's spec (`autotune_seed`);
- job, before torch loads: seed_job() merges those entries into the job's own cache, so a
  job pays only for the shapes no earlier job has tuned;
- job, after its compile: write_job_entries() leaves the job's entries in its folder
  (autotune_entries.json), which comes back with the record;
- driver, when the job's result arrives: absorb() merges them into the store, under a lock
  and written atomically, so two sweeps on one machine never lose each other's entries
  and a killed driver never leaves half a file.

Keys: a folder per torch version (`torch-2.11.0+cu130`), in it a file per Inductor system
hash, which covers the GPU's name and the CUDA and Triton versions; nothing is reused
across them. Only template autotuning is shared; a Triton kernel's own config choice
(its `.best_config` file) stays per job.
"""

from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path

from sweeper.record import atomic_write_text


class StoreError(Exception):
    pass


OFF = (None, "", "off", "none", "null", "false", False)


def enabled(value) -> bool:
    """The config's `autotune_store`: a folder, or off (null, off, none, false)."""
    return (value.lower() if isinstance(value, str) else value) not in OFF


def shared_by(config: dict) -> bool:
    """Whether a job of this config takes and gives store entries: autotune on, store not off."""
    return bool(config.get("autotune")) and enabled(config.get("autotune_store"))


def count_entries(cache: dict) -> int:
    """Timed choices in one PersistentCache `cache` dict: op -> inputs -> precision -> choice."""
    return sum(len(choices) for op in cache.values() for inputs in op.values() for choices in inputs.values())


def merge_entries(into: dict, new: dict) -> int:
    """Add `new`'s timed choices to `into` (in place); returns how many were not there.
    A choice timed in both keeps `new`'s timing: the later measurement."""
    added = 0
    for op, by_inputs in new.items():
        for inputs, by_precision in by_inputs.items():
            for precision, choices in by_precision.items():
                dst = into.setdefault(op, {}).setdefault(inputs, {}).setdefault(precision, {})
                added += sum(1 for c in choices if c not in dst)
                dst.update(choices)
    return added


def _read(path: Path) -> dict:
    """The {"system": ..., "cache": ...} document, or StoreError naming the file."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise StoreError(f"{path}: not a readable autotune cache file ({e})") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("cache", {}), dict):
        raise StoreError(f"{path}: not an autotune cache file (no 'cache' mapping)")
    return doc


def _set_aside(path: Path, error: StoreError) -> str:
    """Rename an unreadable store file to *.corrupt (kept for a look, out of the way)."""
    path.rename(path.with_suffix(".corrupt"))
    return f"{error}; set aside as {path.with_suffix('.corrupt').name}"


def _write_atomic(path: Path, doc: dict) -> None:
    atomic_write_text(path, json.dumps(doc, indent=1))


@contextmanager
def _locked(store: Path, system: str):
    with open(store / f"{system}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _job_files(inductor_cache: Path) -> Path:
    return inductor_cache / "cache"


ENTRIES_FILE = "autotune_entries.json"  # in the job folder: the job's timings, back to the driver


def torch_folder(store: Path, torch_version: str) -> Path:
    return Path(store).expanduser() / f"torch-{torch_version}"


def load(store: Path, torch_version: str) -> dict:
    """Driver: the store's entries for one torch version, as a job's `autotune_seed`. A
    store file that cannot be read is set aside (renamed *.corrupt) with a note, never a
    failed sweep."""
    folder = torch_folder(store, torch_version)
    systems, notes = {}, []
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        with _locked(folder, f.stem):
            try:
                doc = _read(f)
            except StoreError as e:
                notes.append(_set_aside(f, e))
                continue
        if doc.get("cache"):
            systems[f.stem] = doc
    return {"store": str(folder), "torch": torch_version, "systems": systems, "notes": notes}


def seed_job(seed: dict, inductor_cache: Path, torch_version: str) -> dict:
    """Job: merge the driver's entries into this job's own Inductor cache (before torch
    compiles anything). Entries of another torch version are not used."""
    out = {"store": seed.get("store"), "seeded_entries": 0, "notes": list(seed.get("notes", []))}
    if seed.get("torch") != torch_version:
        out["notes"].append(f"store entries are for torch {seed.get('torch')}, this job runs {torch_version}: not used")
        return out
    files = _job_files(inductor_cache)
    for system, doc in seed.get("systems", {}).items():
        files.mkdir(parents=True, exist_ok=True)
        target = files / system
        mine = _read(target) if target.exists() else {"system": doc.get("system"), "cache": {}}
        merge_entries(mine["cache"], doc["cache"])
        _write_atomic(target, mine)
        out["seeded_entries"] += count_entries(doc["cache"])
    return out


def write_job_entries(job_dir: Path, inductor_cache: Path, torch_version: str) -> int:
    """Job: its cache's timings (seeded ones included) into job_dir/ENTRIES_FILE, for the
    driver; returns how many there are."""
    src, systems = _job_files(inductor_cache), {}
    for f in sorted(p for p in src.iterdir() if p.is_file() and not p.name.startswith(".")) if src.is_dir() else []:
        doc = _read(f)
        if doc.get("cache"):
            systems[f.name] = doc
    if systems:
        _write_atomic(Path(job_dir) / ENTRIES_FILE, {"torch": torch_version, "systems": systems})
    return sum(count_entries(d["cache"]) for d in systems.values())


def absorb(store: Path, job_dir: Path) -> int | None:
    """Driver: merge a finished job's entries (job_dir/ENTRIES_FILE, then removed: the store
    holds them) into the store; returns how many were new there, None when the job left
    none. A corrupt store file is set aside and started afresh."""
    path = Path(job_dir) / ENTRIES_FILE
    if not path.is_file():
        return None
    entries = _read(path)
    folder = torch_folder(store, str(entries.get("torch")))
    folder.mkdir(parents=True, exist_ok=True)
    new = 0
    for system, doc in entries.get("systems", {}).items():
        target = folder / f"{system}.json"
        with _locked(folder, system):
            try:
                shared = _read(target) or {"system": doc.get("system"), "cache": {}}
            except StoreError as e:
                _set_aside(target, e)
                shared = {"system": doc.get("system"), "cache": {}}
            new += merge_entries(shared["cache"], doc["cache"])
            _write_atomic(target, shared)
    path.unlink()
    return new
