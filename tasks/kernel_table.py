"""The job's kernel table (which kernels matter, from the profiled step) and where each kernel
lives here: its file, written again where a loaded compile's is gone, and the kernel object
the compiled modules run; tasks/kernel_bench.py times them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Mapping

from sweeper.analysis import kernels as mb


def _module_kernels(modules) -> list[tuple[str, dict[str, str | None]]]:
    """(module path, kernel name -> kernel file) for each compiled module."""
    return [(m.path, kernels) for m in modules if (kernels := _kernels_of(m.path)) is not None]


@functools.lru_cache(maxsize=None)
def _kernels_of(path: str) -> dict[str, str | None] | None:
    """A module's kernel list, read once: kernel_table() and kernel_objects() both need it."""
    from sweeper.analysis.module_source import kernel_definitions

    try:
        return kernel_definitions(Path(path).read_text())
    except OSError:
        return None


def kernel_files(modules) -> dict[str, str]:
    """Kernel name -> its kernel file here. A `# kernel path:` that is not here is written
    again, where Inductor would write it in this process's cache, from the source the
    wrapper module carries inline: a compile loaded from the compile store names the cache
    of the run that compiled it, gone with that run's scratch folder (on an H200 every
    microbenchmark of such a warm job failed so, bench/results/headline/README.md). Where
    that fails the path stays as named, and the kernel's row says why it was not timed."""
    from sweeper.analysis.module_source import kernel_sources
    from sweeper.torch_internals.compile_cache import write_kernel_file

    out = {}
    for path, kernels in _module_kernels(modules):
        inline = None  # parsed only for a module with a kernel file missing
        for name, file in kernels.items():
            if file and not Path(file).is_file():
                try:
                    inline = kernel_sources(Path(path).read_text()) if inline is None else inline
                    file = write_kernel_file(inline[name]) if name in inline else file
                except (OSError, SyntaxError, ValueError):  # the breakdown never fails for a benchmark's file
                    inline = inline or {}
            if file:
                out[name] = file
    return out


def kernel_objects(modules) -> dict:
    """kernel name -> the kernel object (CachingAutotuner) the job's compiled modules run."""
    from tasks.capture import loaded_module

    out = {}
    for path, kernels in _module_kernels(modules):
        mod = loaded_module(path)
        for name in kernels:
            obj = getattr(mod, name, None)
            if obj is not None and hasattr(obj, "launchers"):
                out[name] = obj
    return out


def kernel_table(record: Mapping[str, Any], device: str, modules) -> dict:
    """The kernels that matter, from the profiles. On a GPU: the Triton kernels holding
    80% of the step's Triton time, with the bytes each moves (from its kernel file); the
    standalone figures stay None until run() fills them.
    On a CPU: the C++ kernels' profiled times; standalone kernel files are a GPU feature."""
    if device != "cuda":
        return {"method": "profiled step (CPU)", "rows": mb.cpu_kernel_rows(record)}
    paths = kernel_files(modules)
    rows = mb.select_kernels(record)
    for row in rows:
        row["kernel_path"] = paths.get(row["name"])
        try:
            row["num_gb"] = mb.kernel_num_gb(Path(row["kernel_path"]).read_text()) if row["kernel_path"] else None
        except OSError:
            row["num_gb"] = None
        row.update(standalone_ms=None, gb_per_s=None, pct_of_peak_bandwidth=None, headroom_pct=None)
    return {"method": "selection from the profiled step (standalone figures: tasks/kernel_bench.py, when run)",
            "cover_pct": mb.DEFAULT_COVER_PCT, "rows": rows}
