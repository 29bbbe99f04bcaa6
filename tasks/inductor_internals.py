"""The private torch and Inductor APIs this project leans on, in one place.

None of these is a public API; each can change between torch releases. They were run on
torch 2.11.0 (CUDA 13.0, the GPU machine) and 2.14.1 (CPU, the Makefile's), which is why
pyproject.toml asks for torch>=2.11. When a torch upgrade breaks one, this module is
where to look first; the tests that exercise each are named beside it.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections import Counter
from pathlib import Path
from contextlib import AbstractContextManager
from types import FrameType
from typing import Any, Callable

TESTED_ON = ("2.11.0", "2.14.1")


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


def reset_dynamo() -> None:
    """Forget every compiled frame, so that the job's compile starts cold in-process."""
    import torch

    torch._dynamo.reset()


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


def compile_timers(top: int = 15) -> dict[str, list]:
    """Inductor's costliest timers so far, name -> [calls, seconds], costliest first: where a
    compile went when the split's parts do not say (timers nest, so they overlap)."""
    totals = sorted(((k, len(v), round(sum(v), 3)) for k, v in compile_metrics().items()), key=lambda t: -t[2])
    return {k: [n, s] for k, n, s in totals[:top]}


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


def on_template_autotuned(fn: Callable[[str], None]) -> None:
    """Call fn(op name) each time max-autotune has timed an op's choices and written them to
    its cache (select_algorithm.py: add_feedback_saver; the fault `stall_mid_compile`)."""
    from torch._inductor.select_algorithm import add_feedback_saver

    # Inductor calls its feedback savers for an op found in its cache as well (a seeded
    # one); only a real benchmark adds to the op's `_template_autotuning` timer.
    timed = [autotuned_ops()]

    def saver(timings, name, *rest) -> None:
        now = autotuned_ops()
        if now > timed[0]:
            timed[0] = now
            fn(name)

    add_feedback_saver(saver)


def loaded_code_modules():
    """(modules, modules by path) that Inductor's PyCodeCache loaded in this process: the
    compiled wrapper modules, kernels and all (tasks/capture.py; tests/test_job_cpu.py)."""
    from torch._inductor.codecache import PyCodeCache

    return PyCodeCache.modules, PyCodeCache.modules_no_attr


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


# Inductor's benchmarking entry points that time on a device: every kernel, template choice
# and fusion it benchmarks while compiling goes through one of these (runtime/benchmarking.py,
# torch 2.11 and 2.14: Benchmarker and its subclasses).
_BENCHMARK_METHODS = ("benchmark", "benchmark_gpu", "benchmark_cpu", "benchmark_gpu_with_cuda_graph")


def lease_benchmarks(hold: Callable[[], AbstractContextManager[None]], subprocess: bool = True) -> list[str]:
    """Make every benchmark Inductor runs while compiling hold the GPU's lease
    (tasks/gpu_lease.py): its in-process benchmarker (template choices, a Triton kernel's
    configs at its first launch, coordinate descent, fusions decided by benchmarking), and,
    with `subprocess`, the wait for a choice benchmarked in its autotune subprocess
    (TuningProcessPool.target), which holds the lease for the subprocess. `hold()` returns a
    context manager; the names wrapped come back (tests/test_gpu_lease.py). torch 2.14 also
    offers set_gpu_benchmark_lock_context, for its do_bench_using_profiling: set too."""
    from torch._inductor.runtime import benchmarking

    wrapped = []
    classes = [c for c in vars(benchmarking).values() if isinstance(c, type) and issubclass(c, benchmarking.Benchmarker)]
    for cls in classes:
        for name in _BENCHMARK_METHODS:
            if name in cls.__dict__ and not getattr(cls.__dict__[name], "_sweeper_leased", False):
                setattr(cls, name, _leased(cls.__dict__[name], hold))
                wrapped.append(f"{cls.__name__}.{name}")
    if subprocess:
        pool: Any = None  # the subprocess benchmarking's pool, where this torch has it
        try:
            from torch._inductor import autotune_process

            pool = getattr(autotune_process, "TuningProcessPool", None)
        except ImportError:
            pass
        if pool is not None and hasattr(pool, "target") and not getattr(pool.target, "_sweeper_leased", False):
            setattr(pool, "target", _leased(pool.target, hold))
            wrapped.append("TuningProcessPool.target")
    if hasattr(benchmarking, "set_gpu_benchmark_lock_context"):
        benchmarking.set_gpu_benchmark_lock_context(hold)
        wrapped.append("set_gpu_benchmark_lock_context")
    return wrapped


def _leased(fn: Callable, hold: Callable[[], AbstractContextManager[None]]) -> Callable:
    @functools.wraps(fn)
    def leased(*args, **kwargs):
        outer = not getattr(_in_benchmark, "on", False)  # benchmark() calls benchmark_gpu(): one benchmark
        if outer:
            _benchmark_callers[_benchmark_caller()] += 1
            _in_benchmark.on = True
        try:
            with hold():
                return fn(*args, **kwargs)
        finally:
            if outer:
                _in_benchmark.on = False

    setattr(leased, "_sweeper_leased", True)  # wrapped once, however often lease_benchmarks runs
    return leased


# The benchmarks run in this process under the lease, by the code that ran them
# (_benchmark_caller): what a job's record says its compile benchmarked (compile_benchmarks).
_benchmark_callers: Counter = Counter()
_in_benchmark = threading.local()


def _benchmark_caller(depth: int = 3) -> str:
    """The innermost `depth` functions on the stack above a benchmark, outside the
    benchmarker and this module: "triton_heuristics.bench < benchmark_all_configs <
    autotune_to_one_config" for a Triton kernel's configs at its first launch."""
    names: list[str] = []
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and len(names) < depth:
        path = frame.f_code.co_filename
        if not path.endswith(("benchmarking.py", "inductor_internals.py", "contextlib.py")):
            name = frame.f_code.co_name
            names.append(f"{Path(path).stem}.{name}" if not names else name)
        frame = frame.f_back
    return " < ".join(names)


def compile_benchmarks() -> dict:
    """What was benchmarked in this process so far: {"by_caller": count of benchmarks by the
    code that ran them (those under the GPU lease: lease_benchmarks), "not_reused": count of kernels
    that benchmarked their configs at their first launch by why no earlier pick was taken,
    "kernels": the first such kernels' names}. A warm job's should be empty; when it is not,
    it says where to look (bench/results/compile_store/)."""
    return {"by_caller": dict(_benchmark_callers), "not_reused": dict(_not_reused),
            "kernels": list(_benchmarked_kernels)}


def raw_stream(device_index: int):
    """The current CUDA stream as the raw handle Triton launchers take (GPU only)."""
    from torch._C import _cuda_getCurrentRawStream

    return _cuda_getCurrentRawStream(device_index)


# How many kernels took their coordinate-descent config from the local autotune cache
# instead of being tuned again (reuse_tuned_configs), in this process.
_reused_configs = [0]
# Of those, how many were found under another name (renamed_config).
_renamed_configs = [0]


def reuse_tuned_configs() -> bool:
    """Make a kernel whose coordinate-descent config is already in its local autotune cache
    (a seeded one, from the store or a loaded compile) use it, not tune again; True once
    installed, False where this torch lacks the places it hooks.

    Inductor means to: the cache read marks the config `found_by_coordesc`
    (autotune_cache.py: _load_cached_autotuning), and a marked config is not tuned. But the
    mark is lost on the way back from a compile worker (triton.Config.__setstate__ keeps
    only its own fields; pytorch/pytorch#172819 and #181292), and a reduction's extra RBLOCK
    launchers (_dynamic_scale_rblock) send it through benchmarking again, which rewrites the
    cache file unmarked. On torch 2.11 an H200 mixnet_l job seeded with 274 configs re-ran
    coordinate descent on 215 of them (bench/results/headline/sitting2_configs_retuned.md;
    bench/coordesc_reuse.py checks the hook on one small graph; tests/test_kernel_configs.py).
    So the two places where Inductor tunes a kernel at its first launch look in that cache
    first; what they find there is what cold tuning of this very kernel source chose. A
    kernel without coordinate descent (autotune off) loaded from the compile store takes the
    config its cold run's benchmarking picked the same way (picked_launcher)."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:  # a torch built without Triton: nothing is tuned at launch
        return False
    if getattr(CachingAutotuner, "_sweeper_reuse", False):
        return True
    if not all(hasattr(CachingAutotuner, name) for name in ("autotune_to_one_config", "_coordinate_descent_tuning")):
        return False
    pick_one, descend = CachingAutotuner.autotune_to_one_config, CachingAutotuner._coordinate_descent_tuning

    def autotune_to_one_config(self, *args, **kwargs):
        launcher = cached_launcher(self, self.launchers)
        if launcher is None:
            launcher, why = _picked_launcher(self, self.launchers)
            if launcher is None:
                _note_not_reused(self, why)
                candidates = list(self.launchers)
                picked = pick_one(self, *args, **kwargs)
                _keep_own_pick(self, candidates)
                return picked
        self.launchers = [launcher]
        self.autotune_time_taken_ns = getattr(self, "precompile_time_taken_ns", 0)

    def _coordinate_descent_tuning(self, launcher, *args, **kwargs):
        return cached_launcher(self, [launcher]) or descend(self, launcher, *args, **kwargs)

    setattr(CachingAutotuner, "autotune_to_one_config", autotune_to_one_config)
    setattr(CachingAutotuner, "_coordinate_descent_tuning", _coordinate_descent_tuning)
    setattr(CachingAutotuner, "_sweeper_reuse", True)
    return True


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


def tuned_configs_reused() -> int | None:
    """How many kernels reuse_tuned_configs() has given their cached config so far in this
    process; None while it is not installed."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:
        return None
    return _reused_configs[0] if getattr(CachingAutotuner, "_sweeper_reuse", False) else None


def tuned_configs_renamed() -> int | None:
    """Of tuned_configs_reused(), how many came from a kernel of the same code under another
    name (renamed_config); None while the hook is not installed."""
    return _renamed_configs[0] if tuned_configs_reused() is not None else None


def cached_coordesc_config(tuner):
    """The coordinate-descent config in a kernel's local autotune cache file (the one its
    cache read would give, marked `found_by_coordesc`), or None: no file, another config
    list (configs_hash), a config picked only by benchmarking, or coordinate descent off.
    The file is looked for in this process's Inductor cache too: a kernel that Inductor
    loaded from a cached compile (TritonBundler's static autotuners) still points at the
    cache of the run that compiled it. Failing both, a seeded config of the same kernel
    code under another name (renamed_config) is written as this kernel's file and used."""
    import json

    cache = getattr(getattr(tuner, "save_cache_hook", None), "__self__", None)
    local = getattr(cache, "local_cache", None)
    if not local or not tuner.inductor_meta.get("coordinate_descent_tuning"):
        return None
    path = Path(local[1])
    if not path.exists():  # a kernel from an earlier run's compile (the compile store) keeps that run's
        path = in_this_cache(path)  # cache path; the file is here, at the same place
    renamed = None  # the kernel file whose code found a seeded config under another name
    if not path.exists():  # perhaps the same code under another name: a seeded config by its code key
        filename = getattr(tuner, "filename", None)
        candidates = [Path(filename), in_this_cache(Path(filename))] if filename else []
        renamed = next((f for f in candidates if f.exists()), None)
        text = renamed_config(renamed) if renamed else None
    else:
        try:
            text = path.read_text()
        except OSError:
            return None
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not data.get("found_by_coordesc"):
        return None
    from torch._inductor.runtime.autotune_cache import _load_cached_autotuning

    config = _load_cached_autotuning(dict(data), cache.configs_hash, [], tuner.inductor_meta)
    if not getattr(config, "found_by_coordesc", False):
        return None
    if renamed is not None:  # its own file now: the job's entries, and a later launch, find it by name
        (renamed.parent / Path(local[1]).name).write_text(text)
        _renamed_configs[0] += 1
    return config


def cached_launcher(tuner, launchers: list):
    """A launcher for the kernel's cached coordinate-descent config, marked so that Inductor
    does not tune it: one of `launchers` if it has that config, else compiled as coordinate
    descent compiles a config it tries; None when nothing is cached."""
    config = cached_coordesc_config(tuner)
    if config is None:
        return None
    key = config_key(config)
    launcher = next((one for one in launchers if config_key(one.config) == key), None)
    if launcher is None:
        try:
            if hasattr(tuner, "_ensure_kernel_loaded"):  # compiled in a worker: its fn was dropped (torch 2.14)
                tuner._ensure_kernel_loaded()
            elif tuner.fn.fn is None:  # the same, torch 2.11
                tuner.fn = tuner._reload_kernel().fn
            with tuner.lock:
                launcher = tuner._precompile_config(config).make_launcher()
        except Exception:  # noqa: BLE001 - a config that will not build here: Inductor tunes as it would
            return None
    launcher.config.found_by_coordesc = True
    _reused_configs[0] += 1
    return launcher


def in_this_cache(path: Path) -> Path:
    """A file of an earlier run's Inductor cache at the same place in this process's cache
    (<cache>/<two characters>/<file>): where the compile store puts a loaded compile's files."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir()) / path.parent.name / path.name


# Kernels that benchmarked their configs at their first launch in this process, by why no
# earlier run's pick was taken (_picked_launcher), and the first few of their names.
_not_reused: Counter = Counter()
_benchmarked_kernels: list[str] = []


def _note_not_reused(tuner, why: str) -> None:
    _not_reused[why] += 1
    if len(_benchmarked_kernels) < 10:
        meta = getattr(tuner, "inductor_meta", None) or {}
        _benchmarked_kernels.append(str(meta.get("kernel_name") or Path(getattr(tuner, "filename", "") or "?").stem))


def picked_launcher(tuner, launchers: list):
    """For a kernel without coordinate descent (autotune off): the launcher of the config its
    own benchmarking picked in the run that compiled it, where Inductor does not look. A
    kernel loaded from the compile store keeps that run's cache path, gone with its scratch
    folder, so Inductor benchmarked every config again (on an H200, 883 benchmarks in a warm
    mixnet_l job, 74 s beside other jobs) and wrote its pick back there, into the dead folder,
    where only a later run found it. The file the compile store put in this job's cache, at
    the same place, is read instead; a config that is not among `launchers`, or a file of
    another candidate list (configs_hash), is not taken. A kernel Inductor keeps no pick for
    has the one the job kept for it (_keep_own_pick) read the same way, at its own path too.
    None: Inductor picks as it would."""
    return _picked_launcher(tuner, launchers)[0]


def _picked_launcher(tuner, launchers: list) -> tuple[object | None, str]:
    """picked_launcher's launcher, and when there is none, why (compile_benchmarks)."""
    import json

    if tuner.inductor_meta.get("coordinate_descent_tuning"):
        return None, "coordinate descent on, no config of its in the cache"
    if len(launchers) < 2:
        return None, "one launcher"
    cache = getattr(getattr(tuner, "save_cache_hook", None), "__self__", None)
    own = not getattr(cache, "local_cache", None)  # a kernel Inductor keeps no pick for: ours
    if own:
        cache = _own_pick_cache(tuner, launchers)
    local = getattr(cache, "local_cache", None)
    if cache is None or not local:
        return None, "no local autotune cache for the kernel"
    path = Path(local[1])
    if path.exists() and not own:  # at the kernel's own path: Inductor's own read finds it
        return None, "a pick at the kernel's own path, not taken by Inductor's read"
    try:
        data = json.loads((path if own and path.exists() else in_this_cache(path)).read_text())
    except OSError:
        return None, "no pick in this job's cache"
    except ValueError:
        return None, "an unreadable pick in this job's cache"
    if not isinstance(data, dict) or data.get("configs_hash") != cache.configs_hash:
        return None, "a pick for another candidate list"
    # matched as Inductor's own cache read matches a picked config (autotune_cache.py:
    # _load_cached_autotuning): its block sizes, warps and stages, one launcher exactly
    matching = [one for one in launchers
                if all(value == data.get(key) for key, value in one.config.kwargs.items())
                and one.config.num_warps == data.get("num_warps") and one.config.num_stages == data.get("num_stages")]
    if len(matching) != 1:
        return None, f"a pick matching {len(matching)} of the {len(launchers)} launchers"
    _reused_configs[0] += 1
    return matching[0], ""


def _own_pick_cache(tuner, launchers: list):
    """The local autotune cache Inductor would keep for a kernel it keeps none for, under the
    hash of `launchers`' configs; None where it cannot be made. Inductor makes one only for a
    kernel of several configs at its decoration (triton_heuristics.check_autotune_cache), but
    a reduction of one config whose registers spill gets launchers of smaller RBLOCK at its
    first launch (_dynamic_scale_rblock) and benchmarks them, in every run, its pick kept
    nowhere: 17 kernels of an H200 densenet121 training job on torch 2.11, 34 benchmarks
    that a warm job of a packed night waited 66 s of GPU lease for
    (bench/results/compile_store/warm_default_rblock.md)."""
    filename = getattr(tuner, "filename", None)
    if not filename:
        return None
    try:
        from torch._inductor.runtime.autotune_cache import AutotuneCache
        from torch._inductor.runtime.triton_heuristics import hash_configs

        return AutotuneCache.create({"autotune_local_cache": True, "autotune_remote_cache": False}, filename,
                                    hash_configs([one.config for one in launchers]))
    except Exception:  # noqa: BLE001 - another torch's internals: Inductor benchmarks as it would
        return None


def _keep_own_pick(tuner, candidates: list) -> None:
    """After Inductor benchmarked `candidates` of a kernel it keeps no pick for: its pick,
    written as Inductor writes one (AutotuneCache.save, beside the kernel's file), so that the
    compile store carries it (tuned_configs) and a later run's _picked_launcher takes it."""
    has_own = getattr(getattr(getattr(tuner, "save_cache_hook", None), "__self__", None), "local_cache", None)
    if has_own or len(candidates) < 2 or len(tuner.launchers) != 1 \
            or tuner.inductor_meta.get("coordinate_descent_tuning"):
        return
    cache = _own_pick_cache(tuner, candidates)
    if cache is None or not cache.local_cache:
        return
    try:
        cache.save(tuner.launchers[0].config, int(getattr(tuner, "autotune_time_taken_ns", 0) or 0))
    except Exception:  # noqa: BLE001 - a pick not kept costs a later run its benchmarks, never this job
        pass


def config_key(config) -> tuple:
    """What makes two Triton configs the same launch: block sizes, warps, stages
    (tasks/kernel_bench.py matches the chosen one among the candidates by it too)."""
    return (tuple(sorted(getattr(config, "kwargs", {}).items())), getattr(config, "num_warps", None),
            getattr(config, "num_stages", None))
