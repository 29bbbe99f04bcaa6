"""docs/running.md's "Your own cluster", as written: two nodes started with `ray start` (a head
and a worker, on 127.0.0.1), token authentication on, the jobs' variables exported in the
shell that runs `ray start`, a sweep joining it with a storage folder. The variable given to
the nodes only (SWEEPER_ROOFS) is the one the job used: jobs get the environment of the
shell that started their node, not the driver's."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = ["mode=inference", "image_size=32", "batch_size=2", "measure.timed_steps=2", "measure.warmup_steps=1",
        "measure.profile_steps=1", "measure.module_rounds=2", "measure.module_calls_per_round=1",
        "measure.module_profile_calls=1", "measure.eager=false", "measure.steady_loop_s=0"]

pytestmark = [pytest.mark.slow, pytest.mark.beside]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_start(args: list[str], env: dict) -> subprocess.Popen:
    """`ray start ... --block` in a session of its own: ended with its node's processes."""
    ray = str(Path(sys.executable).with_name("ray"))
    return subprocess.Popen([ray, "start", "--block", *args], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def _nodes(address: str, env: dict) -> int:
    code = f"import ray; ray.init(address={address!r}); print(len([n for n in ray.nodes() if n['Alive']]))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else 0


def test_the_own_cluster_recipe_runs_as_written(tmp_path):
    port = _free_port()
    address = f"127.0.0.1:{port}"
    token = secrets.token_hex(32)
    node_roofs = tmp_path / "node_roofs"
    # the shell that runs `ray start`: the token, and what the jobs read
    nodes_env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, SWEEPER_ROOFS=str(node_roofs))
    temp = tempfile.mkdtemp(prefix="rayown", dir="/tmp")  # Ray's socket paths must stay short
    head = _ray_start(["--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=2",
                       "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"], nodes_env)
    worker = None
    try:
        deadline = time.time() + 60
        while time.time() < deadline and _nodes(address, nodes_env) < 1:
            time.sleep(2)
        worker = _ray_start([f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=2"], nodes_env)
        deadline = time.time() + 60
        while time.time() < deadline and _nodes(address, nodes_env) < 2:
            time.sleep(2)
        assert _nodes(address, nodes_env) == 2, "the two nodes did not come up"
        # the driver: the token in its environment, its own SWEEPER_ROOFS (the tests' session one)
        driver_env = dict(os.environ, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
        storage = tmp_path / "shared"
        # the run's compiles of test_resnet, where earlier tests made them, as the storage's
        # compile store (the same layout): the job loads its compile rather than compiling cold
        session_store = Path(os.environ.get("SWEEPER_COMPILE_STORE", "/nonexistent"))
        if session_store.is_dir():
            import shutil

            shutil.copytree(session_store, storage / "compile_store", dirs_exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "sweeper", "model=test_resnet", *TINY, f"hydra.launcher.address={address}",
             "hydra.launcher.num_cpus_per_job=2", f"hydra.launcher.storage_path={storage}",
             f"hydra.launcher.scratch_dir={tmp_path / 'scratch'}", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
            cwd=ROOT, env=driver_env, capture_output=True, text=True, timeout=600)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-4000:]
        rec = json.loads((tmp_path / "sweep" / "0" / "result.json").read_text())
        assert rec["status"] == "ok" and rec["job"]["stored_at"].startswith(str(storage))
        assert (Path(rec["job"]["stored_at"]) / "job.log").is_file()
        # the job's roofs went where the nodes' shell said, not where the driver's did
        assert list(node_roofs.glob("*.json")), "the job did not use the nodes' SWEEPER_ROOFS"
        # the relayed job lines carry no colour codes nor Ray's de-duplication notices
        assert "\x1b[" not in out and "repeated" not in out
    finally:
        for p in (worker, head):
            if p is not None:
                _stop(p)
