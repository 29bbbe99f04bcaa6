"""The compile store: what a job compiled, kept on the driver's machine, so that the same
job in a later sweep (a nightly's next night, the same command run again) loads it
instead of compiling (config key `compile_store`, a folder; `off`: every job compiles cold).

What is kept is PyTorch's own portable cache blob ("mega-cache",
torch.compiler.save_cache_artifacts): the job's FX graphs and AOTAutograd graphs with their
compiled Triton kernels bundled, and the kernels' tuned configs. Loaded into a fresh job's
private cache before it compiles (torch.compiler.load_cache_artifacts), the compile becomes
an FX-graph-cache hit: the same wrapper code, the same kernels and configs, so everything
measured after the compile is the same; only `compile_s` is a warm figure, and the record
says so (timings.compile_cache counts the hits; the tables' `compile_state` is `warm`).
A CPU job also keeps the C++ kernel libraries it built, which the blob does not carry
(`<key hash>.libs.tar.gz`, tasks/cpu_libraries.py): a later run on a host of the same CPU
and compiler puts them back and builds no C++ again; on another host they build again.

A job is seeded only with the blob of an earlier run of the same job (its configuration
but for keys that change no compile, key()), never with another job's: within one sweep
every job still compiles as cold as before, and a cold compile's figures stay comparable.
Different jobs share max-autotune timings through the autotune store instead
(sweeper/stores/autotune_store.py).

The blob travels like the autotune store's entries: the driver reads it into the job's
spec (`compile_seed`), the job process finds it beside its job.json and loads it
(tasks/job_stores.py: seed_compile), and the job's new blob comes back in its folder (compile_artifacts.bin) for the driver to keep, so jobs on
cluster nodes that share no disk take part too. Files: `<store>/torch-<version>/<key
hash>.bin`, and `.json` beside it (the key, the GPU, what it holds, the cold compile's
seconds, the kernels' tuned configs). Nothing is reused across torch versions; Inductor's
own keys inside the blob check the rest (GPU, Triton, CUDA, the graph), so a blob that does not fit only misses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

from sweeper.identity import compile_identity
from sweeper.job_spec import JobSpec, StoredCompile
from sweeper.record import atomic_write_text
from sweeper.stores.autotune_store import enabled, torch_folder
from sweeper.stores.storage import COMPILE_STORE, Storage, StorageError

BLOB = "compile_artifacts.bin"  # in the job folder: the job's blob, back to the driver
LIBS = "compile_libraries.tar.gz"  # beside it, a CPU job's C++ kernel libraries (tasks/cpu_libraries.py)
META = "compile_artifacts.json"
SEED = "compile_seed.bin"  # in the job folder: the earlier run's blob, from the driver
SEED_LIBS = "compile_seed_libraries.tar.gz"  # and its libraries
LIBS_SUFFIX = ".libs.tar.gz"  # in the store, beside <key hash>.bin



class StoreError(Exception):
    pass


def key(config: dict) -> str:
    """The job's compile identity (sweeper/identity.py) as one string: a job that differs from
    an earlier one only in how it is measured or run loads that one's blob."""
    return json.dumps(compile_identity(config), sort_keys=True, default=str)


def _stem(config: dict) -> str:
    return hashlib.sha1(key(config).encode()).hexdigest()[:16]


def shared_by(config: dict) -> bool:
    return enabled(config.get("compile_store"))


def load(store: Path, torch_version: str, config: dict) -> StoredCompile:
    """Driver: the blob an earlier run of this job left, as the job's `compile_seed` (no
    `data` when there is none). An unreadable meta file is a note, never a failure."""
    folder = torch_folder(store, torch_version)
    blob, meta, libs = (folder / f"{_stem(config)}{suffix}" for suffix in (".bin", ".json", LIBS_SUFFIX))
    seed = StoredCompile(store=str(folder), torch=torch_version)
    if not blob.is_file():
        return seed
    try:
        return dataclasses.replace(seed, meta=json.loads(meta.read_text()), data=blob.read_bytes(),
                                   libs=libs.read_bytes() if libs.is_file() else None)
    except (OSError, ValueError) as e:
        return seed.noted(f"{blob}: not used ({e})")


def place_seed(spec: JobSpec, job_dir: Path) -> JobSpec:
    """Launcher, on the job's node: the seed's bytes (or, from storage, the node's copy of
    them: fetch) into the job folder (SEED), the spec without them (job.json stays small
    and JSON)."""
    seed = spec.compile_seed
    if not seed:
        return spec
    (job_dir / SEED).unlink(missing_ok=True)
    (job_dir / SEED_LIBS).unlink(missing_ok=True)
    data, libs = seed.data or seed.path, seed.libs or seed.libs_path
    for src, dest in ((data, job_dir / SEED), (libs if data else None, job_dir / SEED_LIBS)):
        if isinstance(src, bytes):
            dest.write_bytes(src)
        elif src:
            shutil.copyfile(src, dest)
    placed = dataclasses.replace(seed, data=None, libs=None, path=None, libs_path=None, file=SEED if data else None,
                                 libs_file=SEED_LIBS if data and libs else None)
    return dataclasses.replace(spec, compile_seed=placed)


def reference(storage: Storage, torch_version: str, config: dict) -> StoredCompile:
    """Driver, with shared storage: the job's `compile_seed` as a reference to its entry in
    the storage's compile store, no bytes: the job's node reads them (fetch)."""
    folder = f"{COMPILE_STORE}/torch-{torch_version}"
    return StoredCompile(store=storage.location(folder), torch=torch_version, storage=storage.uri,
                         entry=f"{folder}/{_stem(config)}")


def promote(store: Path, storage: Storage, torch_version: str, config: dict) -> str | None:
    """Driver, with shared storage, before a job starts: a compile of this job that is in
    the driver's compile store but not in the storage (it came back through Ray while the
    storage could not be reached) put into the storage, so that the job loads it instead
    of compiling cold; the driver's copy then goes. Returns what was done, for the job's
    seed, or None where there was nothing to do; a storage still unreachable leaves the
    driver's copy for the next run."""
    folder = torch_folder(store, torch_version)
    stem = _stem(config)
    blob, meta, libs = (folder / f"{stem}{suffix}" for suffix in (".bin", ".json", LIBS_SUFFIX))
    if not (blob.is_file() and meta.is_file()):
        return None
    entry = f"{COMPILE_STORE}/torch-{torch_version}/{stem}"
    try:
        if storage.stat(f"{entry}.json") is not None:
            return None  # the storage has this job's compile: it is the later one
        kept = json.loads(meta.read_text())
        kept["copy_id"] = uuid.uuid4().hex
        if libs.is_file():
            storage.put_file(libs, f"{entry}{LIBS_SUFFIX}")
        storage.put_file(blob, f"{entry}.bin")
        storage.put_bytes(json.dumps(kept, indent=1).encode(), f"{entry}.json")  # last: it names the copy
    except (OSError, ValueError, StorageError) as e:
        return f"its compile in the driver's compile store ({blob}) could not be put in storage: {e}"
    for f in (blob, meta, libs):
        f.unlink(missing_ok=True)
    # where it came from is not recorded: a run without storage, or one while storage was unreachable
    return (f"its compile, in the driver's compile store and not in storage (from a run without storage, or one "
            f"while storage was unreachable), moved to {storage.location(entry)}; the driver's copy ({blob}) removed")


def _node_copy(cache_dir: Path, entry: str) -> Path:
    return Path(cache_dir) / entry


def fetch(seed: StoredCompile | None, cache_dir: Path) -> StoredCompile | None:
    """Worker, with shared storage: the seed's entry read from the storage into this node's
    copy of the store (`cache_dir`) unless the node has it already (the entry's small .json,
    read each time, names the copy: `copy_id`); the seed then names the node's files
    (`path`, `libs_path`) and says where they came from (`source`: "node" or "storage",
    `fetched_bytes`). A seed without an entry is returned as it is."""
    if not seed or not seed.entry or not seed.storage:
        return seed
    storage, entry = Storage(seed.storage), seed.entry
    local = _node_copy(cache_dir, entry)
    libs_file = local.parent / f"{local.name}{LIBS_SUFFIX}"
    try:
        if storage.stat(f"{entry}.json") is None:
            return seed  # nothing kept for this job: a cold compile
        meta = json.loads(storage.read_bytes(f"{entry}.json"))
        fetched = 0
        if not (local.with_suffix(".bin").is_file() and _copy_id(local.with_suffix(".json")) == meta.get("copy_id")):
            fetched += storage.get_file(f"{entry}.bin", local.with_suffix(".bin"))
            if storage.stat(f"{entry}{LIBS_SUFFIX}") is not None:
                fetched += storage.get_file(f"{entry}{LIBS_SUFFIX}", libs_file)
            else:
                libs_file.unlink(missing_ok=True)
            atomic_write_text(local.with_suffix(".json"), json.dumps(meta, indent=1))  # last: the copy is whole
        return dataclasses.replace(seed, meta=meta, path=str(local.with_suffix(".bin")),
                                   libs_path=str(libs_file) if libs_file.is_file() else None,
                                   source="storage" if fetched else "node", fetched_bytes=fetched)
    except (OSError, ValueError, StorageError) as e:  # a seed not read costs a cold compile, never the job
        return seed.noted(f"{storage.location(entry)}.bin: not used ({type(e).__name__}: {e})")


def _copy_id(meta_file: Path) -> str | None:
    try:
        return json.loads(meta_file.read_text()).get("copy_id")
    except (OSError, ValueError, AttributeError):
        return None


def _left_compile(job_dir: Path, config: dict) -> tuple[Path, Path, dict] | None:
    """(blob, its meta file, the meta with the job's key) the job left, None when it left
    no blob; StoreError when its meta cannot be read."""
    blob, meta_file = Path(job_dir) / BLOB, Path(job_dir) / META
    if not blob.is_file():
        return None
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as e:
        raise StoreError(f"{meta_file}: not readable ({e})") from e
    meta["key"] = key(config)
    return blob, meta_file, meta


def _kept_bytes(meta: dict) -> int:
    """What a kept compile weighs: the blob and a CPU job's libraries."""
    return int(meta.get("bytes") or 0) + int((meta.get("cpu_libs") or {}).get("bytes") or 0)


def keep_in_storage(storage: Storage, job_dir: Path, config: dict, cache_dir: Path | None = None) -> int | None:
    """Worker, with shared storage, once the job has ended: its blob (and a CPU job's
    libraries) into the storage's compile store, replacing the one before, as absorb does
    on the driver without storage; the job folder keeps none. The node keeps its copy
    (`cache_dir`), so that its next job of this key reads nothing. Returns the bytes kept,
    None when the job left none."""
    left = _left_compile(job_dir, config)
    if left is None:
        return None
    blob, meta_file, meta = left
    meta["copy_id"] = uuid.uuid4().hex  # which compile this is: a node's copy of another is read again
    entry = f"{COMPILE_STORE}/torch-{meta.get('torch')}/{_stem(config)}"
    libs = Path(job_dir) / LIBS
    if libs.is_file():
        storage.put_file(libs, f"{entry}{LIBS_SUFFIX}")
    else:  # none this time: the earlier run's would go with a blob not theirs
        storage.delete(f"{entry}{LIBS_SUFFIX}")
    storage.put_file(blob, f"{entry}.bin")
    storage.put_bytes(json.dumps(meta, indent=1).encode(), f"{entry}.json")  # last: it names the copy
    if cache_dir is not None:
        _keep_node_copy(blob, libs, meta, _node_copy(Path(cache_dir), entry))
    blob.unlink(missing_ok=True)
    libs.unlink(missing_ok=True)
    meta_file.unlink()
    return _kept_bytes(meta)


def _keep_node_copy(blob: Path, libs: Path, meta: dict, local: Path) -> None:
    local.parent.mkdir(parents=True, exist_ok=True)
    libs_file = local.parent / f"{local.name}{LIBS_SUFFIX}"
    if libs.is_file():
        shutil.copyfile(libs, libs_file)
    else:
        libs_file.unlink(missing_ok=True)
    shutil.move(str(blob), local.with_suffix(".bin"))  # a rename where the scratch folder is on one disk
    atomic_write_text(local.with_suffix(".json"), json.dumps(meta, indent=1))  # last: the copy is whole


def absorb(store: Path, job_dir: Path, config: dict) -> int | None:
    """Driver, when the job's folder is back: its blob into the store, replacing the one
    before (the later compile is the one that fits this build); the job folder keeps none.
    Returns the bytes kept, None when the job left none."""
    left = _left_compile(job_dir, config)
    if left is None:
        return None
    blob, meta_file, meta = left
    folder = torch_folder(store, str(meta.get("torch")))
    folder.mkdir(parents=True, exist_ok=True)
    libs, kept_libs = Path(job_dir) / LIBS, folder / f"{_stem(config)}{LIBS_SUFFIX}"
    for src, dest in ((libs, kept_libs), (blob, folder / f"{_stem(config)}.bin")):
        if src.is_file():
            tmp = folder / f".{dest.name}.{os.getpid()}"
            shutil.move(str(src), tmp)  # a rename where both are on one disk
            os.replace(tmp, dest)
        elif src == libs:  # none this time: the earlier run's would go with a blob not theirs
            kept_libs.unlink(missing_ok=True)
    atomic_write_text(folder / f"{_stem(config)}.json", json.dumps(meta, indent=1))
    meta_file.unlink()
    return _kept_bytes(meta)
