"""The job's compile and warm-up (tasks/phases.py has the phases around them): the stores'
seeds in before the compile (tasks/job_stores.py), the first compiled step with every
compiled module captured, then the warm-up steps, after which every graph is compiled and
the job's autotuning and compile go out to the stores; and what a long compile says of
itself while it runs."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from sweeper.inductor_options import tunes_templates
from sweeper.job_spec import AutotuneSeed
from sweeper.stores import autotune_store, compile_store
from sweeper.torch_internals import compile_cache, probes
from sweeper.torch_internals.benchmark_lease import record_tuned_ops
from sweeper.torch_internals.tuned_launch import TunedLaunch, reused_tuned_configs
from tasks import cpu_libraries, job_stores
from tasks.job_context import JobContext, made, say
from tasks.phase_results import AutotuneSeeded, CompileSeed, Compiled, Environment, Setup, WarmedUp


def compile_step(ctx: JobContext) -> Compiled:
    """The first compiled step, compile included, with every compiled module captured."""
    import torch

    from tasks.capture import ModuleCapture
    from tasks.timing import synchronize

    if autotune_store.shared_by(ctx.cfg):  # max-autotune results of earlier jobs, from the driver
        seed_autotune_store(ctx)
    if compile_store.shared_by(ctx.cfg):  # an earlier run of this very job compiled it: load, not compile
        got = job_stores.seed_compile(ctx.spec.compile_seed, ctx.job_dir, inductor_cache(), torch.__version__)
        ctx.keep(CompileSeed(got))
        if got["loaded"]:
            say(f"compile store {got['store']}: an earlier run's compile of this job ({got['bytes'] / 1e6:.1f} MB) loaded")
    if tunes_templates(ctx.cfg):  # the ops it selects for, seeded ones too: the decisions behind its choices
        ctx.tuned_ops = record_tuned_ops()
    isa_probes = _host_probes(cpu_libraries.probes_into)  # the host's instruction-set probes, not run again
    compile_cache.reset_dynamo()
    # a kernel whose coordinate-descent config is cached (seeded, or a loaded compile's) uses it
    tuned = ctx.tuned = ctx.patches.enter_context(reused_tuned_configs())
    mode = ctx.got(Setup).resolved["compile_mode"]
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
    compile_s = round(time.time() - t0, 3)
    kept = _host_probes(cpu_libraries.keep_probes)
    return Compiled(compile_s, probes.compile_split(compile_s), probes.compile_timers(),
                    probes.compile_cache_counters(), tuned.reused if tuned.installed else None,
                    tuned.renamed if tuned.installed else None,
                    # a job with C++ kernels: how many probes it was given, how many it left the host
                    {"from_host": isa_probes, "kept": kept, "folder": str(cpu_libraries.PROBES)}
                    if isa_probes or kept else None,
                    _compile_benchmarks(ctx))


def _compile_benchmarks(ctx: JobContext) -> dict | None:
    """What the compile benchmarked (its kernels' configs at their first launch, under the GPU
    lease), None for nothing; said when the compile came from the store, where it should be
    nothing: the reasons say why a kernel did not take its cold run's pick."""
    tuned = ctx.tuned or TunedLaunch()
    got: dict[str, Any] = {"by_caller": dict(ctx.benchmarks.by_caller) if ctx.benchmarks else {},
                           "not_reused": dict(tuned.not_reused), "kernels": list(tuned.kernels)}
    if not (got["by_caller"] or got["not_reused"]):
        return None
    kernels = sum(got["not_reused"].values())
    seed = ctx.has(CompileSeed)
    if kernels and seed is not None and seed.store.get("loaded"):
        why = "; ".join(f"{n} {reason}" for reason, n in sorted(got["not_reused"].items(), key=lambda kv: -kv[1]))
        say(f"{kernels} kernels of the loaded compile benchmarked their configs at their first launch ({why})")
    return got


def _host_probes(step: Callable[[Path, str], int]) -> int | str:
    """cpu_libraries.probes_into or keep_probes on this job's cache; a folder that cannot be
    read or written costs the probes' time, never the job (the reason in its place)."""
    try:
        return step(inductor_cache(), torch_version())
    except OSError as e:
        return f"{type(e).__name__}: {e}"


def warmup(ctx: JobContext) -> WarmedUp:
    from tasks.capture import InputCapture
    from tasks.timing import synchronize

    step, capture = made(ctx.step, "the compiled step"), made(ctx.capture, "the module capture")
    t0 = time.time()
    for _ in range(ctx.measure["warmup_steps"]):
        step()
    synchronize(ctx.device)
    warmup_s = round(time.time() - t0, 3)
    ctx.stack.close()  # the module capture ends with the warm-up: the backward compiles at the first step
    if autotune_store.shared_by(ctx.cfg):  # every autotuning is done by now: the entries go back to the driver
        checkpoint = made(ctx.checkpoint, "the autotune checkpoint")
        checkpoint.stop()
        store = made(ctx.autotune_store, "the autotune store's counts")
        store.update(job_stores.write_autotune_entries(ctx.job_dir, inductor_cache(), torch_version(), probes.system_hash()))
        store["partial"], store["checkpoints"] = False, checkpoint.writes
        store["kernel_config_hits"] = probes.kernel_config_hits()
    decisions = None
    if tunes_templates(ctx.cfg):  # max-autotune, or its templates alone (+inductor.max_autotune_gemm=true)
        decisions = job_stores.autotune_decisions(inductor_cache(), probes.system_hash(), ctx.spec.autotune_seed,
                                                  ctx.tuned_ops)
    stored = None
    if compile_store.shared_by(ctx.cfg):  # every graph is compiled by now: the job's compile goes back too
        seed = ctx.has(CompileSeed)
        stored = dict(seed.store) if seed is not None else {}
        compiled = ctx.got(Compiled)
        if compiled.warm and not compiled_anything():
            stored["job_bytes"] = stored.get("bytes")  # all of it came from the store, which keeps it as it is
        else:
            environment = ctx.has(Environment)
            stored["job_bytes"] = job_stores.write_compile_blob(
                ctx.job_dir, inductor_cache(), torch_version(), (environment.environment if environment else {}).get("gpu"),
                cold_compile_s(compiled, warmup_s, seed))
    if not capture.modules:
        raise RuntimeError("no compiled module was captured: Inductor produced no wrapper code")
    with InputCapture(capture.modules) as real_inputs:
        step()  # one more warm-up step, keeping a copy of each module's real inputs
        synchronize(ctx.device)
    ctx.real_inputs = real_inputs
    return WarmedUp(warmup_s, decisions, stored)


def seed_autotune_store(ctx: JobContext) -> None:
    """The store's timings and kernel configs into the job's cache, then the checkpoint
    thread that keeps what this job tunes, from now on, in its folder (partial)."""
    import torch

    from tasks.autotune_checkpoint import AutotuneCheckpoint

    seed = ctx.spec.autotune_seed or AutotuneSeed(notes=("no store entries came with the job (not started by the launcher)",))
    mode = ctx.got(Setup).resolved["compile_mode"]
    coordesc = bool(probes.mode_options(mode).get("coordinate_descent_tuning")
                    or probes.inductor_config().coordinate_descent_tuning)
    system = probes.system_hash()
    got = job_stores.seed_autotune(seed, inductor_cache(), torch.__version__, system, coordesc)
    attempts = ctx.spec.earlier_attempts
    if attempts:  # this job was stopped before: the record sets what those runs gave beside this one
        got["earlier_attempts"] = attempts
    ctx.autotune_store = got
    ctx.keep(AutotuneSeeded(got))
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


def cold_compile_s(compiled: Compiled, warmup_s: float, seed: CompileSeed | None) -> float | None:
    """Seconds of this job's compile and warm-up when compiled cold: its own, or, when it
    loaded an earlier run's compile, that run's (kept with it in the compile store)."""
    if compiled.warm:
        return (seed.store if seed is not None else {}).get("cold_compile_s")
    return round(compiled.compile_s + warmup_s, 3)


def heartbeat_line(phase: str, seconds: float, store: Mapping | None = None, tuned: TunedLaunch | None = None) -> str:
    """What a phase that runs long says it is doing (tasks/job.PhaseClock's heartbeat);
    `store`: the autotune store's counts, for what came from the store; `tuned`: the
    kernels launched with a stored config so far."""
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
    if phase == "time_modules":
        from tasks.timing import rounds_progress

        progress = rounds_progress()  # a loaded host's slow calls make this phase long: say how far it is
        if progress:
            return f"still in phase {phase}: {seconds:.0f} s; {progress}"
    return f"still in phase {phase}: {seconds:.0f} s"


def _from_store(store: Mapping | None, tuned: TunedLaunch | None) -> str:
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
