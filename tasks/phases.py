"""The job's chain, one function a phase, over one small context (tasks/job.py runs them):

    setup -> build -> eager -> compile -> warmup -> timing -> steady_loop
          -> time_modules -> roofs -> profile_step -> profile_modules -> microbench_prepare
          -> microbench

Every unprofiled measurement comes before any profile: a profiler session can leave
per-launch overhead behind. Each phase fills its part of the record (docs/result-schema.md).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from sweeper.analysis.breakdown import spread
from sweeper.job_spec import JobSpec
from sweeper.record import PHASE_MARK, Record, compiled_warm, ran_config
from sweeper.stores import autotune_store, compile_store
from tasks import cpu_libraries, faults, job_stores
from tasks.torch_internals import compile_cache, probes
from tasks.torch_internals.benchmark_lease import LeasedBenchmarks, leased_benchmarks
from tasks.torch_internals.tuned_launch import TunedLaunch, reused_tuned_configs
from tasks.modules_profile import ModuleRun

if TYPE_CHECKING:  # for the annotations only: each phase imports what it uses (torch among them) when it runs
    import torch

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


def failure_reason(e: Exception, record: Record) -> str:
    """One line for the record: an out-of-memory names the batch size the job ran."""
    import torch

    if isinstance(e, torch.OutOfMemoryError):
        return f"out of GPU memory at batch size {ran_config(record).get('batch_size')}: {str(e).splitlines()[0]}"
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"[:500]


def compile_mode(autotune: bool, cudagraphs: bool) -> str:
    """torch.compile's own mode names for the variant, so a user can repeat it by hand."""
    if autotune:
        return "max-autotune" if cudagraphs else "max-autotune-no-cudagraphs"
    return "reduce-overhead" if cudagraphs else "default"


def made(value: T | None, what: str) -> T:
    """A context field that an earlier phase fills; None means that phase did not run (a
    phase list out of order is a bug here, not the user's)."""
    if value is None:
        raise RuntimeError(f"{what} is not there: the phase that makes it has not run (tasks/job.py's order)")
    return value


@dataclass
class JobContext:
    """What the phases hand each other. The record is the job's output; the rest lives
    only in this process."""

    spec: JobSpec  # what the launcher gave the job (its job.json)
    job_dir: Path
    record: Record
    device: str = ""
    amp_dtype: torch.dtype | None = None  # under autocast
    # filled by the phases in their order (tasks/job.py); a later phase reads them with made()
    workload: Workload | None = None  # build
    step: Callable[[], object] | None = None  # compile_step: the compiled step
    compiled: Callable | None = None  # compile_step: the compiled forward the step calls
    capture: ModuleCapture | None = None  # compile_step: the compiled modules
    real_inputs: InputCapture | None = None  # warmup, until time_modules
    modules: list[ModuleRun] = field(default_factory=list)
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # closed at the end of warmup
    patches: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)  # torch patched until the job ends
    benchmarks: LeasedBenchmarks | None = None  # setup: Inductor's benchmarks under the GPU lease
    tuned: TunedLaunch | None = None  # compile_step: kernels launched with an earlier run's tuned config
    checkpoint: AutotuneCheckpoint | None = None  # while an autotune=on job compiles
    lease: GpuLease | None = None  # held for whatever the job times on its GPU
    microbench_ready: dict[str, Prepared] | None = None  # kernel name -> readied, between the two microbench phases
    roofs: dict | None = None  # roofs: the device's copy bandwidth and matmul peaks (tasks/roofs.py)

    @property
    def cfg(self) -> dict:
        return self.spec.config

    @property
    def autotune_gpus(self) -> int:
        """GPUs the launcher gave the job: the spare ones are for its autotune benchmarking."""
        return int(self.spec.autotune_gpus or 1)

    @property
    def measure(self) -> dict:
        return self.cfg["measure"]

    @property
    def timings(self) -> dict:
        return self.record["timings"]

    def on_module_thread(self, run: ModuleRun, fn: Callable[[], object], what: str = "module run"):
        """fn() on the thread where the step runs modules of this role
        (tasks/module_thread.py); if it raises, the module is marked failed instead."""
        from tasks.module_thread import on_step_thread

        try:
            return on_step_thread(run.entry["role"], fn, self.device)
        except Exception as e:  # noqa: BLE001 - one module's failure is noted, not fatal
            return run.fail(what, failure_reason(e, self.record))


def _quiet_cuda_probes() -> None:
    """A CPU job on a machine with a CUDA build of torch (CI, a laptop) needs no CUDA, but
    two probes say so in its log as if something failed: torch.utils.cpp_extension warns
    "No CUDA runtime is found" when Inductor's C++ backend imports it, and the profiler's
    Kineto logs "ERROR: gpuGetDeviceCount failed with code 35" when it starts. Both are
    silenced for CPU jobs only (Kineto reads KINETO_LOG_LEVEL when the profiler starts)."""
    import logging

    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # above ERROR (3): Kineto says nothing


def setup(ctx: JobContext) -> None:
    import torch

    from sweeper.models import check_model_name, default_batch_size
    from tasks import environment
    from tasks.gc_watch import set_pause
    from tasks.workload import resolve_amp_dtype

    cfg = ctx.cfg
    set_pause(ctx.measure["pause_gc"])
    faults.inject(faults.fault_for(ctx.spec.job_id), ctx)  # the failure tests' own hook, nothing otherwise
    device = cfg["device"] if cfg["device"] != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device=cuda but this machine has no usable CUDA GPU; use device=auto or device=cpu")
    ctx.device = device
    if device == "cpu":
        _quiet_cuda_probes()
    ctx.record["environment"] = environment.environment_of(device)
    if cfg["cudagraphs"] and device != "cuda":
        raise Skip("cudagraphs=on needs a CUDA device; this job runs on the CPU")
    check_model_name(cfg["model"])
    _set_inductor_options(ctx)
    if ctx.lease is not None:  # Inductor's own benchmarks, while compiling, time under the lease too
        ctx.benchmarks = ctx.patches.enter_context(leased_benchmarks(ctx.lease.benchmark_hold,
                                                                     subprocess=ctx.autotune_gpus <= 1))
        ctx.record["resolved"]["leased_benchmarks"] = ctx.benchmarks.wrapped
    ctx.amp_dtype = amp_dtype = resolve_amp_dtype(cfg["amp"], cfg["amp_dtype"], device)
    mode = compile_mode(cfg["autotune"], cfg["cudagraphs"])
    resolved = ctx.record["resolved"]  # beside the config as asked (docs/result-schema.md)
    resolved["device"] = device
    resolved["batch_size"] = cfg["batch_size"] or default_batch_size(cfg["model"], device)
    resolved["amp_dtype"] = str(amp_dtype).replace("torch.", "") if amp_dtype else None
    resolved["compile_mode"] = mode
    resolved["inductor_options"] = probes.mode_options(mode)
    resolved["optimizer_step_compiled"] = False
    say(f"model={cfg['model']} device={device} batch={resolved['batch_size']} "
        f"mode={cfg['mode']} compile_mode={mode}")


def _set_inductor_options(ctx: JobContext) -> None:
    config = probes.inductor_config()
    config.benchmark_kernel = True  # get_args() and kernel harnesses in the module files
    config.triton.unique_kernel_names = True  # triton_poi_/red_/per_ names
    config.cpp.enable_kernel_profile = True  # C++ kernels in CPU traces
    spread_autotuning(ctx, config)
    if ctx.cfg["inductor"]:  # the user's extra options (checked by the driver already), over ours
        from sweeper import inductor_options

        options = inductor_options.flatten(ctx.cfg["inductor"])
        inductor_options.apply(options)
        ctx.record["resolved"]["inductor_applied"] = inductor_options.current(options)
    from tasks import provenance  # after the user's options: a pass of theirs is kept

    ctx.record["resolved"]["module_tags"] = provenance.install()


def spread_autotuning(ctx: JobContext, config) -> None:
    """A GPU job given spare GPUs (sweeper/sweep/spare_gpus.py) benchmarks its max-autotune
    choices on all of them: Inductor's subprocess benchmarking, one process a visible GPU.
    The record says how many GPUs the job tuned on."""
    gpus = ctx.autotune_gpus if ctx.cfg["autotune"] and ctx.device == "cuda" else 1
    if gpus > 1:
        config.autotune_in_subproc = True
        config.autotune_multi_device = True
    # used, and given: a CPU job given several (a cluster's declared GPUs) tunes on its CPU
    ctx.record["resolved"]["autotune_gpus"] = gpus if ctx.cfg["autotune"] else None
    ctx.record["resolved"]["autotune_gpus_given"] = ctx.autotune_gpus


def build(ctx: JobContext) -> None:
    from tasks.workload import build_workload

    cfg, rc = ctx.cfg, ctx.record["resolved"]
    ctx.workload = build_workload(cfg["model"], rc["batch_size"], cfg["image_size"], cfg["mode"] == "training",
                                  ctx.amp_dtype, ctx.device, cfg["seed"])
    rc["image_size"] = made(ctx.workload, "the workload").image_size


def eager(ctx: JobContext) -> None:
    from tasks.timing import peak_memory_mb, peak_memory_reset, time_calls

    workload = made(ctx.workload, "the workload")
    eager_step = workload.make_step(workload.forward_fn())
    for _ in range(2):
        eager_step()
    peak_memory_reset(ctx.device)
    ctx.timings["eager_step_ms"] = spread(time_calls(eager_step, ctx.measure["timed_steps"], ctx.device))
    ctx.timings["eager_peak_memory_mb"] = peak_memory_mb(ctx.device)


def compile_step(ctx: JobContext) -> None:
    """The first compiled step, compile included, with every compiled module captured."""
    import torch

    from tasks.capture import ModuleCapture
    from tasks.timing import synchronize

    if autotune_store.shared_by(ctx.cfg):  # max-autotune results of earlier jobs, from the driver
        seed_autotune_store(ctx)
    if compile_store.shared_by(ctx.cfg):  # an earlier run of this very job compiled it: load, not compile
        got = job_stores.seed_compile(ctx.spec.compile_seed, ctx.job_dir, inductor_cache(), torch.__version__)
        ctx.timings["compile_store"] = got
        if got["loaded"]:
            say(f"compile store {got['store']}: an earlier run's compile of this job ({got['bytes'] / 1e6:.1f} MB) loaded")
    isa_probes = _host_probes(cpu_libraries.probes_into)  # the host's instruction-set probes, not run again
    compile_cache.reset_dynamo()
    # a kernel whose coordinate-descent config is cached (seeded, or a loaded compile's) uses it
    tuned = ctx.tuned = ctx.patches.enter_context(reused_tuned_configs())
    mode = ctx.record["resolved"]["compile_mode"]
    workload = made(ctx.workload, "the workload")
    compiled = torch.compile(workload.forward_fn(), mode=None if mode == "default" else mode)
    step: Callable[[], object] = workload.make_step(compiled)
    if ctx.cfg["cudagraphs"]:
        inner = step

        def step():  # cudagraph trees need each step marked, or outputs get overwritten
            torch.compiler.cudagraph_mark_step_begin()
            return inner()

    ctx.step, ctx.compiled = step, compiled
    ctx.capture = ctx.stack.enter_context(ModuleCapture())  # until the end of warmup
    t0 = time.time()
    step()  # the compile: the phase clock's heartbeat says how far it got (tasks/job.py)
    synchronize(ctx.device)
    ctx.timings["compile_s"] = round(time.time() - t0, 3)
    kept = _host_probes(cpu_libraries.keep_probes)
    if isa_probes or kept:  # a job with C++ kernels: how many probes it was given, how many it left the host
        ctx.timings["cpu_isa_probes"] = {"from_host": isa_probes, "kept": kept, "folder": str(cpu_libraries.PROBES)}
    ctx.timings["compile_split_s"] = probes.compile_split(ctx.timings["compile_s"])
    ctx.timings["compile_timers"] = probes.compile_timers()
    ctx.timings["compile_cache"] = probes.compile_cache_counters()
    ctx.timings["tuned_configs_reused"] = tuned.reused if tuned.installed else None
    if tuned.installed:
        ctx.timings["tuned_configs_renamed"] = tuned.renamed
    _note_compile_benchmarks(ctx)


def _note_compile_benchmarks(ctx: JobContext) -> None:
    """What the compile benchmarked (its kernels' configs at their first launch, under the GPU
    lease), into the record; said when the compile came from the store, where it should be
    nothing: the reasons say why a kernel did not take its cold run's pick."""
    tuned = ctx.tuned or TunedLaunch()
    got: dict[str, Any] = {"by_caller": dict(ctx.benchmarks.by_caller) if ctx.benchmarks else {},
           "not_reused": dict(tuned.not_reused), "kernels": list(tuned.kernels)}
    if not (got["by_caller"] or got["not_reused"]):
        return
    ctx.timings["compile_benchmarks"] = got
    kernels = sum(got["not_reused"].values())
    if kernels and (ctx.timings.get("compile_store") or {}).get("loaded"):
        why = "; ".join(f"{n} {reason}" for reason, n in sorted(got["not_reused"].items(), key=lambda kv: -kv[1]))
        say(f"{kernels} kernels of the loaded compile benchmarked their configs at their first launch ({why})")


def _host_probes(step: Callable[[Path, str], int]) -> int | str:
    """cpu_libraries.probes_into or keep_probes on this job's cache; a folder that cannot be
    read or written costs the probes' time, never the job (the reason in its place)."""
    try:
        return step(inductor_cache(), torch_version())
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def warmup(ctx: JobContext) -> None:
    from tasks.capture import InputCapture
    from tasks.timing import synchronize

    step, capture = made(ctx.step, "the compiled step"), made(ctx.capture, "the module capture")
    t0 = time.time()
    for _ in range(ctx.measure["warmup_steps"]):
        step()
    synchronize(ctx.device)
    ctx.timings["warmup_s"] = round(time.time() - t0, 3)
    ctx.stack.close()  # the module capture ends with the warm-up: the backward compiles at the first step
    if autotune_store.shared_by(ctx.cfg):  # every autotuning is done by now: the entries go back to the driver
        checkpoint = made(ctx.checkpoint, "the autotune checkpoint")
        checkpoint.stop()
        store = ctx.timings["autotune_store"]
        store.update(job_stores.write_autotune_entries(ctx.job_dir, inductor_cache(), torch_version(), probes.system_hash()),
                     partial=False, checkpoints=checkpoint.writes, kernel_config_hits=probes.kernel_config_hits())
    if ctx.cfg.get("autotune"):
        ctx.record["autotune_decisions"] = job_stores.autotune_decisions(inductor_cache(), probes.system_hash(),
                                                                        ctx.spec.autotune_seed)
    if compile_store.shared_by(ctx.cfg):  # every graph is compiled by now: the job's compile goes back too
        store = ctx.timings.setdefault("compile_store", {})
        if compiled_warm(ctx.timings) and not compiled_anything():
            store["job_bytes"] = store.get("bytes")  # all of it came from the store, which keeps it as it is
        else:
            store["job_bytes"] = job_stores.write_compile_blob(
                ctx.job_dir, inductor_cache(), torch_version(), (ctx.record["environment"] or {}).get("gpu"),
                cold_compile_s(ctx))
    if not capture.modules:
        raise RuntimeError("no compiled module was captured: Inductor produced no wrapper code")
    with InputCapture(capture.modules) as real_inputs:
        step()  # one more warm-up step, keeping a copy of each module's real inputs
        synchronize(ctx.device)
    ctx.real_inputs = real_inputs


def seed_autotune_store(ctx: JobContext) -> None:
    """The store's timings and kernel configs into the job's cache, then the checkpoint
    thread that keeps what this job tunes, from now on, in its folder (partial)."""
    import torch

    from tasks.autotune_checkpoint import AutotuneCheckpoint

    seed = ctx.spec.autotune_seed or {"notes": ["no store entries came with the job (not started by the launcher)"]}
    mode = ctx.record["resolved"]["compile_mode"]
    coordesc = bool(probes.mode_options(mode).get("coordinate_descent_tuning")
                    or probes.inductor_config().coordinate_descent_tuning)
    system = probes.system_hash()
    got = job_stores.seed_autotune(seed, inductor_cache(), torch.__version__, system, coordesc)
    attempts = ctx.spec.earlier_attempts
    if attempts:  # this job was stopped before: the record sets what those runs gave beside this one
        got["earlier_attempts"] = attempts
    ctx.timings["autotune_store"] = got
    say(f"autotune store {got['store']}: {got['seeded_ops']} ops ({got['seeded_entries']} timed choices) and "
        f"{got['seeded_kernel_configs']} kernel configs from earlier jobs"
        + (f"; this job ran {len(attempts)} time(s) before and was stopped ({attempts[-1].get('status')}, "
           f"{sum(a.get('phase_s_at_stop') or 0 for a in attempts):.0f} s of compile)" if attempts else ""))
    # what the job started with goes into each partial write too: a stopped job's record,
    # made by the launcher from that file, then says it as the job's own would (the earlier
    # runs it has from the launcher's spec)
    started_with = {k: got[k] for k in ("seeded_ops", "seeded_entries", "seeded_kernel_configs") if k in got}
    ctx.checkpoint = AutotuneCheckpoint(ctx.job_dir, inductor_cache(), torch.__version__, system,
                                        started_with).start()


def inductor_cache() -> Path:
    """The job's own Inductor cache folder (set by tasks/job.prepare_process before torch loads)."""
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def torch_version() -> str:
    import torch

    return torch.__version__


def compiled_anything() -> bool:
    """Whether some graph of this process so far missed Inductor's caches (was compiled here)."""
    counts = probes.compile_cache_counters()
    return bool(counts["fxgraph_misses"] or counts["autograd_misses"])


def cold_compile_s(ctx: JobContext) -> float | None:
    """Seconds of this job's compile and warm-up when compiled cold: its own, or, when it
    loaded an earlier run's compile, that run's (kept with it in the compile store)."""
    t = ctx.timings
    if compiled_warm(t):
        return (t.get("compile_store") or {}).get("cold_compile_s")
    return round(t["compile_s"] + t.get("warmup_s", 0.0), 3)


def time_steps(ctx: JobContext) -> None:
    from tasks.timing import launch_probe_us, peak_memory_mb, peak_memory_reset, time_calls

    t = ctx.timings
    peak_memory_reset(ctx.device)
    t["launch_us"] = spread([launch_probe_us(ctx.device) for _ in range(5)])  # the host's launch speed now
    t["compiled_step_ms"] = spread(time_calls(made(ctx.step, "the compiled step"), ctx.measure["timed_steps"], ctx.device))
    t["peak_memory_mb"] = peak_memory_mb(ctx.device)
    if "eager_step_ms" in t:
        t["speedup"] = t["eager_step_ms"]["median"] / t["compiled_step_ms"]["median"]
    t["nvml"] = {"util_pct": None, "reason": "measure.steady_loop_s=0: no steady loop to read it over"}


def steady(ctx: JobContext) -> None:
    """The unprofiled step over seconds: the busy figure's divisor, and NVML's window."""
    from tasks import nvml_util
    from tasks.timing import steady_loop

    run_loop = partial(steady_loop, made(ctx.step, "the compiled step"), ctx.measure["steady_loop_s"], ctx.device)
    if ctx.device == "cuda":
        ctx.timings["steady_loop"], ctx.timings["nvml"] = nvml_util.utilization_during(run_loop)
        util = ctx.timings["nvml"].get("util_pct")
        say(f"NVML utilization {'not read' if util is None else f'{util:.1f}%'} "
            f"over {ctx.timings['steady_loop']['loop_s']} s")
    else:
        ctx.timings["steady_loop"], ctx.timings["nvml"] = run_loop(), {"util_pct": None, "reason": nvml_util.NO_GPU_REASON}


def accuracy(ctx: JobContext) -> None:
    """The compiled step against eager (tasks/accuracy.py), into the record; a check that
    cannot run (out of memory for its float64 copy) says why and costs the job nothing."""
    from tasks.accuracy import check

    workload = made(ctx.workload, "the workload")
    try:
        got = check(workload, made(ctx.compiled, "the compiled forward"), ctx.cfg["model"], bool(ctx.cfg["cudagraphs"]))
    except Exception as e:  # noqa: BLE001 - the job's figures stand without the check
        got = {"checked": False, "passed": None, "reason": failure_reason(e, ctx.record)}
    ctx.record["accuracy"] = got
    if got["checked"]:
        say(f"accuracy against eager: {'passed' if got['passed'] else 'FAILED'} at tolerance {got['tolerance']:g}"
            + ("" if got["passed"] else f" ({got['failed_count']} of {got['compared']} tensors: {', '.join(got['failed'][:2])})"))
    else:
        say(f"accuracy not checked: {got['reason']}")
    if ctx.device == "cuda":
        import torch

        torch.cuda.empty_cache()


def heartbeat_line(phase: str, seconds: float, store: dict | None = None, tuned: TunedLaunch | None = None) -> str:
    """What a phase that runs long says it is doing (tasks/job.PhaseClock's heartbeat);
    `store`: the record's timings.autotune_store, for what came from the store; `tuned`:
    the kernels launched with a stored config so far."""
    if phase == "compile":
        chosen = probes.autotuned_ops()  # max-autotune's progress; none without it
        seeded = _from_store(store, tuned)
        if not chosen:
            return f"still compiling: {seconds:.0f} s" + (f" ({seeded})" if seeded else "")
        split = probes.compile_split(seconds)  # where the autotuning went so far
        parts = ", ".join(f"{k[:-2].replace('_', ' ')} {v:.0f} s" for k, v in split.items()
                          if k.endswith("_s") and k != "rest_s" and v >= 1)
        # an op (an mm or convolution of given shapes) times 10 to 22 choices (docs/findings.md)
        return (f"still compiling: {seconds:.0f} s, {chosen} ops autotuned so far" + (f" ({parts})" if parts else "")
                + (f"; {seeded}" if seeded else ""))
    return f"still in phase {phase}: {seconds:.0f} s"


def _from_store(store: dict | None, tuned: TunedLaunch | None) -> str:
    """"from the store: 39 ops, 120 kernel configs; 50 kernels launched with them so far,
    not tuned again", or "" when nothing came. The count is reused_tuned_configs()'s: Inductor's
    own count of autotune-cache hits is no measure of it, since a kernel compiled in a
    worker reads its own fresh file again when coordinate descent reloads it (on the H200,
    3 hits in a small graph's cold run with nothing seeded, bench/results/coordesc_reuse/;
    319 in densenet121's headline job, none of whose kernels had a seeded config)."""
    if not store or not (store.get("seeded_ops") or store.get("seeded_kernel_configs")):
        return ""
    text = f"from the store: {store['seeded_ops']} ops, {store.get('seeded_kernel_configs', 0)} kernel configs"
    if store.get("seeded_kernel_configs") and tuned is not None and tuned.installed:
        text += f"; {tuned.reused} kernels launched with them so far, not tuned again"
    return text
