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
