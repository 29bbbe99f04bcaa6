"""Confirmation by interleaving (`python -m sweeper.history confirm`): jobs run again old
and new on this machine, rounds in turn, over two processes a side. A real CPU sweep of two
settings (batch 2 and 32) and the real command; the statistics against hand values."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis import confirm_stats as cs

ROOT = Path(__file__).resolve().parent.parent
TINY = ["model=test_resnet", "mode=inference", "image_size=32", "measure.timed_steps=10", "measure.warmup_steps=1",
        "measure.profile_steps=1", "measure.module_rounds=2", "measure.module_calls_per_round=1",
        "measure.module_profile_calls=1", "measure.eager=false", "measure.steady_loop_s=0", "measure.accuracy=false",
        "measure.microbench=false"]


def _history(*args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeper.history", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_cliffs_delta_and_the_verdict_by_hand():
    # old 1..5, new 6..10: every new round longer: U = 25, delta = +1
    got = cs.confirm([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert got.cliffs_delta == 1.0 and got.p_value == pytest.approx(0.00794, abs=1e-4)  # 2 / C(10,5)
    assert got.verdict == "slower" and got.shift_pct == pytest.approx(100 * (8 / 3 - 1))
    assert cs.cliffs_delta(12.5, 5, 5) == 0.0  # U at its middle: the samples overlap evenly
    # the same rounds: nothing
    same = cs.confirm([1.0, 1.1, 0.9, 1.05, 0.95], [1.0, 1.1, 0.9, 1.05, 0.95])
    assert same.verdict == "not confirmed" and same.p_value > 0.5 and same.ci_pct[0] <= 0 <= same.ci_pct[1]
    # a clear shift within one side's own processes' spread is not confirmed
    by_proc = cs.confirm([1.0] * 3 + [1.2] * 3, [1.25] * 6, old_by_process=[[1.0] * 3, [1.2] * 3],
                         new_by_process=[[1.25] * 3, [1.25] * 3])
    assert by_proc.process_spread_pct == pytest.approx(20.0) and by_proc.verdict == "not confirmed"
    with pytest.raises(ValueError, match="at least 5 a side"):
        cs.confirm([1, 2], [3, 4])


@pytest.fixture(scope="module")
def two_settings(tmp_path_factory):
    sweep = tmp_path_factory.mktemp("confirm") / "sweep"
    proc = subprocess.run([sys.executable, "-m", "sweeper", *TINY, "batch_size=2,32", f"hydra.sweep.dir={sweep}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return sweep


def test_confirm_two_settings_of_a_cpu_sweep(two_settings, tmp_path):
    """Batch 32 against batch 2 of one sweep: 16x the images, confirmed slower, with the
    interval, p and delta in the line and the table."""
    got = _history("confirm", two_settings / "1", two_settings / "0", "--rounds", "6", "--out", tmp_path,
                   "--fail-on-regression")
    assert got.returncode == 1, got.stdout + got.stderr  # confirmed slower
    line = got.stdout.splitlines()[1]
    assert line.startswith("- job 0 (batch_size=2) -> job 1 (batch_size=32): confirmed slower: +"), got.stdout
    assert "Mann-Whitney p=" in line and "Cliff's delta +1.00" in line and "processes" in line, line
    row = pd.read_csv(tmp_path / "confirm.csv").iloc[0]
    assert row["verdict"] == "slower" and row["ci_low_pct"] > 50 and row["p_value"] < cs.ALPHA, row.to_dict()
    # each side's own processes ran their rounds, and kept their logs
    logs = sorted(p.parent.name for p in tmp_path.glob("pair0/*/confirm.log"))
    assert logs == ["new1", "new2", "old1", "old2"], logs
    # nothing was written into the sweep
    assert not list(two_settings.glob("*/confirm.log")) and not (two_settings / "0" / "job.json").exists()


def test_confirm_a_job_against_itself_by_sweep_and_label(two_settings, tmp_path):
    """A/A through the sweep folders and --job: the same job both sides. Whatever the CPU's
    noise, the shift stays within a few percent and the interval says how sure."""
    got = _history("confirm", two_settings, two_settings, "--job", "batch_size=2", "--rounds", "6")
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.splitlines()[0].startswith("# confirmation of 1 job"), got.stdout
    line = got.stdout.splitlines()[1]
    m = re.match(r"- test_resnet b2 \S+ \S+: (not confirmed|confirmed slower|confirmed faster): ([+-][\d.]+)% "
                 r"\(95% CI ([+-][\d.]+) to ([+-][\d.]+)%\)", line)
    assert m, line
    shift, lo, hi = map(float, m.groups()[1:])
    assert lo <= shift <= hi and abs(shift) < 15, line
    assert "one side's own processes" in line, line


def test_confirm_bad_input(two_settings, tmp_path):
    got = _history("confirm", tmp_path / "nope", two_settings)
    assert got.returncode == 2 and "is not a folder" in got.stderr
    got = _history("confirm", two_settings / "0", two_settings)
    assert got.returncode == 2 and "one of each" in got.stderr, got.stderr
    got = _history("confirm", two_settings, two_settings, "--job", "model=no_such_model")
    assert got.returncode == 2 and "no job of both sweeps matches model=no_such_model" in got.stderr, got.stderr
    got = _history("confirm", two_settings / "1", two_settings / "0", "--rounds", "3")
    assert got.returncode == 2 and "at least 5" in got.stderr


def test_confirm_runs_no_interpreter_a_record_names_unless_told(two_settings, tmp_path):
    """Faults round 6, case 11: a crafted job folder's record named a script as its
    interpreter, and confirm ran it. Now it is refused before anything runs, with the fix
    (--python), and runs once named."""
    import shutil

    crafted = tmp_path / "sweep"
    shutil.copytree(two_settings, crafted, ignore=shutil.ignore_patterns("cache", "traces", "modules"))
    marker = tmp_path / "ran"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    rec = json.loads((crafted / "1" / "result.json").read_text())
    rec["environment"]["python_executable"] = str(script)
    (crafted / "1" / "result.json").write_text(json.dumps(rec))
    got = _history("confirm", crafted / "1", crafted / "0", "--rounds", "6")
    assert got.returncode == 2 and f"add --python {script}" in got.stderr, got.stdout + got.stderr
    assert not marker.exists()


# How soon it ends is timed with nothing beside it. On the 2-core machine it ended in under
# 15 s alone and beside three busy loops, but in 26 and 30 s inside the whole suite and 22 s
# right after it (2026-12-08), cause not found: the bound is 45 s, well under the 121 s of
# before, and says nothing of "within seconds" under load.
@pytest.mark.alone
def test_ctrl_c_keeps_what_was_done_and_ends_in_seconds(two_settings, tmp_path):
    """Faults round 6, case 12: Ctrl-C during confirm gave a KeyboardInterrupt traceback, kept
    no round, wrote no confirm.csv and took 121 s to exit while compiling."""
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "sweeper.history", "confirm", str(two_settings / "1"),
                             str(two_settings / "0"), "--rounds", "6", "--out", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # the sides compiling
    proc.send_signal(signal.SIGINT)
    t0 = time.time()
    out, err = proc.communicate(timeout=60)
    took = time.time() - t0
    assert took < 45, (took, out[-2000:], err[-3000:])
    assert proc.returncode == 130 and "Traceback" not in err, out + err
    assert "interrupted (Ctrl-C)" in err and "could not confirm: interrupted (Ctrl-C) after" in out, out + err
    row = pd.read_csv(tmp_path / "confirm.csv").iloc[0]
    assert row["verdict"] == "could not confirm" and "interrupted" in row["error"]
    leftover = subprocess.run(["pgrep", "-f", f"tasks.confirm_worker {tmp_path}"], capture_output=True, text=True)
    assert not leftover.stdout.strip(), leftover.stdout  # no worker left compiling
