"""Idle GPUs lent to the slow jobs (sweeper/sweep/spare_gpus.py): the rule, then the Ray
launcher's decisions on a real local Ray cluster whose node declares GPUs."""

import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.record import read_record
from sweeper.sweep.spare_gpus import gpus_for

ROOT = Path(__file__).resolve().parent.parent
# the compile of tests/test_ray_launcher.py's tiny jobs (autotune on and off): the tests'
# compile store loads it warm where another test compiled it first
TINY = ["model=test_resnet", "mode=inference", "image_size=32", "batch_size=2",
        "measure.timed_steps=2", "measure.warmup_steps=1", "measure.profile_steps=1", "measure.module_rounds=2",
        "measure.module_calls_per_round=1", "measure.module_profile_calls=1", "measure.eager=false",
        "measure.steady_loop_s=0"]
# self-contained: make test runs this file beside the two workers, after the tests there that
# wait on time limits, on the cores those waits leave idle
pytestmark = pytest.mark.beside


def test_spare_gpus_go_to_autotune_jobs_and_never_keep_a_job_waiting():
    # the mission's command on 8 GPUs: 4 jobs, the two autotune=on ones first (longest first)
    free, queue = 8, [True, True, False, False]
    given = []
    while queue:
        tune = queue.pop(0)
        n = int(gpus_for(tune, free, len(queue), (1 if tune else 0) + sum(queue)))
        given.append(n)
        free -= n
    assert given == [3, 3, 1, 1] and free == 0  # every job started at once
    # on 2 GPUs, as many jobs as GPUs or more: nothing to lend
    assert gpus_for(True, 2, 3, 2) == 1 and gpus_for(True, 1, 0, 1) == 1
    # 4 GPUs, 2 jobs: the autotune job takes what the other does not need
    assert gpus_for(True, 4, 1, 1) == 3 and gpus_for(False, 1, 0, 0) == 1
    # a job without max-autotune takes one; a sweep of several GPUs a job is left as asked
    assert gpus_for(False, 8, 0, 0) == 1 and gpus_for(True, 8, 0, 1, per_job=2) == 2


@pytest.mark.slow
def test_the_launcher_lends_spare_gpus_on_a_cluster_whose_node_declares_them(tmp_path):
    """A one-node Ray cluster declaring 4 GPUs (this machine has none: the jobs run on its
    CPU, Ray hands them GPU ids): the autotune=on job starts with 3, the other with 1, both
    at once; the record says what was given."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 4})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "sweeper", "autotune=on,off", *TINY,
             f"hydra.launcher.address={cluster.address}", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
            cwd=ROOT, capture_output=True, text=True, timeout=900)
    finally:
        cluster.shutdown()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "(with 2 spare GPUs for its autotuning)" in out
    records = {r["config"]["autotune"]: r for r in (read_record(tmp_path / "sweep" / n) for n in ("0", "1"))}
    tune, plain = records[True], records[False]
    assert len(tune["job"]["gpu_ids"]) == 3 and len(plain["job"]["gpu_ids"]) == 1
    assert not set(tune["job"]["gpu_ids"]) & set(plain["job"]["gpu_ids"])
    assert tune["resolved"]["autotune_gpus_given"] == 3
    assert tune["resolved"]["autotune_gpus"] == 1  # a CPU job tunes on its CPU: nothing to spread over
    # neither waited for the other: both were running at once
    assert plain["job"]["started_at"] < tune["job"]["finished_at"] and tune["job"]["started_at"] < plain["job"]["finished_at"]


@pytest.mark.slow
def test_no_spare_gpus_are_lent_when_turned_off(tmp_path):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "num_gpus": 4})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "sweeper", "autotune=on", *TINY, "hydra.launcher.lend_spare_gpus=false",
             f"hydra.launcher.address={cluster.address}",
             f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    finally:
        cluster.shutdown()
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert len(read_record(tmp_path / "sweep" / "0")["job"]["gpu_ids"]) == 1
