"""Inductor's compile caches as the job uses them: the portable blob of everything compiled
(PyTorch's "mega-cache", the compile store's content), kernel and wrapper files written and
loaded through PyCodeCache, Dynamo reset, the compile worker pool started, and where an
earlier run's cache file lies in this process's cache."""

from __future__ import annotations

from pathlib import Path


def reset_dynamo() -> None:
    """Forget every compiled frame, so that the job's compile starts cold in-process."""
    import torch

    torch._dynamo.reset()


def save_cache_artifacts() -> tuple[bytes, dict[str, int]] | None:
    """Everything this process compiled (or loaded from cache) as one portable blob, with a
    count by kind (inductor, aot_autograd, autotune, ...): PyTorch's "mega-cache"
    (torch.compiler.save_cache_artifacts). None when there is nothing."""
    import torch

    got = torch.compiler.save_cache_artifacts()
    if not got:
        return None
    data, info = got
    return data, {kind: len(keys) for kind, keys in info.artifacts.items()}


def load_cache_artifacts(data: bytes) -> dict[str, int]:
    """Put a blob from save_cache_artifacts into this process's caches before it compiles;
    a count by kind of what it held."""
    import torch

    info = torch.compiler.load_cache_artifacts(data)
    return {kind: len(keys) for kind, keys in (info.artifacts.items() if info else [])}


def write_kernel_file(source: str) -> str:
    """A Triton kernel's source written where Inductor keeps it in this process's cache
    (PyCodeCache.write: the file is named by the source's hash and written only if
    missing); returns its path (tasks/kernel_bench.py: kernel_files)."""
    from torch._inductor.codecache import PyCodeCache

    return PyCodeCache.write(source)[1]


def load_code_module(path: str):
    """Load a compiled wrapper module from its file through PyCodeCache, as Inductor does."""
    from pathlib import Path

    from torch._inductor.codecache import PyCodeCache

    return PyCodeCache.load_by_key_path(Path(path).stem, path)


def start_compile_workers(timeout_s: float = 300) -> bool:
    """Start Inductor's pool of compile workers and wait until it takes work; False when
    Inductor compiles in this process (compile_threads 1). Until the pool is ready, Inductor
    compiles kernels in the calling process (async_compile.py: use_process_pool), so a
    small graph compiled at once never meets the workers that a model's compile meets
    (bench/coordesc_reuse.py)."""
    from torch._inductor.async_compile import AsyncCompile

    ready = AsyncCompile._ready_future
    if ready is None:  # no pool started: Inductor compiles in this process, or the pool is up already
        return AsyncCompile.use_process_pool()
    ready.result(timeout=timeout_s)
    return AsyncCompile.use_process_pool()


def in_this_cache(path: Path) -> Path:
    """A file of an earlier run's Inductor cache at the same place in this process's cache
    (<cache>/<two characters>/<file>): where the compile store puts a loaded compile's files."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir()) / path.parent.name / path.name
