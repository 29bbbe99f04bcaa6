"""One job, end to end, in a fresh process:  python -m tasks.job <job_dir>

Reads <job_dir>/job.json (written by the launcher), runs the chain of phases
(tasks/phases.py, phases_compile.py, phases_profile.py), makes the record from their
results (tasks/phase_results.py) and writes <job_dir>/result.json. Each phase prints
a "[sweeper] phase ..." line, which the launcher relays as progress, so that a long
compile never looks like a hang.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, NamedTuple

from sweeper.job_spec import JobSpec
from sweeper.record import Record, cache_env, new_record, write_record
from tasks import gpu_lease, phases, phases_compile, phases_profile
from tasks.gc_watch import GcWatch
from tasks.host_load import HostLoad
from tasks.job_context import JobContext, Skip, say
from tasks.phases_compile import heartbeat_line


class Phase(NamedTuple):
    name: str
    run: Callable[[JobContext], Any]  # returns the phase's result (tasks/phase_results.py)
    when: Callable[[JobContext], bool] = lambda ctx: True
    timed: bool = True  # times the GPU: runs holding the GPU's lease (tasks/gpu_lease.py)
    # its figures follow the host's launch speed: the other jobs of a packed GPU are paused
    # while it runs (sweeper/host_pause.py)
    alone: bool = False


# The chain, in order. The record's `phase` names the one a failed job stopped in. The
# compile holds the lease only for the benchmarks Inductor runs (phases.setup hooks them):
# the rest of it is CPU work, which jobs sharing a GPU do side by side.
PHASES = (
    Phase("setup", phases.setup, timed=False),
    Phase("build", phases.build, timed=False),
    Phase("eager", phases.eager, lambda ctx: ctx.measure["eager"], alone=True),
    Phase("compile", phases_compile.compile_step, timed=False),
    Phase("warmup", phases_compile.warmup),
    Phase("timing", phases.time_steps, alone=True),
    Phase("steady_loop", phases.steady, lambda ctx: ctx.measure["steady_loop_s"] > 0, alone=True),
    Phase("time_modules", phases_profile.time_modules, alone=True),
    Phase("roofs", phases_profile.measure_roofs, alone=True),
    Phase("profile_step", phases_profile.profile_step, alone=True),
    Phase("profile_modules", phases_profile.profile_modules, alone=True),
    # its CPU half first, without the lease, so that another job may time meanwhile
    Phase("microbench_prepare", phases_profile.prepare_microbench, phases_profile.wants_microbench, timed=False),
    Phase("microbench", phases_profile.microbench, phases_profile.wants_microbench),
    # last: its float64 copy of the model and its extra steps come after every measurement
    Phase("accuracy", phases.accuracy, lambda ctx: ctx.measure.get("accuracy", True)),
)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def prepare_process(cfg: dict, job_dir: Path) -> Path:
    """Environment that Inductor and Triton read at import: must run before torch loads.
    The cache folders are the job's own, so concurrent jobs never share temp paths."""
    root = job_dir / "cache"
    if cfg["cache_root"]:
        root = Path(cfg["cache_root"]) / f"{job_dir.parent.name}-{job_dir.name}"
    os.environ.update(cache_env(root))
    os.environ["TORCHINDUCTOR_BENCHMARK_KERNEL"] = "1"  # get_args()/kernel harnesses
    os.environ["TORCHINDUCTOR_UNIQUE_KERNEL_NAMES"] = "1"  # triton_poi_/red_/per_ names
    os.environ["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"  # C++ kernels in CPU traces
    return root


class PhaseClock:
    """Enters each phase: the seconds of the one before into the record, the phase's name
    into the record, the garbage-collection watch and the host-load sampler, and a
    progress line; and while a phase lasts, a line every 10 s for its first minute and
    every minute after (SWEEPER_HEARTBEAT_S sets the first interval), so that no phase of
    more than ten seconds looks hung (a compile says how many choices it autotuned)."""

    def __init__(self, record: Record, gc_watch: GcWatch, host: HostLoad, lease=None, ctx: JobContext | None = None) -> None:
        self.record, self.gc_watch, self.host, self.lease, self.ctx = record, gc_watch, host, lease, ctx
        self.started = time.time()
        host.enter(record["phase"])
        self._lock, self._stop = threading.Lock(), threading.Event()
        threading.Thread(target=self._heartbeat, daemon=True).start()

    def enter(self, name: str) -> None:
        now = time.time()
        with self._lock:  # the heartbeat reads phase and start together
            self.record["timings"]["phase_s"][self.record["phase"]] = round(now - self.started, 3)
            self.record["phase"], self.started = name, now
        self.gc_watch.phase = name
        self.host.enter(name)
        say(f"phase {name}")

    def stop(self) -> None:
        self._stop.set()

    def _heartbeat(self) -> None:
        first = float(os.environ.get("SWEEPER_HEARTBEAT_S", "10"))
        seen, next_at = None, first
        while not self._stop.wait(0.5):
            with self._lock:
                phase, took = self.record["phase"], time.time() - self.started
            if phase != seen:
                seen, next_at = phase, first
            if took >= next_at:
                waiting = self.lease.waiting_line() if self.lease is not None else None
                line = heartbeat_line(phase, took, self.ctx.autotune_store if self.ctx is not None else None,
                                      self.ctx.tuned if self.ctx is not None else None)
                say(f"{line}; {waiting}" if waiting else line)
                next_at += first if next_at < 60 else 60.0


def run(spec: JobSpec, job_dir: Path) -> Record:
    started = time.time()
    record = new_record(spec, job_dir)
    record["job"]["started_at"] = _now()
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):  # set by prepare_process(): the job's caches
        record["artifacts"]["cache"] = str(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).parent)
    lease = gpu_lease.from_spec(spec.gpu_lease, spec.job_id)
    gc_watch, host = GcWatch().install(), HostLoad()
    ctx = JobContext(spec, job_dir, lease=lease)
    clock = PhaseClock(record, gc_watch, host, lease, ctx)
    try:
        for phase in PHASES:
            if phase.when(ctx):
                if ctx.checkpoint is not None:  # what the phase before tuned, kept before the next
                    ctx.checkpoint.phase_entered(phase.name)
                clock.enter(phase.name)
                if lease is not None:
                    _take_lease(lease, phase)
                ctx.keep(phase.run(ctx))
        clock.enter("done")
        record["status"] = "ok"
    except Skip as e:
        record["status"], record["reason"] = "skipped", str(e)
        say(f"skipped: {e}")
    except Exception as e:  # noqa: BLE001 - every failure becomes the job's status
        record["status"], record["reason"] = "failed", ctx.failure(e)
        traceback.print_exc()
        say(f"failed in phase {record['phase']}: {record['reason']}")
    finally:
        clock.stop()
        if ctx.checkpoint is not None:
            _keep_partial_entries(ctx)
        assemble(record, ctx)
        if lease is not None:
            lease.end()
            record["timings"]["gpu_lease"] = lease.report()
        ctx.stack.close()
        ctx.patches.close()  # torch as it was: what the phases patched, put back
        gc_watch.uninstall()
        record["timings"]["gc"] = gc_watch.report()
        host.enter("end")
        record["timings"]["host_busy_cores"] = host.report()
        record["job"]["finished_at"] = _now()
        record["job"]["duration_s"] = round(time.time() - started, 3)
    return record


def assemble(record: Record, ctx: JobContext) -> None:
    """The record's parts, once, from the phases' results in the order they were kept (those
    of the phases before a failure)."""
    for result in ctx.results.values():
        result.into(record)


def _take_lease(lease, phase: Phase) -> None:
    """The GPU's lease for a timed phase (kept from the timed phase before), given back for
    one that times nothing; a wait of a second or more is said, with whom it waited for."""
    holder = lease.holder() if phase.timed else ""
    yielded, t0 = lease.stats.yielded, time.time()
    lease.for_phase(phase.name, phase.timed, phase.alone)
    waited = time.time() - t0
    if waited >= 1.0:
        why = ("given up between phases to other jobs' compile benchmarks" if lease.stats.yielded > yielded
               else f"it was held by {holder}")
        say(f"GPU lease taken for {phase.name} after waiting {waited:.1f} s ({why})")


def _keep_partial_entries(ctx: JobContext) -> None:
    """A job that failed or was skipped before its compile ended: what it had tuned stays
    in its folder (partial) for the store, and its record says how much."""
    store = ctx.autotune_store
    if store is not None and "partial" not in store:  # the warm-up's final write did not happen
        counts = ctx.checkpoint.write(force=True) if ctx.checkpoint is not None else None
        store.update(counts or {})
        store["partial"] = True
    if ctx.checkpoint is not None:
        ctx.checkpoint.stop()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m tasks.job <job_dir>", file=sys.stderr)
        return 2
    job_dir = Path(argv[1]).resolve()
    spec = JobSpec.from_json(json.loads((job_dir / "job.json").read_text()))
    prepare_process(spec.config, job_dir)
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
