"""The node's max-autotune store (tasks/autotune_store.py) with real Inductor processes:
on a CPU, max-autotune of a frozen Linear benchmarks C++ GEMM templates against MKL and
records the timings in the same PersistentCache file as on a GPU."""

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks import autotune_store as st

ROOT = Path(__file__).resolve().parent.parent
COMPILE = """
import torch
m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
f = torch.compile(m, mode="max-autotune-no-cudagraphs")
with torch.no_grad():
    f(torch.randn(8, 64))
"""


def compile_in(cache: Path, store: Path) -> tuple[dict, str]:
    """One job's life around its compile: seed, compile in a fresh process, publish."""
    seeded = st.seed(store, cache)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), TORCHINDUCTOR_FREEZING="1",
               TORCHINDUCTOR_FX_GRAPH_CACHE="0")  # the graph must really compile (and autotune)
    proc = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {**seeded, **st.publish(store, cache)}, proc.stdout + proc.stderr


@pytest.mark.slow
def test_second_job_reuses_the_first_jobs_autotuning(tmp_path):
    store = tmp_path / "store"
    first, log1 = compile_in(tmp_path / "job0", store)
    assert "AUTOTUNE benchmarking" in log1  # the first job really autotuned
    assert first["seeded_entries"] == 0 and first["job_entries"] >= 2 and first["new_in_store"] == first["job_entries"]
    (shared,) = store.glob("*.json")
    assert st.count_entries(json.loads(shared.read_text())["cache"]) == first["job_entries"]

    second, log2 = compile_in(tmp_path / "job1", store)
    # every choice was in the store: Inductor neither precompiled nor benchmarked again
    assert second["seeded_entries"] == first["job_entries"]
    assert "AUTOTUNE benchmarking" not in log2
    assert second["new_in_store"] == 0


def _publish_one(store: str, cache: str, op: str) -> None:
    d = Path(cache) / "cache"
    d.mkdir(parents=True)
    for i in range(50):  # many rounds, so that the two writers overlap
        doc = {"system": {"hash": "h"}, "cache": {op: {f"inputs{i}": {"highest": {"choiceA": 0.1 * i}}}}}
        (d / "h").write_text(json.dumps(doc))
        st.publish(Path(store), Path(cache))


def test_concurrent_publishers_lose_nothing(tmp_path):
    store = tmp_path / "store"
    procs = [multiprocessing.get_context("spawn").Process(target=_publish_one, args=(str(store), str(tmp_path / op), op))
             for op in ("mm", "convolution")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = json.loads((store / "h.json").read_text())["cache"]
    assert sorted(cache) == ["convolution", "mm"]
    assert st.count_entries(cache) == 100
    assert not list(store.glob(".*.tmp"))  # atomic writes leave no temporary behind


def test_corrupt_store_file_is_set_aside_not_fatal(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "h.json").write_text('{"system": {}, "cache": {"mm": ')  # truncated
    out = st.seed(store, tmp_path / "job")
    assert out["seeded_entries"] == 0
    assert "h.json" in out["notes"][0] and "h.corrupt" in out["notes"][0]
    assert (store / "h.corrupt").exists() and not (store / "h.json").exists()


def test_merge_counts_only_new_choices_and_keeps_the_later_timing():
    into = {"mm": {"k": {"highest": {"a": 1.0, "b": 2.0}}}}
    new = {"mm": {"k": {"highest": {"b": 3.0, "c": 4.0}}}, "conv": {"j": {"highest": {"d": 5.0}}}}
    assert st.merge_entries(into, new) == 2
    assert into["mm"]["k"]["highest"] == {"a": 1.0, "b": 3.0, "c": 4.0}
    assert st.count_entries(into) == 4
