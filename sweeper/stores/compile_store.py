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
from pathlib import Path
from typing import Any

from sweeper.identity import compile_identity
from sweeper.job_spec import JobSpec
from sweeper.record import atomic_write_text
from sweeper.stores.autotune_store import enabled, torch_folder

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


def load(store: Path, torch_version: str, config: dict) -> dict:
    """Driver: the blob an earlier run of this job left, as the job's `compile_seed`
    ({"data": None} when there is none). An unreadable meta file is a note, never a failure."""
    folder = torch_folder(store, torch_version)
    blob, meta, libs = (folder / f"{_stem(config)}{suffix}" for suffix in (".bin", ".json", LIBS_SUFFIX))
    seed: dict[str, Any] = {"store": str(folder), "torch": torch_version, "data": None, "meta": None, "libs": None,
                            "notes": []}
    if not blob.is_file():
        return seed
    try:
        seed["meta"] = json.loads(meta.read_text())
        seed["data"] = blob.read_bytes()
        seed["libs"] = libs.read_bytes() if libs.is_file() else None
    except (OSError, ValueError) as e:
        seed["notes"].append(f"{blob}: not used ({e})")
    return seed


def place_seed(spec: JobSpec, job_dir: Path) -> JobSpec:
    """Launcher, on the job's node: the seed's bytes into the job folder (SEED), the spec
    without them (job.json stays small and JSON)."""
    seed = spec.compile_seed
    if not seed:
        return spec
    (job_dir / SEED).unlink(missing_ok=True)
    (job_dir / SEED_LIBS).unlink(missing_ok=True)
    data, libs = seed.get("data"), seed.get("libs")
    if data:
        (job_dir / SEED).write_bytes(data)
    if data and libs:
        (job_dir / SEED_LIBS).write_bytes(libs)
    described = {k: v for k, v in seed.items() if k not in ("data", "libs")}
    return dataclasses.replace(spec, compile_seed={**described, "file": SEED if data else None,
                                                   "libs_file": SEED_LIBS if data and libs else None})


def absorb(store: Path, job_dir: Path, config: dict) -> int | None:
    """Driver, when the job's folder is back: its blob into the store, replacing the one
    before (the later compile is the one that fits this build); the job folder keeps none.
    Returns the bytes kept, None when the job left none."""
    blob, meta_file = Path(job_dir) / BLOB, Path(job_dir) / META
    if not blob.is_file():
        return None
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as e:
        raise StoreError(f"{meta_file}: not readable ({e})") from e
    folder = torch_folder(store, str(meta.get("torch")))
    folder.mkdir(parents=True, exist_ok=True)
    meta["key"] = key(config)
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
    return int(meta.get("bytes") or 0) + int((meta.get("cpu_libs") or {}).get("bytes") or 0)
