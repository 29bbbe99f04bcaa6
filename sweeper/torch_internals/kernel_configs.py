"""sweeper's own use of Inductor's kernel-config cache files: a Triton kernel's tuned config
(`<cache>/<xx>/<key>.best_config`) read and written back, and an index by the kernel's code
(its source without its name) for a kernel that comes back under another name. The files'
format and the code key are pure; where a kernel's file keeps its config is Inductor's
(_local_cache_path)."""

from __future__ import annotations

import functools
from pathlib import Path


def tuned_configs(cache_dir: Path) -> dict[str, str]:
    """The Triton kernels' tuned configs in an Inductor cache folder, relative path -> file
    text: `<cache>/<xx>/<key>.best_config`, written when a kernel's runtime autotuning or
    coordinate-descent tuning chose (runtime/autotune_cache.py: LocalAutotuneCache).

    Why apart from save_cache_artifacts: its blob records a kernel's config once per save,
    the configs-benchmark's choice and then coordinate descent's, and on torch 2.11 a warm
    load left some kernels with the first, so coordinate descent ran again on them (6 and 10
    of 27 kernels of resnet18 with max-autotune on an H200). The files on disk hold the last."""
    return {str(p.relative_to(cache_dir)): p.read_text() for p in sorted(Path(cache_dir).glob("*/*.best_config"))}


# A file at the Inductor cache's root: a kernel's code key (kernel_code_key) -> its tuned
# config (`.best_config` text), for kernels that come back under another name.
CODE_INDEX = "sweeper_kernel_code.json"


def kernel_code_key(source: str) -> str | None:
    """A Triton kernel file's source without the kernel's name, hashed. Inductor names a
    kernel's file by its whole source, and a kernel's name ends in its number in the graph
    (the order Inductor generates kernels in), so one kernel more or fewer early in a graph
    renames every later one, and each gets another file: an H200 mixnet_l max-autotune job
    had 37 of its 67 selected forward kernels renamed against the run before
    (bench/results/headline/run2_kernel_renames.md). The code is the same, so what its
    tuning chose holds. None for a file that defines no Triton kernel."""
    import hashlib
    import re

    m = re.search(r"^def (triton_\w+)\(", source, re.M)
    if m is None:
        return None
    return hashlib.sha256(source.replace(m.group(1), "KERNEL").encode()).hexdigest()


def kernel_code_keys(cache_dir: Path) -> dict[str, str]:
    """For each tuned config of tuned_configs(): its relative path -> the code key of its
    kernel's file, a `.py` in the same folder whose local autotune cache path Inductor
    derives (runtime/autotune_cache.py: AutotuneCache.create, asked here as a kernel asks
    it); a config whose kernel file is gone is left out."""
    root = Path(cache_dir).resolve()
    configs, out = set(tuned_configs(root)), {}
    for kernel in sorted(root.glob("*/*.py")):
        local = _local_cache_path(str(kernel))
        rel = str(Path(local).relative_to(root)) if local and Path(local).is_relative_to(root) else None
        key = _code_key_of(str(kernel)) if rel in configs else None
        if key and rel:
            out[rel] = key
    return out


# Both asked for every kernel file at each checkpoint of a compile (every 30 s): a kernel
# file never changes once written (its name is its source's hash).
@functools.lru_cache(maxsize=None)
def _local_cache_path(kernel: str) -> str | None:
    from torch._inductor.runtime.autotune_cache import AutotuneCache

    try:
        local = getattr(AutotuneCache.create({"autotune_local_cache": True, "autotune_remote_cache": False},
                                             kernel, ""), "local_cache", None)
    except Exception:  # noqa: BLE001 - not a kernel's file Inductor would cache for: no key
        return None
    return local[1] if local else None


@functools.lru_cache(maxsize=None)
def _code_key_of(kernel: str) -> str | None:
    try:
        return kernel_code_key(Path(kernel).read_text())
    except OSError:
        return None


def put_code_index(cache_dir: Path, files: dict[str, str], codes: dict[str, str]) -> int:
    """Write CODE_INDEX for the seeded configs `files` whose code key `codes` knows, so that
    a renamed kernel finds its config (cached_coordesc_config); returns how many."""
    import json

    index = {codes[rel]: text for rel, text in files.items() if codes.get(rel)}
    if index:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        (Path(cache_dir) / CODE_INDEX).write_text(json.dumps(index))
    return len(index)


def renamed_config(kernel_file: Path) -> str | None:
    """The seeded config of a kernel of the same code under another name: CODE_INDEX in the
    kernel file's cache, looked up by the file's code key; None when there is none."""
    import json

    try:
        index = json.loads((kernel_file.parent.parent / CODE_INDEX).read_text())
        key = kernel_code_key(kernel_file.read_text())
    except (OSError, ValueError):
        return None
    return index.get(key) if isinstance(index, dict) and key else None


def put_tuned_configs(cache_dir: Path, files: dict[str, str]) -> int:
    """Write tuned_configs() of an earlier run back, over what a loaded blob put there;
    returns how many were written (only `<xx>/<key>.best_config` inside the cache)."""
    root, written = Path(cache_dir).resolve(), 0
    for rel, text in files.items():
        path = (root / rel).resolve()
        if path.parent.parent != root or path.suffix != ".best_config":
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written += 1
    return written


def config_key(config) -> tuple:
    """What makes two Triton configs the same launch: block sizes, warps, stages
    (tasks/kernel_bench.py matches the chosen one among the candidates by it too)."""
    return (tuple(sorted(getattr(config, "kwargs", {}).items())), getattr(config, "num_warps", None),
            getattr(config, "num_stages", None))
