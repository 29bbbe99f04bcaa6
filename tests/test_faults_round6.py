"""Faults round 6: the cases of the issue that this file covers so far (the nightly gate and
the history: a broken job is a change, a night is counted once, counts and --out are
checked before the analysis). The nights are tables written as the aggregate writes them
(bench/change_detection.py's generator), read by the real `python -m sweeper.history`."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("change_detection", ROOT / "bench" / "change_detection.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["change_detection"] = mod
    spec.loader.exec_module(mod)
    return mod


def _history(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeper.history", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def bench_models():
    bench = _bench()
    return bench, bench.real_models(np.random.default_rng(0))


@pytest.mark.parametrize("how", ["failed", "missing"])
def test_a_job_that_breaks_is_a_change_the_gate_fails_on(bench_models, tmp_path, how):
    """Case 6: a job that failed (or was not in the sweep) on each of the last 3 nights passed
    `--fail-on-regression` with "0 changes" before; ok -> failed and ok -> missing are changes."""
    bench, models = bench_models
    bench.write_tables(tmp_path, models, 12, 10, np.random.default_rng(3), broken=(7, 4, how))
    got = _history("changes", str(tmp_path), "--fail-on-regression")
    assert got.returncode == 1, got.stdout + got.stderr
    lines = got.stdout.splitlines()
    assert lines[1].startswith("1 change"), got.stdout
    assert lines[2].startswith(f"- night07: 1 job {how} that ran ok the night before:"), got.stdout


def test_a_night_is_counted_once_whatever_links_reach_it(bench_models, tmp_path):
    """Case 8: a `latest` link added a night, and a link to the root doubled every night (6
    nights passed the 7-night minimum)."""
    bench, models = bench_models
    root = tmp_path / "nightly"
    nights = bench.write_tables(root, models, 8, 6, np.random.default_rng(4))
    (root / "latest").symlink_to(nights[-1])
    (root / "again").symlink_to(root)
    got = _history("changes", str(root))
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[0].startswith("# change points over 6 nights"), got.stdout
    assert "too few complete nights to tell a change point (6; at least 7)" in got.stdout, got.stdout
    trend = _history("trend", str(root), "--out", str(tmp_path / "trend.png"))
    assert trend.returncode == 0, trend.stderr


@pytest.mark.parametrize("args, word", [(["--last", "0"], "--last"), (["--last", "-1"], "--last"),
                                        (["--top", "-3"], "--top"), (["--last", "x"], "--last")])
def test_counts_must_be_one_or_more(tmp_path, args, word):
    """Case 9: `--last 0` read every night, `--last -1` dropped one, `--top -3` printed nonsense."""
    got = _history("changes", str(tmp_path), *args)
    assert got.returncode == 2 and word in got.stderr and "Traceback" not in got.stderr, got.stderr
    if args[0] == "--last":
        got = _history("trend", str(tmp_path), *args)
        assert got.returncode == 2 and word in got.stderr, got.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: the read-only folder is tested as a user")
def test_out_that_cannot_be_written_is_said_before_the_analysis(bench_models, tmp_path):
    bench, models = bench_models
    bench.write_tables(tmp_path / "n", models, 4, 7, np.random.default_rng(5))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    got = _history("changes", str(tmp_path / "n"), "--out", str(locked / "x"))
    assert got.returncode == 2 and "cannot be written" in got.stderr and "Traceback" not in got.stderr, got.stderr


def test_out_on_a_file_is_said_before_the_analysis(bench_models, tmp_path):
    """Case 9's --out: a place that cannot be a folder (a file is there) ended in a traceback
    after the analysis (changes, compare, trend, confirm)."""
    bench, models = bench_models
    bench.write_tables(tmp_path / "n", models, 4, 7, np.random.default_rng(5))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for cmd in (["changes", str(tmp_path / "n")], ["compare", str(tmp_path / "n" / "night06")],
                ["confirm", str(tmp_path / "n" / "night06"), str(tmp_path / "n" / "night05")]):
        got = _history(*cmd, "--out", str(blocker / "sub"))
        assert got.returncode == 2 and "cannot be written" in got.stderr and "Traceback" not in got.stderr, \
            (cmd, got.stderr)
    got = _history("trend", str(tmp_path / "n"), "--out", str(blocker / "sub" / "trend.png"))
    assert got.returncode == 2 and "cannot be written" in got.stderr, got.stderr
