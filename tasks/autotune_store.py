"""A node's store of max-autotune results, shared by the jobs that run there
(config key `autotune_store`; on in the nightly preset).

Inductor keeps the timings of every max-autotune choice (template configs against
cuBLAS/cuDNN, per op and input shapes) in one JSON file, `<inductor cache>/cache/<system
hash>` (torch/_inductor/codecache.py: PersistentCache). When that file already has every
choice of an op, Inductor neither precompiles nor benchmarks them again
(select_algorithm.py: make_precompile_fn, do_autotuning). Jobs keep private caches (no
shared temp paths), so the store is copied in and out around the compile:

- seed(), before torch loads: the store's file for each system is merged into the job's
  own cache, so a job pays only for the shapes no earlier job has tuned;
- publish(), after the compile: the job's entries are merged into the store, under a lock
  and written atomically, so concurrent jobs on one node never lose each other's entries
  and a killed job never leaves half a file.

Jobs that run at the same time do not see each other's new entries until one publishes.
The system hash covers the GPU name and the CUDA and Triton versions, so one store can
serve several kinds of machine. Only template autotuning is shared; a Triton kernel's
own config choice (its `.best_config` file) stays per job.
"""

from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path

from sweeper.record import atomic_write_text


class StoreError(Exception):
    pass


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


def seed(store: Path, inductor_cache: Path) -> dict:
    """Copy the store's entries into the job's Inductor cache. A store file that cannot be
    read is set aside (renamed *.corrupt) with a note, never a failed job."""
    store, out = Path(store).expanduser(), _job_files(inductor_cache)
    notes, seeded = [], 0
    if not store.is_dir():
        return {"store": str(store), "seeded_entries": 0, "notes": ["store is empty (no folder yet)"]}
    for f in sorted(store.glob("*.json")):
        system = f.stem
        with _locked(store, system):
            try:
                doc = _read(f)
            except StoreError as e:
                notes.append(_set_aside(f, e))
                continue
        if not doc.get("cache"):
            continue
        target = out / system
        out.mkdir(parents=True, exist_ok=True)
        mine = _read(target) if target.exists() else {"system": doc.get("system"), "cache": {}}
        merge_entries(mine["cache"], doc["cache"])
        _write_atomic(target, mine)
        seeded += count_entries(doc["cache"])
    return {"store": str(store), "seeded_entries": seeded, "notes": notes}


def publish(store: Path, inductor_cache: Path) -> dict:
    """Merge the job's entries into the store; returns the counts for the job's record."""
    store, src = Path(store).expanduser(), _job_files(inductor_cache)
    new = total = 0
    if src.is_dir():
        store.mkdir(parents=True, exist_ok=True)
        for f in sorted(p for p in src.iterdir() if p.is_file() and not p.name.startswith(".")):
            doc = _read(f)
            if not doc.get("cache"):
                continue
            target = store / f"{f.name}.json"
            with _locked(store, f.name):
                try:
                    shared = _read(target) or {"system": doc.get("system"), "cache": {}}
                except StoreError as e:
                    _set_aside(target, e)
                    shared = {"system": doc.get("system"), "cache": {}}
                new += merge_entries(shared["cache"], doc["cache"])
                _write_atomic(target, shared)
            total += count_entries(doc["cache"])
    return {"job_entries": total, "new_in_store": new}
