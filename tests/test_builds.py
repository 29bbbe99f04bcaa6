"""Builds as a sweep dimension (config keys `python`, `pythons`; sweeper/sweep/pythons.py):
one sweep, two real Python environments holding different torch versions, on a real Ray.

The second environment is made the way docs/running.md tells users to set up a second
build beside the first: its own virtualenv holding only torch (and the matching
torchvision), everything else from the main environment through a .pth file."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from importlib.metadata import version

from conftest import sweep_from_fixture
from sweeper.record import read_record

ROOT = Path(__file__).resolve().parent.parent
MAIN_TORCH = version("torch")  # the Makefile's: 2.14.1
OTHER_TORCH = ["torch==2.14.0", "torchvision==0.29.0"]
TINY = ["mode=inference", "image_size=32", "batch_size=2", "measure.timed_steps=5", "measure.warmup_steps=1",
        "measure.profile_steps=1", "measure.module_rounds=2", "measure.module_calls_per_round=1",
        "measure.module_profile_calls=1", "measure.eager=false", "measure.steady_loop_s=1"]


def make_second_build(venv: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", *OTHER_TORCH],
                          capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"could not install {OTHER_TORCH}: {proc.stderr[-2000:]}")
        pytest.skip(f"could not install {OTHER_TORCH} here")
    theirs = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    (Path(theirs) / "main_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return py


@pytest.fixture(scope="module")
def second_build(tmp_path_factory):
    return make_second_build(tmp_path_factory.mktemp("build_b") / "venv")


def sweep(sweep_dir, *overrides, timeout=900):
    return subprocess.run([sys.executable, "-m", "sweeper", *overrides, f"hydra.sweep.dir={sweep_dir}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_one_sweep_two_builds_paired(second_build, tmp_path):
    d = tmp_path / "sweep"
    proc = sweep(d, "model=test_resnet", "python=main,nightly", f"+pythons.main={sys.executable}",
                 f"+pythons.nightly={second_build}", *TINY)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    # both environments were checked and listed before any job started
    assert f"python=main: {sys.executable}" in out and f"torch {MAIN_TORCH}" in out
    assert f"python=nightly: {second_build}" in out and "torch 2.14.0" in out
    a, b = read_record(d / "0"), read_record(d / "1")
    assert a["status"] == b["status"] == "ok"
    assert a["environment"]["torch"].startswith(MAIN_TORCH) and b["environment"]["torch"].startswith("2.14.0")
    assert a["environment"]["python_executable"] == sys.executable
    assert b["environment"]["python_executable"] == str(second_build)
    assert a["config"]["python"] == "main" and b["config"]["python"] == "nightly"
    assert b["job"]["started_at"] >= a["job"]["finished_at"]  # A, then B

    page = (d / "report.html").read_text()
    assert "Builds compared (python)" in page and "python=nightly against python=main" in page
    assert "id='build-comparison'" in page and "2.14.0" in page and MAIN_TORCH in page
    assert "test_resnet b2 infer bf16</td>" in page  # the pair, labelled without its build

    cmp = subprocess.run([sys.executable, "-m", "sweeper.history", "compare", str(d), "--between", "python"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert cmp.returncode == 0, cmp.stderr
    assert f"# {d}: python=nightly against python=main" in cmp.stdout
    assert "| test_resnet b2 infer bf16 |" in cmp.stdout and "## test_resnet b2 infer bf16:" in cmp.stdout
    assert "category shares %: cpp_kernel" in cmp.stdout  # each pair's shares and kernels, side by side


def test_a_missing_or_broken_environment_stops_the_sweep_before_any_job(tmp_path):
    bare = tmp_path / "bare"  # an interpreter without torch
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    for value, expected in ((f"{tmp_path}/nope/bin/python", "no such interpreter"),
                            (str(bare / "bin" / "python"), "No module named 'torch'"),
                            ("nightly", "not a name in `pythons`")):
        proc = sweep(tmp_path / "sweep", "model=test_resnet", f"python={value}", *TINY, timeout=300)
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert f"python={value}" in proc.stderr and expected in proc.stderr and "no job was run" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert not (tmp_path / "sweep").exists()
    listed = sweep(tmp_path / "sweep", "model=test_resnet", f"python={sys.executable}", "dry_run=true", *TINY)
    assert listed.returncode == 0 and f"python={sys.executable}: {sys.executable}" in listed.stdout
    assert f"torch {MAIN_TORCH}" in listed.stdout  # a dry run lists the versions too


def test_h200_builds_of_one_torch_pair_up_and_flag_nothing(tmp_path):
    """Two environments of the same torch on one H200, A, B, A, B: the report's builds
    section and `history compare --between python` pair the four models and flag none."""
    from sweeper.aggregate import aggregate

    src = ROOT / "tests" / "fixtures" / "h200" / "builds"
    d = sweep_from_fixture(src, tmp_path / "builds")
    recs = [read_record(d / str(n)) for n in range(8)]
    assert [r["config"]["python"] for r in recs] == ["a", "b"] * 4  # A, B on the one GPU, model by model
    assert all(recs[n]["job"]["started_at"] >= recs[n - 1]["job"]["finished_at"] for n in range(1, 8))
    page = aggregate(d).read_text()
    assert "python=b against python=a" in page and "0 of 4 pairs flagged" in page
    assert page.count("/tmp/gpu/env_b/bin/python") >= 1 and "2.11.0+cu130" in page
    cmp = subprocess.run([sys.executable, "-m", "sweeper.history", "compare", str(d), "--between", "python",
                          "--fail-on-regression", "--out", str(tmp_path / "cmp")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    assert "0 of 4 jobs flagged" in cmp.stdout
    import pandas as pd

    table = pd.read_csv(tmp_path / "cmp" / "b_vs_a" / "compare_jobs.csv").set_index("label")
    assert table["device_change_pct"].abs().max() < 3.5  # kernel time per step: the same build, within 3.2%
    assert table.loc["vit_small_patch16_224 b32 infer fp16", "verdict"] == "host"  # its step moved alone


@pytest.mark.slow
def test_on_a_cluster_each_environment_is_checked_on_every_node(tmp_path):
    """On a Ray cluster the probe runs on each node once joined (a node may lack the
    environment): a broken one is named per node and stops the sweep before any job; a
    good one is listed and its job runs under it."""
    from ray.cluster_utils import Cluster

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=2)
    try:
        address = f"hydra.launcher.address={cluster.address}"
        bad = sweep(tmp_path / "bad", "model=test_resnet", f"python={bare}/bin/python", address, *TINY, timeout=300)
        good = sweep(tmp_path / "good", "model=test_resnet", "python=main", f"+pythons.main={sys.executable}",
                     address, "hydra.launcher.num_cpus_per_job=2", *TINY)
    finally:
        cluster.shutdown()
    assert bad.returncode == 2, bad.stdout[-2000:] + bad.stderr[-2000:]
    assert bad.stderr.count("No module named 'torch'") == 2 and bad.stderr.count("on node ") == 2  # both nodes
    assert "no job was run" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "bad").exists()
    out = good.stdout + good.stderr
    assert good.returncode == 0, out[-3000:]
    assert "checked on the cluster's nodes once joined" in out and f"python=main: {sys.executable}" in out
    assert read_record(tmp_path / "good" / "0")["environment"]["python_executable"] == sys.executable
