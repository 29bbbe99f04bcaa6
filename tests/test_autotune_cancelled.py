"""A cancelled max-autotune sweep gives the store what its stopped job had tuned, and the job
run again starts from it (tests/test_autotune_partial.py tells the rest of the story, with
the jobs stopped by their time limit). Ctrl-C comes once the job's log says it stalls
mid-compile, so nothing here waits on a clock."""

import signal
import subprocess
import sys
import time

import pytest

from tests.test_autotune_partial import (JOB, RESNET, ROOT, _env, _keep_stopped,
                                         _resumed_job_starts_from_the_stopped_ones_entries, _store_ops)

# self-contained (a store of its own): make test runs it beside the two workers, after the
# tests there that wait on time limits, on the cores those waits leave idle
pytestmark = pytest.mark.beside


@pytest.mark.slow
def test_a_cancelled_sweep_brings_its_jobs_entries_back_from_scratch(tmp_path):
    store, sweep_dir, scratch = tmp_path / "store", tmp_path / "sweep", tmp_path / "scratch"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweeper", *JOB, *RESNET, f"hydra.launcher.scratch_dir={scratch}",
         f"hydra.sweep.dir={sweep_dir}"], cwd=ROOT, env=_env(store, "stall_mid_compile"), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline, seen = time.time() + 300, ""
    while time.time() < deadline and "stalling mid-compile" not in seen:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    assert "stalling mid-compile" in seen, seen[-3000:]
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    out = seen + proc.communicate(timeout=180)[0]
    assert proc.returncode == 130, out[-3000:]
    assert "autotune entries of 1 stopped jobs brought back" in out
    record = _keep_stopped(sweep_dir)
    assert record["status"] == "cancelled"
    got = record["timings"]["autotune_store"]
    assert got["partial"] is True and got["job_ops"] == 1 and got["new_in_store"] == got["job_entries"]
    assert _store_ops(store) == 1
    _resumed_job_starts_from_the_stopped_ones_entries(store, sweep_dir, got)
