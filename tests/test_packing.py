"""Several jobs on one GPU (hydra.launcher.jobs_per_gpu) through the Ray launcher, on a real
local Ray cluster whose node declares one GPU: this machine has none, so the jobs run on its
CPU while Ray hands them the GPU's id, and they take that GPU's lease as on a GPU machine."""

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from sweeper.record import read_record
from tests.test_gpu_lease import holds, overlapping

ROOT = Path(__file__).resolve().parent.parent
# the compile of tests/test_ray_launcher.py's tiny job (the same model, shapes and precision):
# the tests' compile store loads it warm where another test compiled it first
TINY = ["model=test_resnet", "mode=inference", "image_size=32", "batch_size=2",
        "measure.timed_steps=2", "measure.warmup_steps=1", "measure.profile_steps=1", "measure.module_rounds=2",
        "measure.module_calls_per_round=1", "measure.module_profile_calls=1", "measure.steady_loop_s=0.5"]


def run_on_one_gpu(tmp_path, *overrides, faults=""):
    from ray.cluster_utils import Cluster

    log = tmp_path / "lease.log"
    # the cluster's workers, and so the jobs, inherit these (SWEEPER_TEST_FAULTS: tasks/faults.py)
    os.environ.update(SWEEPER_LEASE_LOG=str(log), SWEEPER_TEST_FAULTS=faults)
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 1})
    finally:
        del os.environ["SWEEPER_LEASE_LOG"], os.environ["SWEEPER_TEST_FAULTS"]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "sweeper", *TINY, *overrides, f"hydra.launcher.address={cluster.address}",
             f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    finally:
        cluster.shutdown()
    out = proc.stdout + proc.stderr
    records = [read_record(p) for p in sorted((tmp_path / "sweep").glob("[0-9]*")) if (p / "result.json").exists()]
    return proc, out, records, log


def lifetime(rec):
    return tuple(datetime.fromisoformat(rec["job"][k]).timestamp() for k in ("started_at", "finished_at"))


@pytest.mark.slow
def test_two_jobs_share_one_gpu_and_never_time_on_it_at_once(tmp_path):
    proc, out, records, log = run_on_one_gpu(tmp_path, "seed=0,1", "hydra.launcher.jobs_per_gpu=2",
                                             "hydra.launcher.pause_while_timing=true")
    assert proc.returncode == 0, out[-4000:]
    assert "0.5 GPU and 1 CPU each, up to 2 at a time; packing: up to 2 jobs a GPU (jobs_per_gpu=2)" in out
    a, b = records
    # both ran at once on the one GPU ...
    (a0, a1), (b0, b1) = lifetime(a), lifetime(b)
    assert a0 < b1 and b0 < a1, "the two jobs should have run at the same time"
    assert a["job"]["gpu_ids"] == b["job"]["gpu_ids"] == ["0"]
    # ... yet every hold of the GPU's lease, phases and Inductor's benchmarks, was one job's alone
    spans = holds(log)
    assert {s[2] for s in spans} == {"0", "1"} and overlapping(spans) == []
    for rec in records:
        lease = rec["timings"]["gpu_lease"]
        assert lease["gpu"] == "gpu0" and lease["jobs_per_gpu"] == 2
        # eager, then warm-up to the end: the timed phases held it, in two stretches
        assert [s[2] for s in lease["spans"]] == ["eager", "warmup"]
        assert rec["resolved"]["leased_benchmarks"]
    # each paused the other through its eager and timed steps and modules, the other being
    # in a session of its own (tests/test_host_pause.py shows that a paused job stands still)
    paused = [rec["timings"]["gpu_lease"]["paused_others"] for rec in records]
    assert sum(p["pauses"] for p in paused) >= 1 and all(p["most_jobs"] <= 1 for p in paused)
    # the jobs table and the report say how the sweep was packed
    import pandas as pd

    jobs = pd.read_csv(tmp_path / "sweep" / "tables" / "jobs.csv")
    assert sorted(jobs["shared_gpu_with"].astype(str)) == ["0", "1"]
    assert set(jobs["jobs_per_gpu"]) == {2}
    report = (tmp_path / "sweep" / "report.html").read_text()
    assert "packed: up to 2 jobs a GPU" in report
    assert "the others of its GPU stood paused" in report


@pytest.mark.slow
def test_one_job_a_gpu_is_the_schedule_of_before(tmp_path):
    proc, out, records, log = run_on_one_gpu(tmp_path, "seed=0,1", "hydra.launcher.jobs_per_gpu=1")
    assert proc.returncode == 0, out[-4000:]
    assert "1 GPU and 1 CPU each, up to 1 at a time; packing: one job a GPU (jobs_per_gpu=1)" in out
    (a0, a1), (b0, b1) = sorted(lifetime(r) for r in records)
    assert a1 <= b0, "with one job a GPU, the second job starts after the first ended"
    assert all(r["timings"]["gpu_lease"]["cpus_shared"] is None for r in records)  # every core, as before


@pytest.mark.slow
def test_a_job_out_of_gpu_memory_beside_others_runs_again_alone(tmp_path):
    proc, out, records, _ = run_on_one_gpu(tmp_path, "seed=0,1", "hydra.launcher.jobs_per_gpu=2",
                                           faults="1=oom_when_packed")
    assert proc.returncode == 0, out[-4000:]
    assert "ran out of GPU memory beside other jobs: it runs again alone on its GPU" in out
    fine, oom = records
    assert fine["status"] == oom["status"] == "ok"
    assert oom["job"]["rerun_alone"].startswith("ran out of GPU memory beside other jobs, then ran alone: "
                                                "out of GPU memory at batch size 2")
    assert oom["timings"]["gpu_lease"]["jobs_per_gpu"] == 1 and "rerun_alone" not in fine["job"]
    # the run that ran out keeps its log beside the new one
    assert "oom_when_packed" in (tmp_path / "sweep" / "1" / "job.attempt1.log").read_text()


def test_the_dry_run_says_how_jobs_are_packed(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=resnet18", "seed=0,1", "dry_run=true",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "packing: none (CPU jobs run one at a time)" in proc.stdout  # this machine has no GPU
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=resnet18", "hydra.launcher.jobs_per_gpu=0",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2
    assert "hydra.launcher.jobs_per_gpu=0: auto, or a whole number >= 1" in proc.stderr


def test_packing_on_a_gpu_node_follows_its_cores_and_the_jobs_left():
    from hydra_plugins.sweeper_ray._core import packing_of as packing_of_settings
    from sweeper.sweep.settings import settings_of

    def packing_of(conf, *args):
        return packing_of_settings(settings_of(conf), *args)

    h200 = [{"Alive": True, "Resources": {"CPU": 16.0, "GPU": 1.0}}]
    conf = {"address": "host:6379", "jobs_per_gpu": "auto"}  # a cluster: memory not read
    assert packing_of(conf, h200, 4, False)[0] == 4
    assert packing_of(conf, h200, 2, False)[0] == 2  # no more than the jobs need
    two = [{"Alive": True, "Resources": {"CPU": 32.0, "GPU": 2.0}}]
    per_gpu, line = packing_of(conf, two, 4, False)
    assert per_gpu == 2 and "4 job(s) on 2 GPU(s) need no more" in line
    assert "paused" not in line  # pause_while_timing is off by default
    assert packing_of({**conf, "pause_while_timing": True}, two, 4, False)[1].endswith(
        "the others paused while one times its steps and modules (pause_while_timing)")
    assert packing_of({**conf, "jobs_per_gpu": "1"}, h200, 4, False) == (1, "packing: one job a GPU (jobs_per_gpu=1)")
    assert packing_of(conf, h200, 4, True) == (1, "")  # device=cpu jobs
    assert packing_of({**conf, "num_gpus_per_job": 1}, h200, 4, False)[0] == 1  # asked for whole GPUs
