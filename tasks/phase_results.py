"""What each phase of the job (tasks/phases.py, phases_compile.py, phases_profile.py) hands
on: one frozen result a phase, kept on the job's context (JobContext.keep) for the phases
after it, and put into the record once, when the job ends (tasks/record_parts.assemble).

A later phase reads an earlier one's figures from its result (`ctx.got(Compiled).compile_s`),
never from the record; no phase writes the record. Each result's `into()` says which part
of the record it fills (docs/result-schema.md), so a failed job's record holds what the
phases before the failure found, as before. The live objects the phases share (the
workload, the compiled step, the captured modules, the lease) stay on the context, and
the autotune store's counts, which its checkpoint thread and a stopped job's last write
update while the job runs, are the context's `autotune_store`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweeper.autotune_info import AutotuneStoreInfo
from sweeper.record import compiled_warm
from sweeper.record_schema import Breakdown, Record, Resolved


@dataclass(frozen=True)
class Environment:
    """setup, first: what the job runs on (tasks/environment.py), kept even when the
    setup then stops the job (a model name it does not know, cudagraphs on a CPU)."""
    environment: dict

    def into(self, record: Record) -> None:
        record["environment"] = self.environment


@dataclass(frozen=True)
class Setup:
    device: str  # cuda or cpu
    amp_dtype: Any  # a torch.dtype under autocast, or None
    resolved: Resolved  # what the job decided where it ran: the record's `resolved`

    def into(self, record: Record) -> None:
        record["resolved"].update(self.resolved)


@dataclass(frozen=True)
class Built:
    image_size: int

    def into(self, record: Record) -> None:
        record["resolved"]["image_size"] = self.image_size


@dataclass(frozen=True)
class Eager:
    step_ms: dict  # a Spread
    peak_memory_mb: float | None

    def into(self, record: Record) -> None:
        record["timings"].update(eager_step_ms=self.step_ms, eager_peak_memory_mb=self.peak_memory_mb)


@dataclass(frozen=True)
class AutotuneSeeded:
    """compile, first, for an autotune=on job sharing the store: the store's counts. The
    same object as the context's `autotune_store`, which the checkpoint, the warm-up's last
    write and a stopped job's partial write go on updating: the record takes it as it is at
    the job's end."""
    counts: AutotuneStoreInfo

    def into(self, record: Record) -> None:
        record["timings"]["autotune_store"] = self.counts


@dataclass(frozen=True)
class CompileSeed:
    """compile, first: what the compile store gave the job (tasks/job_stores.seed_compile),
    kept before the compile that may fail."""
    store: dict

    def into(self, record: Record) -> None:
        record["timings"]["compile_store"] = dict(self.store)


@dataclass(frozen=True)
class Compiled:
    compile_s: float
    split_s: dict  # compile_split_s
    timers: dict  # compile_timers
    cache: dict  # compile_cache: Inductor's cache counters
    tuned_configs_reused: int | None
    tuned_configs_renamed: int | None = None  # with the tuned-config patch installed
    cpu_isa_probes: dict | None = None  # a job with C++ kernels
    benchmarks: dict | None = None  # compile_benchmarks: what its compile benchmarked, where anything

    @property
    def warm(self) -> bool:
        """Whether the compile came from a cache (sweeper/record.compiled_warm)."""
        return compiled_warm({"compile_cache": self.cache})

    def into(self, record: Record) -> None:
        t = record["timings"]
        t["compile_s"] = self.compile_s
        if self.cpu_isa_probes is not None:
            t["cpu_isa_probes"] = self.cpu_isa_probes
        t.update(compile_split_s=self.split_s, compile_timers=self.timers, compile_cache=self.cache,
                 tuned_configs_reused=self.tuned_configs_reused)
        if self.tuned_configs_renamed is not None:
            t["tuned_configs_renamed"] = self.tuned_configs_renamed
        if self.benchmarks is not None:
            t["compile_benchmarks"] = self.benchmarks


@dataclass(frozen=True)
class WarmedUp:
    warmup_s: float
    autotune_decisions: dict | None = None  # an autotune=on job's (tasks/job_stores.autotune_decisions)
    compile_store: dict | None = None  # the compile store's part, with the bytes this job's compile left

    def into(self, record: Record) -> None:
        record["timings"]["warmup_s"] = self.warmup_s
        if self.autotune_decisions is not None:
            record["autotune_decisions"] = self.autotune_decisions
        if self.compile_store is not None:
            record["timings"]["compile_store"] = self.compile_store


@dataclass(frozen=True)
class Timed:
    launch_us: dict
    compiled_step_ms: dict
    peak_memory_mb: float | None
    speedup: float | None  # against eager, where eager was timed
    nvml: dict

    def into(self, record: Record) -> None:
        t = record["timings"]
        t.update(launch_us=self.launch_us, compiled_step_ms=self.compiled_step_ms, peak_memory_mb=self.peak_memory_mb)
        if self.speedup is not None:
            t["speedup"] = self.speedup
        t["nvml"] = self.nvml


@dataclass(frozen=True)
class Steady:
    loop: dict  # steady_loop
    nvml: dict

    def into(self, record: Record) -> None:
        record["timings"].update(nvml=self.nvml, steady_loop=self.loop)


@dataclass(frozen=True)
class ModulesTimed:
    artifacts: dict  # module label -> its copied file

    def into(self, record: Record) -> None:
        record["artifacts"]["modules"] = self.artifacts


@dataclass(frozen=True)
class Roofs:
    """The device's copy bandwidth and matmul peaks (tasks/roofs.py); read by the step's
    profile for its roofline, not a part of the record of its own."""
    roofs: dict

    def into(self, record: Record) -> None:
        pass


@dataclass(frozen=True)
class StepProfile:
    step: Breakdown  # the profiled step's
    trace: str
    model_code: dict
    roofline: dict | None = None  # with the device's roofs

    def into(self, record: Record) -> None:
        record["step"] = self.step
        record["artifacts"]["traces"]["step"] = self.trace
        record["model_code"] = self.model_code
        if self.roofline is not None:
            record["roofline"] = self.roofline


@dataclass(frozen=True)
class ModulesProfiled:
    entries: list  # each module's entry (ModuleEntry), the record's `modules`
    traces: dict  # module label -> its trace file
    kernel_table: dict

    def into(self, record: Record) -> None:
        record["modules"].extend(self.entries)
        record["artifacts"]["traces"].update(self.traces)
        record["kernel_table"] = self.kernel_table


@dataclass(frozen=True)
class MicrobenchReady:
    """microbench_prepare: the kernel table with what the preparation found (its own copy:
    the profile's stays as it was); the kernels it readied are the context's, until timed."""
    kernel_table: dict

    def into(self, record: Record) -> None:
        record["kernel_table"] = self.kernel_table


@dataclass(frozen=True)
class Microbench:
    kernel_table: dict  # with the standalone figures

    def into(self, record: Record) -> None:
        record["kernel_table"] = self.kernel_table


@dataclass(frozen=True)
class Accuracy:
    check: dict  # the record's `accuracy` (tasks/accuracy.py)

    def into(self, record: Record) -> None:
        record["accuracy"] = self.check
