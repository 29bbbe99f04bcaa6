"""The private torch and Inductor APIs this project leans on, in one place.

None of these is a public API; each can change between torch releases. They were run on
torch 2.11.0 (CUDA 13.0, the GPU machine) and 2.14.1 (CPU, the Makefile's), which is why
pyproject.toml asks for torch>=2.11. When a torch upgrade breaks one, this module is
where to look first; the tests that exercise each are named beside it.
"""

from __future__ import annotations

from typing import Callable

TESTED_ON = ("2.11.0", "2.14.1")


def inductor_config():
    """torch._inductor.config, the module whose attributes are Inductor's options
    (sweeper/sweep/inductor_options.py; tests/test_config.py)."""
    import torch._inductor.config as config

    return config


def mode_options(mode: str) -> dict:
    """The Inductor options a torch.compile mode name stands for (the record's
    config.inductor_options; tests/test_job_cpu.py)."""
    import torch

    return torch._inductor.list_mode_options(mode) if mode != "default" else {}


def reset_dynamo() -> None:
    """Forget every compiled frame, so that the job's compile starts cold in-process."""
    import torch

    torch._dynamo.reset()


def compile_metrics() -> dict[str, list[float]]:
    """Inductor's own timers (dynamo_timed): name -> seconds of each call
    (tests/test_job_cpu.py reads the split made from it)."""
    from torch._dynamo.utils import compilation_time_metrics

    return dict(compilation_time_metrics)


def autotuned_choices() -> int:
    """How many mm/conv template autotunings max-autotune has run in this process so far."""
    return sum(len(v) for k, v in compile_metrics().items() if k.endswith("_template_autotuning"))


def compile_split(compile_s: float) -> dict:
    """The first step's seconds by kind, from Inductor's own timers: template autotuning
    (max-autotune's benchmarking of mm/conv choices), compiling those choices, Triton
    kernels' runtime autotuning, and the rest. Parts may overlap where Inductor runs them
    in threads, so `rest_s` is floored at 0."""
    metrics = compile_metrics()

    def total(match: Callable[[str], bool]) -> float:
        return round(sum(sum(v) for k, v in metrics.items() if match(k)), 3)

    split = {
        "template_autotuning_s": total(lambda k: k.endswith("_template_autotuning")),
        "template_precompiling_s": total(lambda k: k.endswith("_template_precompiling")),
        "kernel_autotuning_s": total(lambda k: k == "CachingAutotuner.benchmark_all_configs"),
    }
    split["rest_s"] = round(max(0.0, compile_s - sum(split.values())), 3)
    return split


def loaded_code_modules():
    """(modules, modules by path) that Inductor's PyCodeCache loaded in this process: the
    compiled wrapper modules, kernels and all (tasks/capture.py; tests/test_job_cpu.py)."""
    from torch._inductor.codecache import PyCodeCache

    return PyCodeCache.modules, PyCodeCache.modules_no_attr


def load_code_module(path: str):
    """Load a compiled wrapper module from its file through PyCodeCache, as Inductor does."""
    from pathlib import Path

    from torch._inductor.codecache import PyCodeCache

    return PyCodeCache.load_by_key_path(Path(path).stem, path)


def compiled_graph_class():
    """CompiledFxGraph, whose __call__ receives a compiled module's real inputs
    (tasks/capture.InputCapture; tests/test_job_cpu.py)."""
    from torch._inductor.output_code import CompiledFxGraph

    return CompiledFxGraph


def benchmark_gpu(fn: Callable[[], object]) -> float:
    """Inductor's own kernel benchmarker, milliseconds (L2 flushed between runs), the one
    its autotuner uses (tasks/kernel_bench.py; GPU only, checked by bench/microbench_check.py)."""
    from torch._inductor.runtime.benchmarking import benchmarker

    return benchmarker.benchmark_gpu(fn)


def raw_stream(device_index: int):
    """The current CUDA stream as the raw handle Triton launchers take (GPU only)."""
    from torch._C import _cuda_getCurrentRawStream

    return _cuda_getCurrentRawStream(device_index)
