"""A sweep's expected duration (sweeper/sweep/estimate.py) and the live line's countdown."""

import time
from pathlib import Path

from sweeper.sweep import estimate
from sweeper.sweep.progress import Progress


def test_jobs_laid_out_longest_first_on_the_free_slots():
    # the headline command on two GPUs: two max-autotune compiles, two default ones
    assert estimate.sweep_seconds([600, 560, 150, 140], slots=2) == 740  # 600+140 against 560+150
    assert estimate.sweep_seconds([600, 560, 150, 140], slots=1) == 1450
    assert estimate.sweep_seconds([600, 560, 150, 140], slots=8) == 600


def test_the_dry_run_line_names_what_it_counted_and_what_it_could_not():
    line = estimate.expected_line(["a", "b", "c"], ["#0", "#1", "#2"], {"a": 600.0, "b": 300.0},
                             slots=2, gpu="NVIDIA H200", outputs=Path("outputs"), read=3)
    assert line.startswith("expected duration: about 10 min with 2 at a time")
    assert "2 of 3 jobs on NVIDIA H200" in line and "no earlier record: #2" in line
    none = estimate.expected_line(["a"], ["#0"], {}, slots=1, gpu="", outputs=Path("outputs"), read=0)
    assert none.startswith("expected duration: unknown") and "on a CPU" in none and "0 complete sweeps" in none


def test_time_left_counts_down_between_job_ends():
    p = Progress(total=4, reused=0, expected_s=600)  # from earlier sweeps, before any job ended
    assert "about 10 min left" in p.line(running=2, slots=2)
    p.eta_at = time.time() + 185  # as if 7 minutes had passed: the line moves without a job ending
    assert "about 3 min left" in p.line(running=2, slots=2)
    p.finished("ok", 400.0, slots=2)  # re-estimated at each end: 400 s a job, 3 left, 2 at a time
    assert "about 10 min left" in p.line(running=2, slots=2)
    p.eta_at = time.time() - 1
    assert "running past the estimate" in p.line(running=2, slots=2)
    assert "min left" not in Progress(total=2, reused=0).line(running=1, slots=1)  # nothing to go on yet


def test_a_job_is_the_same_job_whatever_the_order_of_its_overrides_and_its_sweep_level_keys():
    a = estimate.job_identity(["model=resnet50", "autotune=on", "+sweep=nightly", "hydra.sweep.dir=/x", "dry_run=true"])
    b = estimate.job_identity(["+sweep=nightly", "autotune=on", "model=resnet50", "timeout_s=60", "yes=true"])
    assert a == b == "+sweep=nightly autotune=on model=resnet50"
    assert a != estimate.job_identity(["model=resnet50", "autotune=off", "+sweep=nightly"])


def test_an_override_that_sets_the_default_is_the_default_job():
    """`make demo` records the default job (no overrides); a dry run of model=resnet18
    autotune=off is the same job and finds its duration."""
    assert estimate.job_identity([]) == estimate.job_identity(["model=resnet18", "autotune=off", "amp=on",
                                                               "measure.timed_steps=20", "batch_size=null"]) == ""
    assert estimate.job_identity(["model=resnet18", "autotune=on"]) == "autotune=on"
    assert estimate.job_identity(["batch_size=2"]) == "batch_size=2"  # the CPU default, but not the declared one
    # a chosen config group may set another model: model=resnet18 then says something
    assert estimate.job_identity(["+sweep=nightly", "model=resnet18"]) == "+sweep=nightly model=resnet18"


def _sweep_with_record(folder: Path, seconds: float) -> None:
    import json

    (folder / "0").mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"complete": True, "started_at": "2026-12-01T06:00:00",
                                                     "jobs": [{"num": 0, "overrides": [], "status": "ok"}]}))
    (folder / "0" / "result.json").write_text(json.dumps({"status": "ok", "job": {"overrides": [], "duration_s": seconds},
                                                          "environment": {"gpu": None}}))


def test_a_sweep_folder_of_ones_own_naming_reads_the_sweeps_beside_it_and_no_other_users():
    """A dry run into /tmp/x read every sweep two levels under / (other users' in /tmp
    among them): a folder of one's own naming has its earlier sweeps beside it, and only
    this user's are read (test below)."""
    assert estimate.earlier_sweeps_root(Path("/tmp/x")) == (Path("/tmp"), 1)
    assert estimate.earlier_sweeps_root(Path("outputs/2026-12-01/06-00-00")) == (Path("outputs"), 2)
    assert estimate.earlier_sweeps_root(Path("outputs/nightly/2026-12-01")) == (Path("outputs"), 2)


def test_only_this_users_earlier_sweeps_count(tmp_path, monkeypatch):
    import os

    from sweeper.reporting import sweeps

    monkeypatch.setattr(sweeps, "sweep_state", lambda sweep: (True, ""))
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    _sweep_with_record(mine, 100.0)
    _sweep_with_record(theirs, 900.0)
    found, read = estimate.earlier_durations(tmp_path, {""}, None, depth=1)
    assert found in ({"": 100.0}, {"": 900.0})  # both this user's: the newest of either
    if hasattr(os, "getuid"):
        assert estimate._own(mine / "summary.json")  # written by this process: this user's
    monkeypatch.setattr(estimate, "_own", lambda path: path.parent.name == "mine")  # theirs: another user's
    found, read = estimate.earlier_durations(tmp_path, {""}, None, depth=1)
    assert found == {"": 100.0}
