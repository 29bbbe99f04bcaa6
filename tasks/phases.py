"""The job's chain, one function a phase, over one small context (tasks/job.py runs them):

    setup -> build -> eager -> compile -> warmup -> timing -> steady_loop
          -> time_modules -> roofs -> profile_step -> profile_modules -> microbench_prepare
          -> microbench -> accuracy

Every unprofiled measurement comes before any profile: a profiler session can leave
per-launch overhead behind. Each phase returns its result (tasks/phase_results.py), the
part of the record it fills (docs/result-schema.md). This module has the phases around the
compile; the compile and warm-up are in tasks/phases_compile.py, the profiles and
microbenchmarks in tasks/phases_profile.py.
"""

from __future__ import annotations

import os
from functools import partial

from sweeper.analysis.breakdown import spread
from sweeper.record_schema import Resolved
from tasks import faults
from tasks.job_context import JobContext, Skip, made, say
from tasks.phase_results import Accuracy, Built, Eager, Environment, Setup, Steady, Timed
from sweeper.torch_internals import probes
from sweeper.torch_internals.benchmark_lease import leased_benchmarks


def compile_mode(autotune: bool, cudagraphs: bool) -> str:
    """torch.compile's own mode names for the variant, so a user can repeat it by hand."""
    if autotune:
        return "max-autotune" if cudagraphs else "max-autotune-no-cudagraphs"
    return "reduce-overhead" if cudagraphs else "default"


def _quiet_cuda_probes() -> None:
    """A CPU job on a machine with a CUDA build of torch (CI, a laptop) needs no CUDA, but
    two probes say so in its log as if something failed: torch.utils.cpp_extension warns
    "No CUDA runtime is found" when Inductor's C++ backend imports it, and the profiler's
    Kineto logs "ERROR: gpuGetDeviceCount failed with code 35" when it starts. Both are
    silenced for CPU jobs only (Kineto reads KINETO_LOG_LEVEL when the profiler starts)."""
    import logging

    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # above ERROR (3): Kineto says nothing


def setup(ctx: JobContext) -> Setup:
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
    if device == "cpu":
        _quiet_cuda_probes()
    ctx.keep(Environment(environment.environment_of(device)))
    if cfg["cudagraphs"] and device != "cuda":
        raise Skip("cudagraphs=on needs a CUDA device; this job runs on the CPU")
    check_model_name(cfg["model"])
    resolved = _set_inductor_options(ctx, device)
    if ctx.lease is not None:  # Inductor's own benchmarks, while compiling, time under the lease too
        ctx.benchmarks = ctx.patches.enter_context(leased_benchmarks(ctx.lease.benchmark_hold,
                                                                     subprocess=ctx.autotune_gpus <= 1))
        resolved["leased_benchmarks"] = ctx.benchmarks.wrapped
    amp_dtype = resolve_amp_dtype(cfg["amp"], cfg["amp_dtype"], device)
    mode = compile_mode(cfg["autotune"], cfg["cudagraphs"])
    # beside the config as asked (docs/result-schema.md)
    resolved["device"] = device
    resolved["batch_size"] = cfg["batch_size"] or default_batch_size(cfg["model"], device)
    resolved["amp_dtype"] = str(amp_dtype).replace("torch.", "") if amp_dtype else None
    resolved["compile_mode"] = mode
    resolved["inductor_options"] = probes.mode_options(mode)
    resolved["optimizer_step_compiled"] = False
    say(f"model={cfg['model']} device={device} batch={resolved['batch_size']} "
        f"mode={cfg['mode']} compile_mode={mode}")
    return Setup(device, amp_dtype, resolved)


def _set_inductor_options(ctx: JobContext, device: str) -> Resolved:
    """Inductor's options for the job (ours, the spread of its autotuning, the user's own);
    what the record's `resolved` says of them."""
    config = probes.inductor_config()
    config.benchmark_kernel = True  # get_args() and kernel harnesses in the module files
    config.triton.unique_kernel_names = True  # triton_poi_/red_/per_ names
    config.cpp.enable_kernel_profile = True  # C++ kernels in CPU traces
    resolved = spread_autotuning(ctx, config, device)
    if ctx.cfg["inductor"]:  # the user's extra options (checked by the driver already), over ours
        from sweeper import inductor_options

        options = inductor_options.flatten(ctx.cfg["inductor"])
        inductor_options.apply(options)
        resolved["inductor_applied"] = inductor_options.current(options)
    from tasks import provenance  # after the user's options: a pass of theirs is kept

    resolved["module_tags"] = provenance.install()
    return resolved


def spread_autotuning(ctx: JobContext, config, device: str) -> Resolved:
    """A GPU job given spare GPUs (sweeper/sweep/spare_gpus.py) benchmarks its max-autotune
    choices on all of them: Inductor's subprocess benchmarking, one process a visible GPU.
    The record says how many GPUs the job tuned on."""
    gpus = ctx.autotune_gpus if ctx.cfg["autotune"] and device == "cuda" else 1
    if gpus > 1:
        config.autotune_in_subproc = True
        config.autotune_multi_device = True
    # used, and given: a CPU job given several (a cluster's declared GPUs) tunes on its CPU
    return {"autotune_gpus": gpus if ctx.cfg["autotune"] else None, "autotune_gpus_given": ctx.autotune_gpus}


def build(ctx: JobContext) -> Built:
    from tasks.workload import build_workload

    cfg = ctx.cfg
    ctx.workload = build_workload(cfg["model"], ctx.got(Setup).resolved["batch_size"], cfg["image_size"],
                                  cfg["mode"] == "training", ctx.amp_dtype, ctx.device, cfg["seed"])
    return Built(ctx.workload.image_size)


def eager(ctx: JobContext) -> Eager:
    from tasks.timing import peak_memory_mb, peak_memory_reset, time_calls

    workload = made(ctx.workload, "the workload")
    eager_step = workload.make_step(workload.forward_fn())
    for _ in range(2):
        eager_step()
    peak_memory_reset(ctx.device)
    return Eager(spread(time_calls(eager_step, ctx.measure["timed_steps"], ctx.device)), peak_memory_mb(ctx.device))


def time_steps(ctx: JobContext) -> Timed:
    from tasks.timing import launch_probe_us, peak_memory_mb, peak_memory_reset, time_calls

    peak_memory_reset(ctx.device)
    launch_us = spread([launch_probe_us(ctx.device) for _ in range(5)])  # the host's launch speed now
    step_ms = spread(time_calls(made(ctx.step, "the compiled step"), ctx.measure["timed_steps"], ctx.device))
    eager_ran = ctx.has(Eager)
    return Timed(launch_us, step_ms, peak_memory_mb(ctx.device),
                 eager_ran.step_ms["median"] / step_ms["median"] if eager_ran is not None else None,
                 {"util_pct": None, "reason": "measure.steady_loop_s=0: no steady loop to read it over"})


def steady(ctx: JobContext) -> Steady:
    """The unprofiled step over seconds: the busy figure's divisor, and NVML's window."""
    from tasks import nvml_util
    from tasks.timing import steady_loop

    from sweeper.analysis.gpu_state import loop_state, state_words

    run_loop = partial(steady_loop, made(ctx.step, "the compiled step"), ctx.measure["steady_loop_s"], ctx.device)
    if ctx.device != "cuda":
        return Steady(run_loop(), {"util_pct": None, "reason": nvml_util.NO_GPU_REASON})
    reader = nvml_util.GpuStateReader()
    with reader as read:
        loop, nvml = nvml_util.utilization_during(partial(run_loop, state=read if reader.handle else None))
    util = nvml.get("util_pct")
    say(f"NVML utilization {'not read' if util is None else f'{util:.1f}%'} over {loop['loop_s']} s")
    state = loop_state(loop.get("gpu_rounds") or [], loop["chunk_step_ms"])
    if state:
        loop["gpu_state"] = state
        if "step_ms_not_slowed" in state:  # the figure is the stretches the GPU ran at its clocks
            loop["step_ms_all"], loop["step_ms"] = loop["step_ms"], state["step_ms_not_slowed"]
        say(f"GPU state: {state_words(state)}")
    elif reader.reason:
        loop["gpu_state"] = {"reason": reader.reason}
    return Steady(loop, nvml)


def accuracy(ctx: JobContext) -> Accuracy:
    """The compiled step against eager (tasks/accuracy.py), into the record; a check that
    cannot run (out of memory for its float64 copy) says why and costs the job nothing."""
    from tasks.accuracy import check

    workload = made(ctx.workload, "the workload")
    try:
        got = check(workload, made(ctx.compiled, "the compiled forward"), ctx.cfg["model"], bool(ctx.cfg["cudagraphs"]))
    except Exception as e:  # noqa: BLE001 - the job's figures stand without the check
        got = {"checked": False, "passed": None, "reason": ctx.failure(e)}
    if got["checked"]:
        say(f"accuracy against eager: {'passed' if got['passed'] else 'FAILED'} at tolerance {got['tolerance']:g}"
            + ("" if got["passed"] else f" ({got['failed_count']} of {got['compared']} tensors: {', '.join(got['failed'][:2])})"))
    else:
        say(f"accuracy not checked: {got['reason']}")
    if ctx.device == "cuda":
        import torch

        torch.cuda.empty_cache()
    return Accuracy(got)
