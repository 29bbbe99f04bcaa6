"""The sweep's scheduling policy (sweeper/sweep/scheduler.py) against an in-memory executor,
in milliseconds: packing and slots, order, an out-of-memory job run again alone, resume,
Ctrl-C, a lost worker, a full disk. The jobs are composed by Hydra from the project's own
config, as a sweep composes them; only where they run is replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from sweeper.sweep import summary as sm
from sweeper.sweep.control import Job, job_spec
from sweeper.sweep.hydra_setup import register
from sweeper.sweep.memory_executor import MemoryExecutor
from sweeper.sweep.scheduler import Scheduler
from sweeper.sweep.settings import settings_of

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = {"resume": True, "jobs_per_gpu": "auto", "num_gpus_per_job": None, "num_cpus_per_job": None,
            "lend_spare_gpus": True, "pause_while_timing": False}


def make_jobs(sweep_dir: Path, *override_sets: list[str]) -> list[Job]:
    """Jobs as the launcher makes them: each its own Hydra composition of conf/."""
    register()  # the config's schema, as `python -m sweeper` registers it
    jobs = []
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        for num, overrides in enumerate(override_sets):
            cfg = compose(config_name="config", overrides=list(overrides))
            with open_dict(cfg):
                cfg.device = "cuda"  # the policy under test is the GPU one; nothing runs here
            jobs.append(Job(num, list(overrides), cfg, sweep_dir / str(num), job_spec(num, overrides, cfg)))
    return jobs


def run(tmp_path: Path, jobs: list[Job], executor: MemoryExecutor, **settings) -> Scheduler:
    sched = Scheduler(settings_of({**SETTINGS, **settings}), jobs, tmp_path, executor, command=["test"])
    sched.run()
    return sched


def summary(tmp_path: Path) -> dict:
    return json.loads((tmp_path / sm.SUMMARY_FILE).read_text())


def test_jobs_are_packed_on_the_gpu_as_its_memory_and_cores_allow(tmp_path):
    jobs = make_jobs(tmp_path, *[[f"model=resnet18", f"batch_size={b}"] for b in (8, 16, 32, 64, 128)])
    ex = MemoryExecutor()
    sched = run(tmp_path, jobs, ex)
    # 80 GiB / 24 GiB a job: 3; 16 cores less 2 for the lease holder / 3 a job: 4
    assert sched.jobs_per_gpu == 3 and sched.slots == 3 and ex.most_at_once == 3
    assert {tuple(sorted(r.items())) for _, r, _ in ex.submitted} == {(("num_cpus", 1), ("num_gpus", 1 / 3))}
    assert "packing: up to 3 jobs a GPU" in sched.packing
    done = summary(tmp_path)
    assert done["complete"] and [j["status"] for j in done["jobs"]] == ["ok"] * 5


def test_a_groups_first_autotune_job_runs_before_the_others_of_its_shapes(tmp_path):
    """sweeper/sweep/order.py: the autotune=on job of a shape group goes first, and the
    others of that group wait for it (they then start from its store entries)."""
    jobs = make_jobs(tmp_path, ["model=resnet18", "autotune=on", "cudagraphs=on"],
                     ["model=resnet18", "autotune=on", "cudagraphs=off"], ["model=resnet18", "autotune=off"])
    ex = MemoryExecutor(nodes=({"Alive": True, "NodeID": "n0", "Resources": {"CPU": 64.0, "GPU": 2.0}},))
    run(tmp_path, jobs, ex, lend_spare_gpus=False)
    order = [n for n, _, _ in ex.submitted]
    first_autotune = next(n for n in order if jobs[n].spec.config["autotune"])
    assert order.index(first_autotune) == 0
    other = next(j.num for j in jobs if j.spec.config["autotune"] and j.num != first_autotune)
    assert ex.submitted[order.index(other)] and order.index(other) > 0


def test_the_others_of_a_group_start_only_once_its_first_jobs_results_are_read(tmp_path):
    """A finished job's results (with the store entries it brings back) are read off the
    scheduler's loop (sweeper/sweep/collector.py): its slot frees at once, but the jobs of its
    shapes still wait until its results are in, even with nothing else running."""
    import time

    events: list[tuple[str, int]] = []

    class SlowToRead(MemoryExecutor):
        def submit(self, job, spec, resources, jobs_per_gpu):
            events.append(("submitted", job.num))
            return super().submit(job, spec, resources, jobs_per_gpu)

        def collect(self, handle, job, took_s):
            time.sleep(0.3)  # a bundle being unpacked
            events.append(("read", job.num))
            return super().collect(handle, job, took_s)

    jobs = make_jobs(tmp_path, ["model=resnet18", "autotune=on", "cudagraphs=on"],
                     ["model=resnet18", "autotune=on", "cudagraphs=off"])
    ex = SlowToRead(nodes=({"Alive": True, "NodeID": "n0", "Resources": {"CPU": 64.0, "GPU": 2.0}},))
    run(tmp_path, jobs, ex, lend_spare_gpus=False)
    first = events[0][1]
    assert events.index(("read", first)) < events.index(("submitted", 1 - first)), events
    assert [j["status"] for j in summary(tmp_path)["jobs"]] == ["ok", "ok"]


def test_a_packed_job_out_of_gpu_memory_runs_again_alone_once(tmp_path):
    jobs = make_jobs(tmp_path, ["model=resnet18", "batch_size=512"], ["model=resnet18", "batch_size=8"])
    oom = "out of GPU memory (torch.OutOfMemoryError): tried to allocate 20 GiB"

    def outcome(job, attempt):
        return oom if job.num == 0 and attempt == 0 else "ok"

    ex = MemoryExecutor(outcome=outcome)
    run(tmp_path, jobs, ex)
    zero = [(r, per) for n, r, per in ex.submitted if n == 0]
    assert [r["num_gpus"] for r, _ in zero] == [0.5, 1] and [per for _, per in zero] == [2, 1]
    rec = json.loads((tmp_path / "0" / "result.json").read_text())
    assert rec["status"] == "ok" and rec["job"]["rerun_alone"].startswith("ran out of GPU memory beside other jobs")

    # out of memory again, alone: it fails, once
    for p in tmp_path.glob("*/result.json"):
        p.unlink()
    ex = MemoryExecutor(outcome=lambda job, attempt: oom if job.num == 0 else "ok")
    run(tmp_path, jobs, ex)
    assert [n for n, _, _ in ex.submitted].count(0) == 2
    assert [j["status"] for j in summary(tmp_path)["jobs"]] == ["failed", "ok"]


def test_finished_jobs_are_kept_and_the_rest_run(tmp_path):
    jobs = make_jobs(tmp_path, ["model=resnet18"], ["model=resnet34"])
    run(tmp_path, jobs, MemoryExecutor(outcome=lambda job, attempt: "ok" if job.num == 0 else "crashed"))
    again = MemoryExecutor()
    run(tmp_path, make_jobs(tmp_path, ["model=resnet18"], ["model=resnet34"]), again)
    assert [n for n, _, _ in again.submitted] == [1]  # #0 was ok: kept
    entries = summary(tmp_path)["jobs"]
    assert [(j["status"], j["reused_from_earlier_run"]) for j in entries] == [("ok", True), ("ok", False)]
    # a sweep whose every job is kept starts no executor at all
    idle = MemoryExecutor()
    idle.start = None  # type: ignore[assignment]  # called, it would fail the test
    run(tmp_path, make_jobs(tmp_path, ["model=resnet18"], ["model=resnet34"]), idle)


def test_ctrl_c_cancels_running_and_queued_jobs_and_keeps_the_finished(tmp_path):
    jobs = make_jobs(tmp_path, *[["model=resnet18", f"batch_size={b}"] for b in (8, 16, 32, 64, 128, 256)])
    ex = MemoryExecutor(interrupt_after=1)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, jobs, ex)
    entries = summary(tmp_path)["jobs"]
    assert sorted(j["status"] for j in entries) == ["cancelled"] * 5 + ["ok"]
    # one ended, a queued one took its slot: three running are cancelled, two never started
    assert len(ex.cancelled) == 3
    reasons = sorted(j["reason"] for j in entries if j["status"] == "cancelled")
    assert reasons == ["cancelled (Ctrl-C or SIGTERM) before it finished"] * 3 + \
        ["cancelled (Ctrl-C or SIGTERM) before it started"] * 2
    assert not summary(tmp_path)["complete"]


def test_ctrl_c_between_the_submission_and_the_wait_cancels_every_job(tmp_path):
    """Faults round 6, case 19: a SIGTERM 0.9 s after Ray's start line, once the jobs were
    submitted and before the wait began (the expected-time line), exited 130 with no
    summary.json and no record: it fell outside the run's cancelling handlers."""
    jobs = make_jobs(tmp_path, ["model=resnet18", "batch_size=8"], ["model=resnet18", "batch_size=16"])
    sched = Scheduler(settings_of(SETTINGS), jobs, tmp_path, MemoryExecutor(), command=["test"])

    def interrupted(to_run, slots):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sched.run(expected=interrupted)
    assert sorted(j["status"] for j in summary(tmp_path)["jobs"]) == ["cancelled", "cancelled"]


def test_a_lost_worker_fails_its_job_and_the_sweep_goes_on(tmp_path):
    jobs = make_jobs(tmp_path, ["model=resnet18"], ["model=resnet34"], ["model=resnet50"])
    lost = "Ray task failed (WorkerCrashedError): the worker died unexpectedly"
    run(tmp_path, jobs, MemoryExecutor(outcome=lambda job, attempt: lost if job.num == 1 else "ok"))
    entries = summary(tmp_path)["jobs"]
    assert [j["status"] for j in entries] == ["ok", "failed", "ok"] and lost in entries[1]["reason"]


def test_results_that_cannot_be_written_stop_the_sweep_with_every_jobs_state(tmp_path, capsys):
    jobs = make_jobs(tmp_path, *[["model=resnet18", f"batch_size={b}"] for b in (8, 16, 32, 64, 128)])
    ex = MemoryExecutor(unwritable=0)
    with pytest.raises(SystemExit) as stop:
        run(tmp_path, jobs, ex)
    assert stop.value.code == 2
    entries = {j["num"]: j for j in summary(tmp_path)["jobs"]}
    assert "could not be written into the sweep folder" in entries[0]["reason"] and entries[0]["log_note"] == "on node0"
    assert {entries[n]["status"] for n in range(1, 5)} == {"cancelled"}
    assert "run the same command again" in capsys.readouterr().err


def test_a_job_whose_files_cannot_be_written_stops_the_sweep_once_the_running_ones_are_read(tmp_path, capsys):
    """A full sweep folder met as a job starts (its .hydra files), not as a finished one's
    results come back: the jobs already running finish and are kept, no other job starts,
    exit code 2, every job's state said."""
    jobs = make_jobs(tmp_path, *[["model=resnet18", f"batch_size={b}"] for b in (8, 16, 32, 64, 128)])
    (tmp_path / "3").write_text("")  # job 3's folder cannot be made: an OSError as it starts
    ex = MemoryExecutor()
    with pytest.raises(SystemExit) as stop:
        run(tmp_path, jobs, ex)
    assert stop.value.code == 2
    entries = {j["num"]: j for j in summary(tmp_path)["jobs"]}
    assert [entries[n]["status"] for n in range(5)] == ["ok", "ok", "ok", "cancelled", "cancelled"]
    assert sorted(num for num, _, _ in ex.submitted) == [0, 1, 2]
    err = capsys.readouterr().err
    assert f"job #3 could not start: its files could not be written into {tmp_path / '3'}" in err
    assert "run the same command again" in err
