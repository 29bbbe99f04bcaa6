"""One job, end to end, in a fresh process:  python -m tasks.job <job_dir>

Reads <job_dir>/job.json (written by the launcher), runs the chain, writes
<job_dir>/result.json. Each phase prints a "[sweeper] phase ..." line, which the launcher
relays as progress, so that a long compile never looks like a hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import traceback
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from sweeper.launch import PHASE_MARK
from sweeper.record import cache_env, new_record, write_record
from tasks.gc_watch import GcWatch, set_pause
from tasks.host_load import HostLoad


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def say(msg: str) -> None:
    print(f"{PHASE_MARK} {msg}", flush=True)


def prepare_process(cfg: dict, job_dir: Path) -> Path:
    """Environment that Inductor and Triton read at import: must run before torch loads.
    The cache folders are the job's own, so concurrent jobs never share temp paths."""
    root = job_dir / "cache"
    if cfg.get("cache_root"):
        root = Path(cfg["cache_root"]) / f"{job_dir.parent.name}-{job_dir.name}"
    os.environ.update(cache_env(root))
    os.environ["TORCHINDUCTOR_BENCHMARK_KERNEL"] = "1"  # get_args()/kernel harnesses
    os.environ["TORCHINDUCTOR_UNIQUE_KERNEL_NAMES"] = "1"  # triton_poi_/red_/per_ names
    os.environ["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"  # C++ kernels in CPU traces
    return root


def compile_mode(autotune: bool, cudagraphs: bool) -> str:
    """torch.compile's own mode names for the variant, so a user can repeat it by hand."""
    if autotune:
        return "max-autotune" if cudagraphs else "max-autotune-no-cudagraphs"
    return "reduce-overhead" if cudagraphs else "default"


class Skip(Exception):
    """The combination cannot run here (not a failure): recorded as skipped."""


def run(spec: dict, job_dir: Path) -> dict:
    cfg = spec["config"]
    started = time.time()
    record = new_record(spec, job_dir)
    record["job"]["started_at"] = _now()
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):  # set by prepare_process(): the job's caches
        record["artifacts"]["cache"] = str(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).parent)
    phase_started = time.time()
    gc_watch = GcWatch().install()
    host = HostLoad()
    host.enter(record["phase"])

    def phase(name: str) -> None:
        nonlocal phase_started
        now = time.time()
        record["timings"]["phase_s"][record["phase"]] = round(now - phase_started, 3)
        record["phase"], phase_started = name, now
        gc_watch.phase = name
        host.enter(name)
        say(f"phase {name}")

    try:
        _chain(cfg, job_dir, record, phase)
        phase("done")
        record["status"] = "ok"
    except Skip as e:
        record["status"], record["reason"] = "skipped", str(e)
        say(f"skipped: {e}")
    except Exception as e:  # noqa: BLE001 - every failure becomes the job's status
        record["status"], record["reason"] = "failed", _reason(e, cfg)
        traceback.print_exc()
        say(f"failed in phase {record['phase']}: {record['reason']}")
    finally:
        gc_watch.uninstall()
        record["timings"]["gc"] = gc_watch.report()
        host.enter("end")
        record["timings"]["host_busy_cores"] = host.report()
        record["job"]["finished_at"] = _now()
        record["job"]["duration_s"] = round(time.time() - started, 3)
    return record


def _on_module_thread(role: str, fn, device: str, entry: dict, cfg: dict, what: str = "module run") -> dict:
    """fn() on the thread where the step runs modules of `role` (tasks/module_thread.py);
    if it raises, `entry` is marked failed with the reason and returned instead: one
    module's failure is noted, not fatal to the job."""
    from tasks.module_thread import on_step_thread

    try:
        return on_step_thread(role, fn, device)
    except Exception as e:  # noqa: BLE001
        return _module_failed(entry, what, e, cfg)


def _module_failed(entry: dict, what: str, e: Exception, cfg: dict) -> dict:
    entry.pop("_call", None)
    entry.update(status="failed", note=f"{what} failed: {_reason(e, cfg)}")
    return entry


def _pct(value: float | None) -> str:
    return "not read" if value is None else f"{value:.1f}%"


def _reason(e: Exception, cfg: dict) -> str:
    import torch

    if isinstance(e, torch.OutOfMemoryError):
        return f"out of GPU memory at batch size {cfg.get('batch_size')}: {str(e).splitlines()[0]}"
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}"[:500]


def _chain(cfg: dict, job_dir: Path, record: dict, phase) -> None:
    import torch
    import torch._inductor.config as inductor_config

    from sweeper.models import check_model_name, default_batch_size
    from tasks import environment
    from tasks.capture import InputCapture, ModuleCapture, copy_modules
    from tasks.module_thread import on_step_thread
    from tasks.modules_profile import finish_timing, prepare_module, profile_module, skipped_module, timing_round
    from tasks.profiling import analyse, profile_calls
    from tasks.timing import (launch_probe_us, peak_memory_mb, peak_memory_reset, rounds_in_turn, steady_loop,
                              synchronize, time_calls)
    from tasks.workload import build_workload, resolve_amp_dtype
    from sweeper.breakdown import spread

    phase("setup")
    set_pause(cfg["measure"].get("pause_gc", True))
    _inject_fault(cfg.get("debug_fault"))
    device = cfg["device"]
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device=cuda but this machine has no usable CUDA GPU; use device=auto or device=cpu")
    record["environment"] = environment.describe(device)
    if cfg["cudagraphs"] and device != "cuda":
        raise Skip("cudagraphs=on needs a CUDA device; this job runs on the CPU")
    check_model_name(cfg["model"])
    batch = cfg.get("batch_size") or default_batch_size(cfg["model"], device)
    training = cfg["mode"] == "training"
    amp_dtype = resolve_amp_dtype(cfg["amp"], cfg["amp_dtype"], device)
    mode = compile_mode(cfg["autotune"], cfg["cudagraphs"])
    measure = cfg["measure"]

    inductor_config.benchmark_kernel = True
    inductor_config.triton.unique_kernel_names = True
    inductor_config.cpp.enable_kernel_profile = True
    if cfg.get("inductor"):  # the user's extra options (checked by the driver already)
        from sweeper import inductor_options

        options = inductor_options.flatten(cfg["inductor"])
        inductor_options.apply(options)
        record["config"]["inductor_applied"] = inductor_options.current(options)
    record["config"].update(
        device=device,
        batch_size=batch,
        amp_dtype=str(amp_dtype).replace("torch.", "") if amp_dtype else None,
        compile_mode=mode,
        inductor_options=torch._inductor.list_mode_options(mode) if mode != "default" else {},
        optimizer_step_compiled=False,
    )
    say(f"model={cfg['model']} device={device} batch={batch} mode={cfg['mode']} compile_mode={mode}")

    phase("build")
    w = build_workload(cfg["model"], batch, cfg.get("image_size"), training, amp_dtype, device, cfg.get("seed", 0))
    record["config"]["image_size"] = w.image_size
    timings = record["timings"]

    if measure["eager"]:
        phase("eager")
        eager_step = w.make_step(w.forward_fn())
        for _ in range(2):
            eager_step()
        peak_memory_reset(device)
        timings["eager_step_ms"] = spread(time_calls(eager_step, measure["timed_steps"], device))
        timings["eager_peak_memory_mb"] = peak_memory_mb(device)

    store = cfg.get("autotune_store") if cfg["autotune"] else None
    if store:  # max-autotune results of earlier jobs on this node (tasks/autotune_store.py)
        from tasks import autotune_store

        inductor_cache = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])  # prepare_process() set it
        timings["autotune_store"] = autotune_store.seed(Path(store), inductor_cache)
        say(f"autotune store {store}: {timings['autotune_store']['seeded_entries']} timed choices from earlier jobs")

    phase("compile")
    torch._dynamo.reset()
    compiled = torch.compile(w.forward_fn(), mode=None if mode == "default" else mode)
    step = w.make_step(compiled)
    if cfg["cudagraphs"]:
        inner = step

        def step():  # cudagraph trees need each step marked, or outputs get overwritten
            torch.compiler.cudagraph_mark_step_begin()
            return inner()

    capture = ModuleCapture()
    with capture:
        t0 = time.time()
        with heartbeat(t0):
            step()
            synchronize(device)
        timings["compile_s"] = round(time.time() - t0, 3)  # first call, compile included
        timings["compile_split_s"] = compile_split(timings["compile_s"])
        phase("warmup")
        t0 = time.time()
        for _ in range(measure["warmup_steps"]):
            step()
        synchronize(device)
        timings["warmup_s"] = round(time.time() - t0, 3)
    if store:  # every autotuning is done by now (the backward compiles at the first step)
        timings["autotune_store"].update(autotune_store.publish(Path(store), inductor_cache))
    if not capture.modules:
        raise RuntimeError("no compiled module was captured: Inductor produced no wrapper code")
    with InputCapture(capture.modules) as real_inputs:
        step()  # one more warm-up step, keeping a copy of each module's real inputs
        synchronize(device)

    phase("timing")
    peak_memory_reset(device)
    timings["launch_us"] = spread([launch_probe_us(device) for _ in range(5)])  # the host's launch speed now
    timings["compiled_step_ms"] = spread(time_calls(step, measure["timed_steps"], device))
    timings["peak_memory_mb"] = peak_memory_mb(device)
    if "eager_step_ms" in timings:
        timings["speedup"] = timings["eager_step_ms"]["median"] / timings["compiled_step_ms"]["median"]

    if measure["steady_loop_s"] > 0:
        # the unprofiled step over seconds: the busy figure's divisor, and NVML's window
        phase("steady_loop")
        from tasks import nvml_util

        run_loop = partial(steady_loop, step, measure["steady_loop_s"], device)
        if device == "cuda":
            timings["steady_loop"], timings["nvml"] = nvml_util.utilization_during(run_loop)
            say(f"NVML utilization {_pct(timings['nvml'].get('util_pct'))} over {timings['steady_loop']['loop_s']} s")
        else:
            timings["steady_loop"], timings["nvml"] = run_loop(), {"util_pct": None, "reason": nvml_util.NO_GPU_REASON}
    else:
        timings["nvml"] = {"util_pct": None, "reason": "measure.steady_loop_s=0: no steady loop to read it over"}

    phase("time_modules")  # every unprofiled measurement comes before any profile
    record["artifacts"]["modules"] = copy_modules(capture.modules, job_dir / "modules")
    entries = []
    for m in capture.modules:
        if cfg["cudagraphs"]:
            # Under CUDA graphs the wrapper's own call() records a new graph for inputs
            # at new addresses: on an H200 a resnet18 forward took 2 s a call that way.
            # The module view is the same code as the cudagraphs=off job's; the step
            # view above includes the graphs.
            entry = skipped_module(m, "module view not taken under cudagraphs=on: see the "
                                      "same job with cudagraphs=off (same wrapper code)")
        else:
            say(f"load module {m.label()}")
            entry = _on_module_thread(m.role, partial(prepare_module, m, device, real_inputs.inputs.pop(m.path, None)),
                                      device, skipped_module(m, ""), cfg)
        entry["artifact"] = record["artifacts"]["modules"][m.label()]
        entries.append(entry)
    timed = [e for e in entries if "_call" in e]
    if timed:
        say(f"time {len(timed)} modules in turn, {measure['module_span_s']:g} s or more")
        rounds, failed = rounds_in_turn(
            {e["label"]: partial(on_step_thread, e["role"], partial(timing_round, e, device, measure), device)
             for e in timed},
            measure["module_min_rounds"], measure["module_rounds"], measure["module_span_s"])
        for e in timed:
            if e["label"] in failed:
                _module_failed(e, "module run", failed[e["label"]], cfg)
            else:
                _on_module_thread(e["role"], partial(finish_timing, e, rounds[e["label"]], device, measure),
                                  device, e, cfg)
    del real_inputs

    phase("profile_step")
    trace = job_dir / "traces" / "step.json.gz"
    events = profile_calls(step, measure["profile_steps"], device, "sweeper.step", trace)
    record["step"] = analyse(events, device, "sweeper.step", measure["profile_steps"],
                             timings["compiled_step_ms"]["median"],
                             busy_wall_ms=(timings.get("steady_loop") or {}).get("step_ms"))
    record["artifacts"]["traces"]["step"] = str(trace)
    del events

    phase("profile_modules")
    for entry in entries:
        say(f"profile module {entry['label']}")
        trace = job_dir / "traces" / f"{entry['label']}.json.gz"
        _on_module_thread(entry["role"], partial(profile_module, entry, device, measure, trace), device, entry, cfg,
                          what="module profile")
        record["modules"].append(entry)
        if entry.get("trace"):
            record["artifacts"]["traces"][entry["label"]] = entry["trace"]

    from tasks import microbench

    record["kernel_table"] = microbench.kernel_table(record, device, capture.modules)
    if device == "cuda" and measure.get("microbench", True) and record["kernel_table"]["rows"]:
        phase("microbench")
        say(f"microbenchmark {len(record['kernel_table']['rows'])} kernels")
        try:
            pct = measure.get("microbench_budget_pct") or 0
            budget = pct / 100 * (timings["compile_s"] + timings["warmup_s"]) if pct > 0 else None
            microbench.run(record["kernel_table"], microbench.kernel_objects(capture.modules), budget)
        except Exception as e:  # noqa: BLE001 - the breakdown stands without it
            record["kernel_table"]["error"] = f"microbenchmarks failed: {_reason(e, cfg)}"


@contextlib.contextmanager
def heartbeat(t0: float):
    """A line every SWEEPER_HEARTBEAT_S seconds (60) while the first step compiles, so that
    a 10-minute max-autotune compile does not look hung in the sweep's output."""
    from torch._dynamo.utils import compilation_time_metrics as metrics

    every_s = float(os.environ.get("SWEEPER_HEARTBEAT_S", "60"))
    stop = threading.Event()

    def beat():
        while not stop.wait(every_s):
            tuned = sum(len(v) for k, v in list(metrics.items()) if k.endswith("_template_autotuning"))
            say(f"still compiling: {time.time() - t0:.0f} s, {tuned} autotuned choices so far")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def compile_split(compile_s: float) -> dict:
    """The first step's seconds by kind, from Inductor's own timers (dynamo_timed):
    template autotuning (max-autotune's benchmarking of mm/conv choices), compiling those
    choices, Triton kernels' runtime autotuning, and the rest. Parts may overlap where
    Inductor runs them in threads, so `rest_s` is floored at 0."""
    from torch._dynamo.utils import compilation_time_metrics as metrics

    def total(match) -> float:
        return round(sum(sum(v) for k, v in list(metrics.items()) if match(k)), 3)

    split = {
        "template_autotuning_s": total(lambda k: k.endswith("_template_autotuning")),
        "template_precompiling_s": total(lambda k: k.endswith("_template_precompiling")),
        "kernel_autotuning_s": total(lambda k: k == "CachingAutotuner.benchmark_all_configs"),
    }
    split["rest_s"] = round(max(0.0, compile_s - sum(split.values())), 3)
    return split


def _inject_fault(fault: str | None) -> None:
    if not fault:
        return
    say(f"injecting fault {fault!r} (debug_fault)")
    if fault == "crash":
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)
    elif fault == "hang":
        time.sleep(10**6)
    elif fault == "raise":
        raise RuntimeError("injected fault (debug_fault=raise)")
    else:
        raise ValueError(f"debug_fault={fault!r}: use crash, hang or raise")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tasks.job <job_dir>", file=sys.stderr)
        return 2
    job_dir = Path(argv[1]).resolve()
    spec = json.loads((job_dir / "job.json").read_text())
    prepare_process(spec["config"], job_dir)
    record = run(spec, job_dir)
    write_record(job_dir, record)
    say(f"status {record['status']}")
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # The record is written: skip the interpreter's teardown (torch, Inductor's compile
    # worker pool), about 1.5 s a job on a 2-core machine. The launcher kills whatever
    # is left in the job's process group.
    os._exit(code)
