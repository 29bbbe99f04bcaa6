"""The failure tests' hook: a fault injected into a real job, chosen by the environment, not
by the sweep's config (users never see it). `SWEEPER_TEST_FAULTS` names a fault for each job
number of the sweep, "0=crash,2=hang", or "*=hang" for every job; the variable reaches the
job through the driver's environment (its embedded Ray's workers inherit it, as do the
nodes of a cluster a test starts)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tasks.job_context import JobContext

FAULTS = ("crash", "hang", "raise", "stall_mid_compile", "oom_when_packed")
VARIABLE = "SWEEPER_TEST_FAULTS"


def fault_for(job_id: str, text: str | None = None) -> str | None:
    """The fault SWEEPER_TEST_FAULTS (or `text`) names for this job number, None for none."""
    text = os.environ.get(VARIABLE, "") if text is None else text
    faults = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    return faults.get(str(job_id)) or faults.get("*") or None


def inject(fault: str | None, ctx: JobContext) -> None:
    """The fault, in this job right after its setup: crash (SIGSEGV), hang or raise;
    stall_mid_compile hangs the compile once max-autotune has timed its first op (and the
    checkpoint has written it), for the tests of a job stopped mid-compile;
    oom_when_packed runs out of GPU memory while the job shares its GPU (not alone on it)."""
    if not fault:
        return
    from tasks.job_context import say  # the job's own line printer (the phases import this module)

    say(f"injecting fault {fault!r} (SWEEPER_TEST_FAULTS)")
    if fault == "stall_mid_compile":
        def stall(op: str) -> None:
            if ctx.checkpoint is not None:
                ctx.checkpoint.write(force=True)
            say(f"stalling mid-compile after autotuning {op} (SWEEPER_TEST_FAULTS)")
            time.sleep(10**6)

        from sweeper.torch_internals.benchmark_lease import on_template_autotuned

        on_template_autotuned(stall)
        return
    if fault == "oom_when_packed":  # out of GPU memory while sharing the GPU, fine alone (the launcher re-runs it)
        if ctx.lease is not None and ctx.lease.jobs_per_gpu > 1:
            import torch

            raise torch.OutOfMemoryError("CUDA out of memory (SWEEPER_TEST_FAULTS: oom_when_packed)")
        return
    if fault == "crash":
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)
    elif fault == "hang":
        time.sleep(10**6)
    elif fault == "raise":
        raise RuntimeError("injected fault (SWEEPER_TEST_FAULTS: raise)")
    else:
        raise ValueError(f"SWEEPER_TEST_FAULTS: {fault!r}: use {', '.join(FAULTS)}")
