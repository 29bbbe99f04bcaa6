"""The job's later phases (tasks/phases.py has the earlier ones): each compiled module timed
in rounds taken in turn, then the profiles of the step and of each module, then the
microbenchmarks of the kernels that matter."""

from __future__ import annotations

import copy
from functools import partial

from tasks.job_context import JobContext, made, say
from tasks.phase_results import (Compiled, MicrobenchReady, Microbench, ModulesProfiled, ModulesTimed, Roofs, Setup,
                                 StepProfile, Steady, Timed, WarmedUp)

# Under CUDA graphs the wrapper's own call() records a new graph for inputs at new
# addresses: on an H200 a resnet18 forward took 2 s a call that way. The module view is
# the same code as the cudagraphs=off job's; the step view includes the graphs.
_GRAPHS_NOTE = "module view not taken under cudagraphs=on: see the same job with cudagraphs=off (same wrapper code)"


def time_modules(ctx: JobContext) -> ModulesTimed:
    from tasks.capture import copy_modules
    from tasks.modules_profile import ModuleRun, finish_timing, prepare_module, skipped_module, timing_round
    from tasks.module_thread import on_step_thread
    from tasks.timing import rounds_in_turn

    modules = made(ctx.capture, "the module capture").modules
    real_inputs = made(ctx.real_inputs, "the modules' real inputs").inputs
    copied = copy_modules(modules, ctx.job_dir / "modules")
    for m in modules:
        if ctx.cfg["cudagraphs"]:
            run = ModuleRun(skipped_module(m, _GRAPHS_NOTE))
        else:
            say(f"load module {m.label()}")
            run = ModuleRun(skipped_module(m, ""))
            run = ctx.on_module_thread(run, partial(prepare_module, m, ctx.device,
                                                    real_inputs.pop(m.path, None)))
        run.entry["artifact"] = copied[m.label()]
        ctx.modules.append(run)
    timed = [r for r in ctx.modules if r.call is not None]
    if timed:
        measure = ctx.measure
        say(f"time {len(timed)} modules in turn, {measure['module_span_s']:g} s or more")
        rounds, failed = rounds_in_turn(
            {r.entry["label"]: partial(on_step_thread, r.entry["role"], partial(timing_round, r, ctx.device, measure),
                                       ctx.device) for r in timed},
            measure["module_min_rounds"], measure["module_rounds"], measure["module_span_s"])
        for r in timed:
            label = r.entry["label"]
            if label in failed:
                r.fail("module run", ctx.failure(failed[label]))
            else:
                ctx.on_module_thread(r, partial(finish_timing, r, rounds[label], ctx.device, measure))
    ctx.real_inputs = None  # the captured inputs' memory
    return ModulesTimed(copied)


def profile_step(ctx: JobContext) -> StepProfile:
    from tasks.profiling import analyse, link_call, model_code, profile_calls

    steps = ctx.measure["profile_steps"]
    trace = ctx.job_dir / "traces" / "step.json.gz"
    compiled = made(ctx.step, "the compiled step")
    events = profile_calls(compiled, steps, ctx.device, "sweeper.step", trace)
    # Which op launched each library kernel: one more step traced with its host ops (after
    # the timed profile, never timed). Under CUDA graphs no op launches a kernel of the
    # graph: the link would say nothing.
    linked = link_call(compiled, ctx.device, "sweeper.step") if not ctx.cfg["cudagraphs"] else None
    steady = ctx.has(Steady)
    step = analyse(events, ctx.device, "sweeper.step", steps, ctx.got(Timed).compiled_step_ms["median"],
                   busy_wall_ms=steady.loop.get("step_ms") if steady is not None else None)
    sites = launch_sites(ctx)
    code, kernels, placed = model_code(events, ctx.device, "sweeper.step", step, sites, trace, linked=linked)
    said = {**code, "tags": ctx.got(Setup).resolved.get("module_tags"), "graphs": compiled_graphs(ctx)}
    say(model_code_line(code))
    line = None
    if ctx.has(Roofs) is not None:
        line = roofline(kernels, placed, step["device_ms"], ctx)
        say(f"roofline: {line['known_ms']:.2f} of the step's {line['device_ms']:.2f} ms of kernel time bounded; "
            f"{line['recoverable_ms']:.2f} ms above the roofs")
    return StepProfile(step, str(trace), said, line)


def model_code_line(code: dict) -> str:
    """The log's line on model code, with both of the report's figures and what each is of:
    the share of all the step's kernel time placed, and of the time inside compiled graphs
    (the jobs table's model_code_pct), then what the rest outside the graphs is."""
    from sweeper.analysis.attribution import OUTSIDE

    outside = (code.get("unattributed") or {}).get(OUTSIDE, 0.0)
    inside = code["device_ms"] - outside
    line = (f"model code: {code['attributed_pct'] or 0:.1f}% of the step's kernel time placed on "
            f"{len({r['module'] for r in code['rows']})} modules")
    if outside > 0 and inside > 0:
        parts = code.get("outside") or {}
        what = max(parts.items(), key=lambda kv: kv[1])[0] if parts else None
        line += (f" ({code['attributed_ms'] / inside * 100:.1f}% of the time inside compiled graphs; outside them "
                 f"{outside:.2f} ms" + (f", mostly {what}" if what else "") + ")")
    return line


def measure_roofs(ctx: JobContext) -> Roofs:
    """The device's copy bandwidth and matmul peaks (tasks/roofs.py): kept on the node per
    user, so measured by the first job of a device model and build, and again by a job
    that finds the host idler than when they were measured."""
    from tasks import roofs

    got = roofs.roofs(ctx.device)
    peaks = ", ".join(f"{d} {v:.1f}" for d, v in got["matmul_tflops"].items())
    load = (f"; measured with {got['load']:g} {got['load_unit']} of other work: below this device's ceiling, "
            f"measured again by a job that finds it idler" if got["loaded"] else "")
    say(f"roofs ({'kept from an earlier job' if got['reused'] else 'measured'}): "
        f"copy {got['copy_gbps']:.0f} GB/s; matmul TFLOP/s {peaks}{load}")
    return Roofs(got)


def roofline(kernels: list, placed, device_ms: float, ctx: JobContext) -> dict:
    """The record's `roofline` part (sweeper/analysis/roofline.py): every launch site of the
    profiled step against the device's roofs, its work from the tags and Inductor's estimates
    in the compiled modules' code."""
    from pathlib import Path

    from sweeper.analysis import roofline as rl

    work: dict = {}
    for m in made(ctx.capture, "the module capture").modules:
        try:
            work.update(rl.kernel_work(Path(m.path).read_text()))
        except OSError:
            continue
    measured = ctx.got(Roofs).roofs
    roofs = {k: measured.get(k) for k in ("copy_gbps", "matmul_tflops", "key", "reused", "load", "load_unit", "loaded")}
    return rl.summary(rl.launch_rows(kernels, placed, work, roofs), device_ms, roofs)


def launch_sites(ctx: JobContext, only: str | None = None) -> list:
    """Each compiled module's launch sites (sweeper/analysis/attribution.py), the model's
    module names fitted; `only`: the one module of that path."""
    from pathlib import Path

    from sweeper.analysis.launch_sites import sites_of, with_known_paths

    workload = made(ctx.workload, "the workload")
    known = {name for name, _ in workload.model.named_modules()}
    out = []
    for m in made(ctx.capture, "the module capture").modules:
        if only is not None and m.path != only:
            continue
        try:
            source = Path(m.path).read_text()
        except OSError:
            source = ""
        out.append(with_known_paths(sites_of(source, m.stack_traces or {}), known))
    return out


def profile_modules(ctx: JobContext) -> ModulesProfiled:
    from tasks.kernel_table import kernel_table
    from tasks.modules_profile import profile_module

    entries, traces = [], {}
    for run in ctx.modules:
        label = run.entry["label"]
        say(f"profile module {label}")
        trace = ctx.job_dir / "traces" / f"{label}.json.gz"
        sites = launch_sites(ctx, only=run.entry["source_path"])
        ctx.on_module_thread(run, partial(profile_module, run, ctx.device, ctx.measure, trace, sites[0] if sites else None),
                             what="module profile")
        entries.append(run.entry)
        if run.entry.get("trace"):
            traces[label] = run.entry["trace"]
    step = ctx.has(StepProfile)  # the kernels that matter, from the step's profile and the modules'
    table = kernel_table({"step": step.step if step is not None else None, "modules": entries}, ctx.device,
                         made(ctx.capture, "the module capture").modules)
    return ModulesProfiled(entries, traces, table)


def wants_microbench(ctx: JobContext) -> bool:
    return ctx.device == "cuda" and ctx.measure["microbench"] and bool(ctx.got(ModulesProfiled).kernel_table["rows"])


def _kernel_table(ctx: JobContext) -> dict:
    """The kernel table as the phase before left it: a copy, which this phase fills."""
    ready = ctx.has(MicrobenchReady)
    return copy.deepcopy(ready.kernel_table if ready is not None else ctx.got(ModulesProfiled).kernel_table)


def _microbench_budget(ctx: JobContext) -> float | None:
    """Seconds for the microbenchmarks, preparation and timing together: a share of the
    compile's seconds (measure.microbench_budget_pct). A compile loaded from the compile
    store counts as long as the cold one it came from, so that a warm job measures as many
    kernels as the cold one did."""
    from tasks.phase_results import CompileSeed
    from tasks.phases_compile import cold_compile_s

    pct = ctx.measure["microbench_budget_pct"] or 0
    compiled, warmup_s = ctx.got(Compiled), ctx.got(WarmedUp).warmup_s
    basis = cold_compile_s(compiled, warmup_s, ctx.has(CompileSeed)) or compiled.compile_s + warmup_s
    return pct / 100 * basis if pct > 0 else None


def prepare_microbench(ctx: JobContext) -> MicrobenchReady:
    """The microbenchmarks' CPU half, without the GPU's lease: each kernel file loaded
    afresh and the candidate configs compiled (tasks/kernel_bench.prepare)."""
    from tasks import kernel_bench
    from tasks.kernel_table import kernel_objects

    table = _kernel_table(ctx)
    say(f"prepare {len(table['rows'])} kernels for their microbenchmarks")
    try:
        modules = made(ctx.capture, "the module capture").modules
        ctx.microbench_ready = kernel_bench.prepare(table, kernel_objects(modules), _microbench_budget(ctx))
    except Exception as e:  # noqa: BLE001 - the breakdown stands without the microbenchmarks
        table["error"] = f"microbenchmarks failed: {ctx.failure(e)}"
    return MicrobenchReady(table)


def microbench(ctx: JobContext) -> Microbench:
    """Standalone benchmarks of the kernels that matter, on what prepare_microbench readied,
    within what is left of the budget (_microbench_budget); the breakdown stands without them."""
    from sweeper.analysis import kernels as mb
    from tasks import kernel_bench

    table = _kernel_table(ctx)
    ready, ctx.microbench_ready = ctx.microbench_ready, None  # the readied kernels' memory, once timed
    if ready is not None:
        say(f"microbenchmark {len(ready)} kernels")
        try:
            kernel_bench.run(table, ready, _microbench_budget(ctx), table.get("prepare_s") or 0.0)
        except Exception as e:  # noqa: BLE001
            table["error"] = f"microbenchmarks failed: {ctx.failure(e)}"
    say(mb.microbench_outcome(table))
    return Microbench(table)


def compiled_graphs(ctx: JobContext) -> dict:
    """What the step compiled into: dynamo's graphs, the compiled modules by role, each
    graph break with its reason and model source line, and the recompiles (a frame
    compiled again after a guard failed: its compile id's second number above 0)."""
    from collections import Counter

    from sweeper.analysis.graph_breaks import graph_breaks
    from sweeper.torch_internals.probes import dynamo_counters

    capture = made(ctx.capture, "the module capture")
    recompiled = sorted({f"{m.frame_id}/{m.frame_compile_id}" for m in capture.modules if m.frame_compile_id})
    return {**dynamo_counters(), "modules": dict(Counter(m.role for m in capture.modules)),
            "graph_breaks": graph_breaks(capture.graph_breaks), "recompiles": len(recompiled),
            "recompiled_frames": recompiled}
