"""Autotune work is never lost: a max-autotune job stopped mid-compile (its time limit, a
cancelled sweep) still gives the store what it had tuned, its record says how much and that
it was partial, and the job run again starts from it. Real sweeps through the embedded Ray,
real torch.compile on the CPU, where max-autotune times C++ GEMM templates against oneDNN
for a frozen Linear (the same store file as on a GPU). The test hook's `stall_mid_compile`
(SWEEPER_TEST_FAULTS, tasks/faults.py)
stalls the compile once max-autotune has timed its first op (tasks/phases.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.record import read_record
from sweeper.stores import autotune_store as st

# a stall stopped by a time limit: mostly waiting, so make test runs it in a process of its
# own beside the two workers, first there (tests/conftest.py, LONGEST_FIRST). A stall stopped
# by Ctrl-C is timed by nothing: tests/test_autotune_cancelled.py runs beside them too, later
pytestmark = pytest.mark.beside

ROOT = Path(__file__).resolve().parent.parent
# the stalled runs' time limit. The stall came about 10 s into the job (6 s into its compile:
# the stopped run's phase_s_at_last_write) alone or beside the warm rest of make test, but
# not within 30 s on CI, beside the two workers' first, cold minute. Its waiting costs no
# one: the workers fill the core
LIMIT_S = 90
JOB = ["autotune=on", "amp=off", "mode=inference", "+inductor.freezing=true", "measure.timed_steps=2", "measure.warmup_steps=1", "measure.profile_steps=1",
       "measure.module_rounds=2", "measure.module_calls_per_round=1", "measure.module_profile_calls=1",
       "measure.eager=false", "measure.steady_loop_s=0"]


def _env(store: Path, fault: str = "") -> dict:
    # a heartbeat each second: a compile of a few seconds (the host's ISA probes kept) still says what came from the store
    return dict(os.environ, SWEEPER_AUTOTUNE_STORE=str(store), SWEEPER_COMPILE_STORE="off", SWEEPER_CHECKPOINT_S="1",
                SWEEPER_HEARTBEAT_S="1", SWEEPER_TEST_FAULTS=f"*={fault}" if fault else "")


# one op to autotune (test_resnet's classifier, frozen for the CPU's GEMM templates)
RESNET = ["model=test_resnet", "image_size=32", "batch_size=8"]
# four (test_vit's attention and MLP Linears)
VIT = ["model=test_vit", "batch_size=2", "measure.microbench=false"]


def _sweep(store, sweep_dir, *extra, timeout=600, fault=""):
    return subprocess.run([sys.executable, "-m", "sweeper", *JOB, *extra, f"hydra.sweep.dir={sweep_dir}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=_env(store, fault))


def _store_ops(store: Path) -> int:
    return sum(st.count_ops(json.loads(f.read_text())["cache"]) for f in store.glob("torch-*/*.json"))


def _resumed_job_starts_from_the_stopped_ones_entries(store, sweep_dir, stopped):
    again = _sweep(store, sweep_dir, *RESNET)  # the same command, without the fault, into the same folder
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    record = read_record(sweep_dir / "0")
    got = record["timings"]["autotune_store"]
    assert got["seeded_ops"] == stopped["job_ops"] and got["seeded_entries"] == stopped["job_entries"]
    # the record sets the stopped run beside this one: what it gave, how far its compile got
    [earlier] = got["earlier_attempts"]
    assert earlier["status"] == read_record(sweep_dir.parent / "stopped")["status"]
    assert earlier["job_ops"] == stopped["job_ops"] and earlier["partial"] is True
    assert earlier["stopped_in"] == "compile" and earlier["phase_s_at_stop"] > 0
    assert earlier["log"] == "job.attempt1.log"  # the stopped run's log, kept beside the new one
    assert (sweep_dir / "0" / "job.attempt1.log").read_text() == (sweep_dir.parent / "stopped.log").read_text()
    assert record["timings"]["compile_s"] > 0 and got["partial"] is False
    log = (sweep_dir / "0" / "job.log").read_text()
    assert f"{stopped['job_ops']} ops ({stopped['job_entries']} timed choices)" in log  # said as it starts
    assert "from the store: 1 ops" in log  # and in the compile's heartbeat
    # the op the stopped job timed is not timed again (its only op: nothing is benchmarked)
    assert "stalling mid-compile after autotuning packed_linear" in (sweep_dir.parent / "stopped.log").read_text()
    assert "AUTOTUNE" not in log
    # timing nothing itself, the job still has the decision behind its choice: the store's timings
    decisions = record["autotune_decisions"]
    assert decisions["used_ops"] == 1 and decisions["from_store"] == 1
    [row] = decisions["rows"]
    assert row["op"] == "packed_linear" and row["timed"] == "store" and row["choices"] >= 2


def _keep_stopped(sweep_dir: Path) -> dict:
    """The stopped job's record and log, kept aside (the re-run replaces them)."""
    record = read_record(sweep_dir / "0")
    (sweep_dir.parent / "stopped").mkdir()
    (sweep_dir.parent / "stopped" / "result.json").write_text(json.dumps(record))
    (sweep_dir.parent / "stopped.log").write_text((sweep_dir / "0" / "job.log").read_text())
    return record


@pytest.mark.slow
def test_a_job_timed_out_twice_goes_on_where_each_run_stopped(tmp_path):
    """test_vit has four ops to autotune: stopped after the first, then, run again, after
    the second (as across two sittings), then run to the end, it times the other two only.
    Each run's log is kept, and the last record lists both stopped runs."""
    store, sweep_dir = tmp_path / "store", tmp_path / "sweep"
    proc = _sweep(store, sweep_dir, *VIT, f"timeout_s={LIMIT_S}", fault="stall_mid_compile")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = _keep_stopped(sweep_dir)
    assert record["status"] == "failed" and f"timed out after {LIMIT_S} s" in record["reason"]
    got = record["timings"]["autotune_store"]
    assert got["partial"] is True and got["job_ops"] == 1 and got["job_entries"] >= 2
    assert got["new_in_store"] == got["job_entries"] and got["stopped_in"] == "compile"
    assert got["phase_s_at_stop"] >= got["phase_s_at_last_write"] > 0
    assert got["seeded_ops"] == 0 and "earlier_attempts" not in got
    assert _store_ops(store) == 1  # in the store now, though the job never finished
    assert not (sweep_dir / "0" / st.ENTRIES_FILE).exists()  # absorbed
    first_log = (sweep_dir / "0" / "job.log").read_text()

    proc = _sweep(store, sweep_dir, *VIT, f"timeout_s={LIMIT_S}", fault="stall_mid_compile")  # the next sitting
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    second = read_record(sweep_dir / "0")["timings"]["autotune_store"]
    # the launcher made this record from the partial file: it still says what the run started with
    assert second["seeded_ops"] == 1 and second["job_ops"] == 2 and second["partial"] is True
    assert second["new_in_store"] == second["job_entries"] - got["job_entries"] > 0
    assert [a["job_ops"] for a in second["earlier_attempts"]] == [1]
    assert (sweep_dir / "0" / "job.attempt1.log").read_text() == first_log  # not replaced by the second run's
    assert _store_ops(store) == 2

    again = _sweep(store, sweep_dir, *VIT)  # the same command, without the fault, into the same folder
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    resumed = read_record(sweep_dir / "0")
    mine = resumed["timings"]["autotune_store"]
    attempts = mine["earlier_attempts"]
    assert [a["status"] for a in attempts] == ["failed", "failed"]
    assert [a["job_ops"] for a in attempts] == [1, 2] and [a.get("seeded_ops") for a in attempts] == [0, 1]
    assert all(a["phase_s_at_stop"] > 0 for a in attempts)
    assert [a["log"] for a in attempts] == ["job.attempt1.log", "job.attempt2.log"]
    assert mine["seeded_ops"] == 2
    log = (sweep_dir / "0" / "job.log").read_text()
    assert "this job ran 2 time(s) before and was stopped (failed" in log
    assert "stalling mid-compile" in (sweep_dir / "0" / "job.attempt2.log").read_text()
    assert log.count("SingleProcess AUTOTUNE benchmarking") == 2  # the two it had not reached
    assert resumed["timings"]["compile_split_s"]["template_ops"] == 2
    assert mine["job_ops"] == 4 and mine["new_in_store"] == mine["job_entries"] - second["job_entries"]
    assert _store_ops(store) == 4
