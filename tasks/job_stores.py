"""The job's side of the two stores (sweeper/stores/: what they keep and how the driver
sends and takes back their entries): before it compiles, the job puts what the driver sent
into its own Inductor cache; after (and, for autotuning, while) it compiles, it leaves its
own entries in its folder for the driver.

- autotune store: seed_autotune() merges the store's template timings into the job's cache
  and writes the kernel configs of its GPU where its kernels look for them;
  write_autotune_entries() leaves the job's timings and configs in its folder
  (autotune_store.ENTRIES_FILE), marked partial while the compile goes on
  (tasks/autotune_checkpoint.py);
- compile store: seed_compile() loads an earlier run's blob of this very job into the
  process's caches (and, on a CPU, the C++ kernel libraries it built: tasks/cpu_libraries.py);
  write_compile_blob() leaves the job's own (compile_store.BLOB, LIBS, META).
"""

from __future__ import annotations

import json
import tarfile
import time
from pathlib import Path
from typing import Any, Sequence

from sweeper.autotune_info import AutotuneStoreInfo
from sweeper.job_spec import AutotuneSeed, StoredCompile
from sweeper.record import atomic_write_bytes, atomic_write_text
from sweeper.stores import autotune_store as at
from sweeper.stores import compile_store as cs
from sweeper.stores.autotune_merge import merge_entries
from sweeper.torch_internals import compile_cache, kernel_configs
from tasks import cpu_libraries


def _job_files(inductor_cache: Path) -> Path:
    return inductor_cache / "cache"


def _by_coordinate_descent(text: str) -> bool:
    try:
        return bool(json.loads(text).get("found_by_coordesc"))
    except (ValueError, AttributeError):
        return False


def seed_autotune(seed: AutotuneSeed, inductor_cache: Path, torch_version: str, system: str | None = None,
                  coordinate_descent: bool = True) -> AutotuneStoreInfo:
    """Job: merge the driver's timings into this job's own Inductor cache, and write the
    kernel configs of this job's system (`system`: Inductor's system hash here) where its
    kernels will look for them, before torch compiles anything. Entries of another torch
    version are not used; nor, in a job without coordinate descent, configs that coordinate
    descent found (a cold job of its settings could not pick them)."""
    out: AutotuneStoreInfo = {"store": seed.store, "seeded_entries": 0, "seeded_ops": 0,
                              "seeded_kernel_configs": 0, "notes": list(seed.notes)}
    if seed.torch != torch_version:
        out["notes"].append(f"store entries are for torch {seed.torch}, this job runs {torch_version}: not used")
        return out
    files = _job_files(inductor_cache)
    for name, doc in seed.systems.items():
        if doc.get("cache"):
            files.mkdir(parents=True, exist_ok=True)
            target = files / name
            mine = at.read_doc(target) if target.exists() else {"system": doc.get("system"), "cache": {}}
            merge_entries(mine["cache"], doc["cache"])
            at.write_doc(target, mine)
            if system is None or name == system:  # Inductor reads only its own GPU's file: count only that
                out["seeded_entries"] += at.count_entries(doc["cache"])
                out["seeded_ops"] += at.count_ops(doc["cache"])
        if name == system and doc.get("kernel_configs"):  # a kernel's config fits only the GPU it was tuned on
            configs = {k: v for k, v in doc["kernel_configs"].items()
                       if coordinate_descent or not _by_coordinate_descent(v)}
            out["seeded_kernel_configs"] = kernel_configs.put_tuned_configs(inductor_cache, configs)
            out["seeded_kernel_codes"] = kernel_configs.put_code_index(inductor_cache, configs, doc.get("kernel_code") or {})
    return out


def autotune_documents(inductor_cache: Path, system: str | None) -> dict[str, dict]:
    """Job: its cache's timings by system (seeded ones included), and its kernel configs
    under its own system."""
    src, systems = _job_files(inductor_cache), {}
    for f in sorted(p for p in src.iterdir() if p.is_file() and not p.name.startswith(".")) if src.is_dir() else []:
        try:
            doc = at.read_doc(f)
        except at.StoreError:  # Inductor writes it atomically; an odd file is not the job's failure
            continue
        if doc.get("cache"):
            systems[f.name] = {"system": doc.get("system"), "cache": doc["cache"]}
    configs = kernel_configs.tuned_configs(inductor_cache) if Path(inductor_cache).is_dir() else {}
    if configs and system:
        mine = systems.setdefault(system, {"system": None, "cache": {}})
        mine["kernel_configs"] = configs
        mine["kernel_code"] = kernel_configs.kernel_code_keys(inductor_cache)
    return systems


def autotune_decisions(inductor_cache: Path, system: str | None, seed: AutotuneSeed | None,
                       used: Sequence[tuple[str, str, str]] | None = None) -> dict:
    """Job, once it compiled: max-autotune's decisions behind the choices its compile used,
    each against the noise the store knows (its seed's repeats, and the ops this job timed
    again) (sweeper/analysis/autotune_decisions.py). `used`: the ops its compile selected
    for (benchmark_lease.record_tuned_ops), timed here or found in the seeded cache: a
    store-seeded job's decisions are the store's timings it chose by. Without `used` (its
    compile was loaded whole: no op was selected in this run), the ops it timed itself.
    Each row says where its timings came from (`timed`: "here" or "store"). The record's
    `autotune_decisions`."""
    from sweeper.analysis import autotune_decisions as ad

    docs = autotune_documents(inductor_cache, system)
    mine = docs.get(system or "") or next(iter(docs.values()), {})
    seed_doc = (seed.systems if seed is not None else {}).get(system or "") or {}
    seeded = ad.timings(seed_doc)
    times = ad.timings(mine)
    own = ad.timed_again(times, seeded)
    chosen = {ad.Key(*k): times[ad.Key(*k)] for k in used or () if ad.Key(*k) in times}
    judged = chosen if used else own
    runs = [own, seeded, *ad.repeat_runs(seed_doc)]
    gaps = ad.relative_gaps(runs)
    sites = getattr(used, "sites", None) or {}  # benchmark_lease.TunedOps: the modules each op was lowered for
    rows = [{**r, "timed": "here" if ad.Key(r["op"], r["inputs"], r["precision"]) in own else "store",
             "sites": list(sites.get((r["op"], r["inputs"], r["precision"]), []))}
            for r in ad.decisions(judged, runs)]
    return {"rows": rows, "summary": ad.summary(rows), "noise_pct": ad.noise_pct(gaps), "noise_gaps": len(gaps),
            "noise_quantile": ad.NOISE_QUANTILE, "seeded_ops": len(seeded),
            "used_ops": len(used) if used is not None else None,
            "from_store": sum(r["timed"] == "store" for r in rows)}


def write_autotune_entries(job_dir: Path, inductor_cache: Path, torch_version: str, system: str | None = None,
                           partial: bool = False, progress: dict | None = None) -> AutotuneStoreInfo:
    """Job: its timings and kernel configs into job_dir/ENTRIES_FILE, for the driver;
    `partial` while the compile goes on, with `progress` (the phase and when it started,
    so that a killed job's record can say how far it got). Returns the counts."""
    systems = autotune_documents(inductor_cache, system)
    counts = at.store_info(systems)
    if systems:
        doc = {"torch": torch_version, "systems": systems, "partial": partial, "written_at": time.time(),
               **({"progress": progress} if progress else {})}
        at.write_doc(Path(job_dir) / at.ENTRIES_FILE, doc)
    return counts


def seed_compile(seed: StoredCompile | None, job_dir: Path, inductor_cache: Path, torch_version: str) -> dict:
    """Job, before it compiles: load the earlier run's blob into this process's caches, and
    its kernels' tuned configs over what the blob put there (kernel_configs.tuned_configs says
    why). Returns what the record keeps (timings.compile_store). The seed's files are the
    job's input only: removed however it ends, so that they do not come back with the job's folder."""
    try:
        return _seed_compile(seed, job_dir, inductor_cache, torch_version)
    finally:
        for used in (job_dir / cs.SEED, job_dir / cs.SEED_LIBS):
            used.unlink(missing_ok=True)


def _seed_compile(seed: StoredCompile | None, job_dir: Path, inductor_cache: Path, torch_version: str) -> dict:
    out: dict[str, Any] = {"store": seed.store if seed else None, "loaded": None, "bytes": 0,
                           "notes": list(seed.notes) if seed else []}
    if seed and seed.source:  # shared storage: read from there, or this node's copy (compile_store.fetch)
        out["from"], out["fetched_bytes"] = seed.source, seed.fetched_bytes
    path = job_dir / cs.SEED
    if not seed or not seed.file or not path.is_file():
        return out
    meta = seed.meta or {}
    if meta.get("torch") != torch_version:
        out["notes"].append(f"the stored compile is of torch {meta.get('torch')}, this job runs {torch_version}: not used")
        return out
    data = path.read_bytes()
    try:
        out["loaded"] = compile_cache.load_cache_artifacts(data) or None
    except Exception as e:  # noqa: BLE001 - a blob that does not load costs a cold compile, never the job
        out["notes"].append(f"the stored compile did not load ({type(e).__name__}: {e}): compiling cold")
    else:
        if out["loaded"]:
            out["tuned_configs"] = kernel_configs.put_tuned_configs(inductor_cache, meta.get("tuned_configs") or {})
        else:  # torch warns in the job's log (a corrupt or foreign blob) and loads nothing
            out["notes"].append(f"the stored compile {seed.store} held nothing this torch could load "
                                "(the job's log says why): compiling cold")
    out["bytes"] = len(data)
    out["cold_compile_s"] = meta.get("cold_compile_s")
    _seed_cpu_libraries(seed, meta, job_dir, inductor_cache, out)
    return out


def _seed_cpu_libraries(seed: StoredCompile, meta: dict, job_dir: Path, inductor_cache: Path, out: dict) -> None:
    """The earlier run's C++ kernel libraries into this job's cache, where it runs on the
    host they were built for (tasks/cpu_libraries.py); out["cpu_libraries"] says how many."""
    path = job_dir / cs.SEED_LIBS
    if not seed.libs_file or not path.is_file():
        return
    out["bytes"] += path.stat().st_size  # what the store sent: the blob and the libraries
    built = meta.get("cpu_libs") or {}
    here = cpu_libraries.host_id()
    if built.get("id") != here["id"]:
        out["notes"].append(f"its C++ kernel libraries were built on another host ({built.get('cpu')}; "
                            f"{built.get('compiler')}), this one is {here['cpu']}; {here['compiler']}: "
                            "they build again")
        return
    try:
        out["cpu_libraries"] = cpu_libraries.unpack(path.read_bytes(), inductor_cache)
    except (OSError, EOFError, tarfile.TarError) as e:  # they only build again
        out["notes"].append(f"its C++ kernel libraries did not unpack ({type(e).__name__}: {e}): they build again")


def write_compile_blob(job_dir: Path, inductor_cache: Path, torch_version: str, gpu: str | None,
                       cold_compile_s: float | None) -> int:
    """Job, once every compile is done: its blob (BLOB) and what it holds (META, with its
    kernels' tuned configs) into its folder, for the driver; returns its size in bytes (0:
    nothing was compiled)."""
    got = compile_cache.save_cache_artifacts()
    if not got or not got[0]:
        return 0
    data, kinds = got
    meta: dict[str, Any] = {"torch": torch_version, "gpu": gpu, "kinds": kinds, "bytes": len(data),
                            "cold_compile_s": cold_compile_s, "tuned_configs": kernel_configs.tuned_configs(inductor_cache)}
    if gpu is None:  # a CPU job: its C++ kernels' libraries, which the blob does not carry
        libs, files = cpu_libraries.pack(inductor_cache)
        if files:
            atomic_write_bytes(job_dir / cs.LIBS, libs)
            meta["cpu_libs"] = {**cpu_libraries.host_id(), "files": files, "bytes": len(libs)}
    atomic_write_bytes(job_dir / cs.BLOB, data)
    atomic_write_text(job_dir / cs.META, json.dumps(meta))
    return len(data) + (meta.get("cpu_libs") or {}).get("bytes", 0)
