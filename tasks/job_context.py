"""What the job's phases share (tasks/job.py runs them in order): the spec, the live objects
one phase makes for the next (the workload, the compiled step, the captured modules, the
GPU's lease), and each phase's result (tasks/phase_results.py), which the record is made
from when the job ends. No phase writes the record."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from sweeper.autotune_info import AutotuneStoreInfo
from sweeper.job_spec import JobSpec
from sweeper.record import PHASE_MARK, Record, ran_config
from tasks.modules_profile import ModuleRun
from tasks.phase_results import Setup
from sweeper.torch_internals.benchmark_lease import LeasedBenchmarks
from sweeper.torch_internals.tuned_launch import TunedLaunch

if TYPE_CHECKING:  # for the annotations only: each phase imports what it uses (torch among them) when it runs
    from tasks.autotune_checkpoint import AutotuneCheckpoint
    from tasks.capture import InputCapture, ModuleCapture
    from tasks.gpu_lease import GpuLease
    from tasks.kernel_bench import Prepared
    from tasks.workload import Workload

T = TypeVar("T")


class Skip(Exception):
    """The combination cannot run here (not a failure): recorded as skipped."""


def say(msg: str) -> None:
    """A progress line the launcher relays (sweeper/sweep/job_process.py reads the mark)."""
    print(f"{PHASE_MARK} {msg}", flush=True)


def failure_reason(e: Exception, record: Record | dict) -> str:
    """One line for the record: an out-of-memory names the batch size the job ran (`record`:
    the job's config and what it resolved, as a record holds them)."""
    import torch

    if isinstance(e, torch.OutOfMemoryError):
        return f"out of GPU memory at batch size {ran_config(record).get('batch_size')}: {str(e).splitlines()[0]}"
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"[:500]


def made(value: T | None, what: str) -> T:
    """A context field that an earlier phase fills; None means that phase did not run (a
    phase list out of order is a bug here, not the user's)."""
    if value is None:
        raise RuntimeError(f"{what} is not there: the phase that makes it has not run (tasks/job.py's order)")
    return value


@dataclass
class JobContext:
    spec: JobSpec  # what the launcher gave the job (its job.json)
    job_dir: Path
    # each phase's result, in the order kept (tasks/phase_results.py): the record's parts
    results: dict[type, Any] = field(default_factory=dict)
    # the autotune store's counts (seeded at the compile's start; the checkpoint and the
    # warm-up's last write add to them): live while the job runs, into the record at its end
    autotune_store: AutotuneStoreInfo | None = None
    # live objects, filled by the phases in their order (tasks/job.py); a later phase reads them with made()
    workload: Workload | None = None  # build
    step: Callable[[], object] | None = None  # compile: the compiled step
    compiled: Callable | None = None  # compile: the compiled forward the step calls
    capture: ModuleCapture | None = None  # compile: the compiled modules
    real_inputs: InputCapture | None = None  # warmup, until time_modules
    modules: list[ModuleRun] = field(default_factory=list)  # time_modules: each module's run
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # closed at the end of warmup
    patches: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # torch patched until the job ends
    benchmarks: LeasedBenchmarks | None = None  # setup: Inductor's benchmarks under the GPU lease
    tuned: TunedLaunch | None = None  # compile: kernels launched with an earlier run's tuned config
    checkpoint: AutotuneCheckpoint | None = None  # while an autotune=on job compiles
    tuned_ops: list[tuple[str, str, str]] | None = None  # compile: the ops max-autotune selected for, seeded or timed
    lease: GpuLease | None = None  # held for whatever the job times on its GPU
    microbench_ready: dict[str, Prepared] | None = None  # kernel name -> readied, between the two microbench phases

    def keep(self, result: Any) -> None:
        """A phase's result (or an early part of it, kept before work that may fail)."""
        self.results[type(result)] = result

    def got(self, kind: type[T]) -> T:
        """An earlier phase's result of this kind; it must have run (tasks/job.py's order)."""
        return made(self.results.get(kind), f"the {kind.__name__} result")

    def has(self, kind: type[T]) -> T | None:
        """An earlier phase's result of this kind, None where that phase did not run."""
        return self.results.get(kind)

    @property
    def cfg(self) -> dict:
        return self.spec.config

    @property
    def device(self) -> str:
        return self.got(Setup).device

    @property
    def amp_dtype(self):
        return self.got(Setup).amp_dtype

    @property
    def autotune_gpus(self) -> int:
        """GPUs the launcher gave the job: the spare ones are for its autotune benchmarking."""
        return int(self.spec.autotune_gpus or 1)

    @property
    def measure(self) -> dict:
        return self.cfg["measure"]

    def failure(self, e: Exception) -> str:
        """failure_reason() with the batch size this job resolved."""
        setup = self.has(Setup)
        return failure_reason(e, {"config": self.cfg, "resolved": setup.resolved if setup else {}})

    def on_module_thread(self, run: ModuleRun, fn: Callable[[], object], what: str = "module run"):
        """fn() on the thread where the step runs modules of this role
        (tasks/module_thread.py); if it raises, the module is marked failed instead."""
        from tasks.module_thread import on_step_thread

        try:
            return on_step_thread(run.entry["role"], fn, self.device)
        except Exception as e:  # noqa: BLE001 - one module's failure is noted, not fatal
            return run.fail(what, self.failure(e))
