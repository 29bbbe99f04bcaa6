"""Read-only probes of torch's and Inductor's private state: options, timers, counters, the
machine's system hash, the classes and functions other modules wrap or call (tasks/
capture.py, provenance.py, accuracy.py, kernel_bench.py). Nothing here changes torch."""

from __future__ import annotations

from typing import Callable


def inductor_config():
    """torch._inductor.config, the module whose attributes are Inductor's options
    (sweeper/inductor_options.py; tests/test_config.py)."""
    import torch._inductor.config as config

    return config


def custom_graph_pass_class():
    """Inductor's base class of a custom graph pass with a uuid (a pass with one keeps the
    FX graph cache on: tasks/provenance.py)."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    return CustomGraphPass


def runner_same():
    """torch._dynamo.utils.same: how PyTorch's benchmark runner's --accuracy compares a
    compiled result with eager's against a float64 reference (tasks/accuracy.py)."""
    from torch._dynamo.utils import same

    return same


def mode_options(mode: str) -> dict:
    """The Inductor options a torch.compile mode name stands for (the record's
    config.inductor_options; tests/test_job_cpu.py)."""
    import torch

    return torch._inductor.list_mode_options(mode) if mode != "default" else {}


def compile_metrics() -> dict[str, list[float]]:
    """Inductor's own timers (dynamo_timed): name -> seconds of each call
    (tests/test_job_cpu.py reads the split made from it)."""
    from torch._dynamo.utils import compilation_time_metrics

    return dict(compilation_time_metrics)


def autotuned_ops() -> int:
    """How many mm/conv ops max-autotune has autotuned (all their choices timed) in this process so far."""
    return sum(len(v) for k, v in compile_metrics().items() if k.endswith("_template_autotuning"))


# Inductor's timers (dynamo_timed names) for each part of a max-autotune compile. Names
# seen in torch 2.11 and 2.14's source: select_algorithm.py (templates), runtime/
# triton_heuristics.py (a Triton kernel's own configs, timed at its first launch), scheduler.py
# (fusions decided by benchmarking them).
_SPLIT: dict[str, Callable[[str], bool]] = {
    "template_autotuning_s": lambda k: k.endswith("_template_autotuning"),
    "template_precompiling_s": lambda k: k.endswith("_template_precompiling"),
    "kernel_autotuning_s": lambda k: k == "CachingAutotuner.benchmark_all_configs",
    "coordinate_descent_s": lambda k: k == "CachingAutotuner.coordinate_descent_tuning",
    "fusion_benchmarking_s": lambda k: k in ("benchmark_fused_nodes", "benchmark_codegened_module",
                                             "benchmark_combo_kernel", "CachingAutotuner.combo_sequential_autotune"),
}


def compile_split(compile_s: float) -> dict:
    """The first step's seconds by kind, from Inductor's own timers: max-autotune's
    benchmarking of mm/conv template choices and its compiling of them, a Triton kernel's
    runtime choice among its configs, coordinate-descent tuning of a kernel's block sizes
    (max-autotune modes turn it on), fusions decided by benchmarking, and the rest; with
    the number of template autotunings (ops). Parts may overlap where Inductor runs them in
    threads or one inside another, so `rest_s` is floored at 0."""
    metrics = compile_metrics()
    split = {name: round(sum(sum(v) for k, v in metrics.items() if match(k)), 3) for name, match in _SPLIT.items()}
    split["rest_s"] = round(max(0.0, compile_s - sum(split.values())), 3)
    split["template_ops"] = sum(len(v) for k, v in metrics.items() if _SPLIT["template_autotuning_s"](k))
    return split


# Timers kept however little time they took: compile_file counts the C++ files Inductor
# built (sweeper/reporting/compile_state.cpp_builds), and builds that a compiler cache made
# quick fell out of the costliest 15, which then read as none built.
ALWAYS_KEPT = ("compile_file",)


def compile_timers(top: int = 15) -> dict[str, list]:
    """Inductor's costliest timers so far, name -> [calls, seconds], costliest first: where a
    compile went when the split's parts do not say (timers nest, so they overlap)."""
    return top_timers(compile_metrics(), top)


def top_timers(metrics: dict[str, list[float]], top: int, kept: tuple[str, ...] = ALWAYS_KEPT) -> dict[str, list]:
    """The `top` costliest of Inductor's timers (name -> each call's seconds) and those of
    `kept`, as name -> [calls, seconds], costliest first."""
    totals = sorted(((k, len(v), round(sum(v), 3)) for k, v in metrics.items()), key=lambda t: -t[2])
    return {k: [n, s] for i, (k, n, s) in enumerate(totals) if i < top or k in kept}


def dynamo_counters() -> dict[str, int]:
    """Dynamo's own counts of this process: graphs it captured (unique_graphs), frames it
    tried and compiled."""
    from torch._dynamo.utils import counters

    stats, frames = counters["stats"], counters["frames"]
    return {"unique_graphs": stats["unique_graphs"], "frames_total": frames["total"], "frames_ok": frames["ok"]}


def compile_cache_counters() -> dict[str, int]:
    """How many compiled graphs came from Inductor's caches in this process: FX graphs
    (fxgraph_cache_hit/miss) and, for training, AOTAutograd's joint graphs."""
    from torch._dynamo.utils import counters

    inductor, aot = counters["inductor"], counters["aot_autograd"]
    return {"fxgraph_hits": inductor["fxgraph_cache_hit"], "fxgraph_misses": inductor["fxgraph_cache_miss"],
            "autograd_hits": aot["autograd_cache_hit"], "autograd_misses": aot["autograd_cache_miss"]}


def system_hash() -> str | None:
    """Inductor's key for this machine's GPU model and its CUDA and Triton versions (the
    name of its template-timings file, codecache.py: CacheBase.get_system; on a machine
    without a GPU, the hash of nothing). The autotune store keys kernel configs by it."""
    try:
        from torch._inductor.codecache import CacheBase

        return CacheBase.get_system()["hash"]
    except Exception:  # noqa: BLE001 - without it kernel configs are not shared, nothing else changes
        return None


def kernel_config_hits() -> int | None:
    """How many times this process found a kernel's tuned config in its local cache
    (remote_cache.py: cache_stats, under LocalAutotuneCache), None if this torch does not
    count them."""
    try:
        from torch._inductor.remote_cache import cache_stats

        stat = cache_stats._stats.get("LocalAutotuneCache")
    except (ImportError, AttributeError):
        return None
    return int(stat.hit) if stat is not None else 0


def loaded_code_modules():
    """(modules, modules by path) that Inductor's PyCodeCache loaded in this process: the
    compiled wrapper modules, kernels and all (tasks/capture.py; tests/test_job_cpu.py)."""
    from torch._inductor.codecache import PyCodeCache

    return PyCodeCache.modules, PyCodeCache.modules_no_attr


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


def cpp_compiler() -> str:
    """The C++ compiler Inductor builds CPU kernels with (cpp_builder.get_cpp_compiler;
    tasks/cpu_libraries.py names the host's build by it)."""
    from torch._inductor.cpp_builder import get_cpp_compiler

    return get_cpp_compiler()
