"""Inductor's benchmarks under the GPU's lease (tasks/gpu_lease.py): a patch of its
benchmarking entry points, installed by a context manager that restores them on exit and
counts what was benchmarked, by the code that asked (the record's compile_benchmarks).
Also the hook the fault `stall_mid_compile` uses (on_template_autotuned)."""

from __future__ import annotations

import functools
import sys
import threading
from collections import Counter
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterator

from sweeper.torch_internals.probes import autotuned_ops

# Inductor's benchmarking entry points that time on a device: every kernel, template choice
# and fusion it benchmarks while compiling goes through one of these (runtime/benchmarking.py,
# torch 2.11 and 2.14: Benchmarker and its subclasses).
_BENCHMARK_METHODS = ("benchmark", "benchmark_gpu", "benchmark_cpu", "benchmark_gpu_with_cuda_graph")


@dataclass
class LeasedBenchmarks:
    """What leased_benchmarks() installed (`wrapped`: "Class.method" names) and what ran under
    it: benchmarks by the code that ran them (`by_caller`)."""

    wrapped: list[str] = field(default_factory=list)
    by_caller: Counter = field(default_factory=Counter)
    _inside: threading.local = field(default_factory=threading.local)


@contextmanager
def leased_benchmarks(hold: Callable[[], AbstractContextManager[None]],
                      subprocess: bool = True) -> Iterator[LeasedBenchmarks]:
    """While inside: every benchmark Inductor runs while compiling holds the GPU's lease
    (`hold()` returns a context manager): its in-process benchmarker (template choices, a
    Triton kernel's configs at its first launch, coordinate descent, fusions decided by
    benchmarking), and, with `subprocess`, the wait for a choice benchmarked in its autotune
    subprocess (TuningProcessPool.target), which holds the lease for the subprocess. torch
    2.14 also offers set_gpu_benchmark_lock_context, for its do_bench_using_profiling: set
    too. Everything is put back on exit (tests/test_gpu_lease.py)."""
    from torch._inductor.runtime import benchmarking

    got = LeasedBenchmarks()
    undo: list[Callable[[], object]] = []
    classes = [c for c in vars(benchmarking).values() if isinstance(c, type) and issubclass(c, benchmarking.Benchmarker)]
    for cls in classes:
        for name in _BENCHMARK_METHODS:
            if name in cls.__dict__:
                original = cls.__dict__[name]
                setattr(cls, name, _leased(original, hold, got))
                undo.append(functools.partial(setattr, cls, name, original))
                got.wrapped.append(f"{cls.__name__}.{name}")
    pool = _tuning_pool() if subprocess else None
    if pool is not None:
        original = pool.__dict__["target"]
        setattr(pool, "target", _leased(original, hold, got))
        undo.append(functools.partial(setattr, pool, "target", original))
        got.wrapped.append("TuningProcessPool.target")
    if hasattr(benchmarking, "set_gpu_benchmark_lock_context"):
        previous = benchmarking.set_gpu_benchmark_lock_context(hold)
        undo.append(functools.partial(benchmarking.set_gpu_benchmark_lock_context, previous))
        got.wrapped.append("set_gpu_benchmark_lock_context")
    try:
        yield got
    finally:
        for step in reversed(undo):
            step()


def _tuning_pool() -> Any:
    """The autotune subprocess's pool class, where this torch has one with a `target`."""
    try:
        from torch._inductor import autotune_process
    except ImportError:
        return None
    pool = getattr(autotune_process, "TuningProcessPool", None)
    return pool if pool is not None and "target" in getattr(pool, "__dict__", {}) else None


def _leased(fn: Callable, hold: Callable[[], AbstractContextManager[None]], got: LeasedBenchmarks) -> Callable:
    @functools.wraps(fn)
    def leased(*args, **kwargs):
        outer = not getattr(got._inside, "on", False)  # benchmark() calls benchmark_gpu(): one benchmark
        if outer:
            got.by_caller[_benchmark_caller()] += 1
            got._inside.on = True
        try:
            with hold():
                return fn(*args, **kwargs)
        finally:
            if outer:
                got._inside.on = False

    return leased


def _benchmark_caller(depth: int = 3) -> str:
    """The innermost `depth` functions on the stack above a benchmark, outside the
    benchmarker and this module: "triton_heuristics.bench < benchmark_all_configs <
    autotune_to_one_config" for a Triton kernel's configs at its first launch."""
    names: list[str] = []
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and len(names) < depth:
        path = frame.f_code.co_filename
        if not path.endswith(("benchmarking.py", "benchmark_lease.py", "contextlib.py")):
            name = frame.f_code.co_name
            names.append(f"{Path(path).stem}.{name}" if not names else name)
        frame = frame.f_back
    return " < ".join(names)


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


class TunedOps(list):
    """The ops max-autotune selected for, as (op, inputs key, matmul precision) keys, in the
    order first seen; `sites` the model modules each was lowered for ("layer1.0.conv2
    (forward)"): one shape's decision serves every module of that shape."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: dict[tuple[str, str, str], list[str]] = {}


def _lowering_site() -> str | None:
    """The model module of the FX node Inductor is lowering now, from the tag our post-grad
    pass put in its stack trace (tasks/provenance.py): "layer1.0.conv2 (forward)"; None
    outside a lowering or for a node of no module."""
    try:
        from torch._inductor.virtualized import V

        node = V.graph.current_node
    except Exception:  # noqa: BLE001 - no graph being lowered (a benchmark outside a compile)
        return None
    from sweeper.analysis.node_tags import read_tags

    tags = read_tags(str(getattr(node, "meta", {}).get("stack_trace") or ""))
    tag = next((t for t in tags if t.node == getattr(node, "name", None)), tags[-1] if tags else None)
    if tag is None or tag.layer is None:
        return None
    return f"{tag.layer.path or '(model)'} ({tag.layer.pass_})"


def record_tuned_ops() -> TunedOps:
    """From now on, every op max-autotune selects a choice for, timed now or found in its
    cache (a store-seeded op, select_algorithm.py: Inductor calls its feedback savers for
    both), as the autotune cache keys it: (op, inputs key, matmul precision), and the model
    module each was lowered for (Inductor calls the savers while it lowers that node).
    Returns the list it appends to. Why: a seeded job times nothing itself, yet its choices
    are the store's decisions (tasks/job_stores.autotune_decisions); and the modules let the
    decisions' timings (each choice alone) be set beside the layer's time in the model
    (sweeper/analysis/autotune_regret.py)."""
    import torch
    from torch._inductor import select_algorithm
    from torch._inductor.select_algorithm import add_feedback_saver, create_inputs_key

    used = TunedOps()

    def key_of(name, input_nodes) -> tuple[str, str, str] | None:
        try:
            return (str(name), create_inputs_key(input_nodes), torch.get_float32_matmul_precision())
        except Exception:  # noqa: BLE001 - a key this torch makes otherwise: that op goes unnamed, the compile goes on
            return None

    def saver(timings, name, input_nodes, *rest) -> None:
        key = key_of(name, input_nodes)
        if key is not None and key not in used:
            used.append(key)

    add_feedback_saver(saver)
    # The modules: read where the op is lowered (AlgorithmSelectorCache.__call__, with the node
    # being lowered current), not in the saver: on a GPU Inductor may time the choices later,
    # while it schedules (a multi-template buffer), when no node is current any more.
    cls = select_algorithm.AlgorithmSelectorCache
    lowering = getattr(cls, "_sweeper_unwrapped_call", cls.__call__)

    def call(self, *args, **kwargs):
        name = args[0] if args else kwargs.get("name")
        nodes = args[2] if len(args) > 2 else kwargs.get("input_nodes")
        key, site = key_of(name, nodes), _lowering_site()
        if key is not None and site is not None and site not in used.sites.setdefault(key, []):
            used.sites[key].append(site)
        return lowering(self, *args, **kwargs)

    setattr(cls, "_sweeper_unwrapped_call", lowering)  # a second call in one process wraps the original, not ours
    setattr(cls, "__call__", call)
    return used
