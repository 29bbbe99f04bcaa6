"""The autotune store (sweeper/stores/autotune_store.py) with real Inductor processes:
on a CPU, max-autotune of a frozen Linear benchmarks C++ GEMM templates against MKL and
records the timings in the same PersistentCache file as on a GPU."""

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.stores import autotune_store as st
from sweeper.stores.autotune_merge import merge_entries
from tasks import job_stores

ROOT = Path(__file__).resolve().parent.parent
COMPILE = """
import torch
m = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
f = torch.compile(m, mode="max-autotune-no-cudagraphs")
with torch.no_grad():
    f(torch.randn(8, 64))
"""


TORCH = "2.11.0+test"  # a torch version as the driver names the store's folder


def compile_in(cache: Path, store: Path, job_dir: Path) -> tuple[dict, str]:
    """One job's round trip: the driver loads the store into the job's spec, the job seeds
    its cache from it, compiles in a fresh process, leaves its entries in its folder, and
    the driver absorbs them into the store."""
    job_dir.mkdir(parents=True)
    seeded = job_stores.seed_autotune(st.load(store, TORCH), cache, TORCH)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), TORCHINDUCTOR_FREEZING="1",
               TORCHINDUCTOR_FX_GRAPH_CACHE="0")  # the graph must really compile (and autotune)
    proc = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job_entries = job_stores.write_autotune_entries(job_dir, cache, TORCH)["job_entries"]
    return {**seeded, "job_entries": job_entries, "new_in_store": st.absorb(store, job_dir)["new_in_store"]}, \
        proc.stdout + proc.stderr


@pytest.mark.slow
def test_second_job_reuses_the_first_jobs_autotuning(tmp_path):
    store = tmp_path / "store"
    first, log1 = compile_in(tmp_path / "cache0", store, tmp_path / "job0")
    assert "AUTOTUNE benchmarking" in log1  # the first job really autotuned
    assert first["seeded_entries"] == 0 and first["job_entries"] >= 2 and first["new_in_store"] == first["job_entries"]
    (shared,) = (store / f"torch-{TORCH}").glob("*.json")
    assert st.count_entries(json.loads(shared.read_text())["cache"]) == first["job_entries"]
    assert not (tmp_path / "job0" / st.ENTRIES_FILE).exists()  # absorbed: the store holds them

    second, log2 = compile_in(tmp_path / "cache1", store, tmp_path / "job1")
    # every choice was in the store: Inductor neither precompiled nor benchmarked again
    assert second["seeded_entries"] == first["job_entries"]
    assert "AUTOTUNE benchmarking" not in log2
    assert second["new_in_store"] == 0


def entries(job_dir: Path, torch_version: str, system: str, op: str, n: int) -> None:
    doc = {"system": {"hash": system}, "cache": {op: {f"inputs{i}": {"highest": {"choiceA": 0.1 * i}}
                                                      for i in range(n)}}}
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / st.ENTRIES_FILE).write_text(json.dumps({"torch": torch_version, "systems": {system: doc}}))


def test_store_is_keyed_by_torch_version_and_system(tmp_path):
    store = tmp_path / "store"
    entries(tmp_path / "a", "2.11.0", "h200hash", "mm", 3)
    entries(tmp_path / "b", "2.11.0", "a100hash", "mm", 2)  # another GPU model or CUDA/Triton: another hash
    entries(tmp_path / "c", "2.12.0", "h200hash", "mm", 5)
    assert [st.absorb(store, tmp_path / d)["new_in_store"] for d in "abc"] == [3, 2, 5]
    assert sorted(p.relative_to(store).as_posix() for p in store.rglob("*.json")) == [
        "torch-2.11.0/a100hash.json", "torch-2.11.0/h200hash.json", "torch-2.12.0/h200hash.json"]
    seed = st.load(store, "2.11.0")
    assert sorted(seed.systems) == ["a100hash", "h200hash"]
    # the job seeds every system of its torch: Inductor reads only its own system's file
    got = job_stores.seed_autotune(seed, tmp_path / "cache", "2.11.0")
    assert got["seeded_entries"] == 5 and sorted(p.name for p in (tmp_path / "cache" / "cache").iterdir()) == [
        "a100hash", "h200hash"]
    # entries of another torch are never used, and the record says why
    other = job_stores.seed_autotune(seed, tmp_path / "cache2", "2.12.0")
    assert other["seeded_entries"] == 0 and "not used" in other["notes"][0]
    assert not (tmp_path / "cache2").exists()
    # a new torch starts cold
    assert st.load(store, "2.13.0").systems == {}


def test_store_off_values():
    assert not any(st.enabled(v) for v in (None, "", "off", "OFF", "none", "null", "false", False))
    assert st.enabled("~/.cache/sweeper/autotune") and st.enabled("/data/store")


def _absorb_many(store: str, root: str, op: str) -> None:
    for i in range(50):  # many rounds, so that the two writers overlap
        entries(Path(root) / f"{op}{i}", "2.11.0", "h", op, i + 1)
        st.absorb(Path(store), Path(root) / f"{op}{i}")


def test_concurrent_drivers_lose_nothing(tmp_path):
    """Two sweeps on one machine share the store: neither loses the other's entries."""
    store = tmp_path / "store"
    procs = [multiprocessing.get_context("spawn").Process(target=_absorb_many, args=(str(store), str(tmp_path), op))
             for op in ("mm", "convolution")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    folder = store / "torch-2.11.0"
    cache = json.loads((folder / "h.json").read_text())["cache"]
    assert sorted(cache) == ["convolution", "mm"]
    assert st.count_entries(cache) == 100
    assert not list(folder.glob(".*.tmp"))  # atomic writes leave no temporary behind


def test_corrupt_store_file_is_set_aside_not_fatal(tmp_path):
    folder = tmp_path / "store" / "torch-2.11.0"
    folder.mkdir(parents=True)
    (folder / "h.json").write_text('{"system": {}, "cache": {"mm": ')  # truncated
    seed = st.load(tmp_path / "store", "2.11.0")
    assert seed.systems == {} and "h.json" in seed.notes[0] and "h.corrupt" in seed.notes[0]
    assert (folder / "h.corrupt").exists() and not (folder / "h.json").exists()
    got = job_stores.seed_autotune(seed, tmp_path / "cache", "2.11.0")
    assert got["seeded_entries"] == 0 and got["notes"] == list(seed.notes)  # the job's record says so
    # a corrupt file met when absorbing is set aside too, and the job's entries start it afresh
    (folder / "h.json").write_text("not json")
    entries(tmp_path / "job", "2.11.0", "h", "mm", 4)
    assert st.absorb(tmp_path / "store", tmp_path / "job")["new_in_store"] == 4
    assert st.count_entries(json.loads((folder / "h.json").read_text())["cache"]) == 4


def test_merge_counts_only_new_choices_and_keeps_the_later_timing():
    into = {"mm": {"k": {"highest": {"a": 1.0, "b": 2.0}}}}
    new = {"mm": {"k": {"highest": {"b": 3.0, "c": 4.0}}}, "conv": {"j": {"highest": {"d": 5.0}}}}
    assert merge_entries(into, new) == 2
    assert into["mm"]["k"]["highest"] == {"a": 1.0, "b": 3.0, "c": 4.0}
    assert st.count_entries(into) == 4


@pytest.mark.slow
def test_round_trip_through_the_driver_on_a_two_node_cluster(tmp_path):
    """Two jobs of the same shapes with max-autotune on a two-node Ray cluster (workers on
    the node without the driver): the second waits for the first although a slot is free,
    leaves with the first's timings, and autotunes nothing again."""
    from ray.cluster_utils import Cluster

    from sweeper.record import read_record

    store = tmp_path / "store"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=4)  # two jobs of 2 CPUs fit on the worker node at once
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "sweeper", "model=test_resnet", "seed=0,1", "autotune=on", "amp=off",
             "mode=inference", "image_size=32", "batch_size=8", "+inductor.freezing=true", "measure.timed_steps=2",
             "measure.warmup_steps=1", "measure.profile_steps=1", "measure.module_rounds=2",
             "measure.module_calls_per_round=1", "measure.module_profile_calls=1", "measure.eager=false",
             "measure.steady_loop_s=0", f"autotune_store={store}", f"hydra.launcher.address={cluster.address}",
             "hydra.launcher.num_cpus_per_job=2", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
            cwd=ROOT, capture_output=True, text=True, timeout=900)
        head = cluster.head_node.node_id
    finally:
        cluster.shutdown()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    first, second = (read_record(tmp_path / "sweep" / n) for n in ("0", "1"))
    assert first["job"]["ray_node_id"] != head and second["job"]["ray_node_id"] != head
    assert second["job"]["started_at"] >= first["job"]["finished_at"]  # it waited for the first
    a, b = first["timings"]["autotune_store"], second["timings"]["autotune_store"]
    assert a["seeded_entries"] == 0 and a["job_entries"] >= 1 and a["new_in_store"] == a["job_entries"]
    assert b["seeded_entries"] == a["job_entries"] and b["new_in_store"] == 0
    logs = [(tmp_path / "sweep" / n / "job.log").read_text() for n in ("0", "1")]
    assert "AUTOTUNE benchmarking" in logs[0] and "AUTOTUNE benchmarking" not in logs[1]
    (kept,) = store.glob("torch-*/*.json")  # the driver's store, on the driver's machine
    assert st.count_entries(json.loads(kept.read_text())["cache"]) == a["job_entries"]
    assert not list((tmp_path / "sweep").glob(f"*/{st.ENTRIES_FILE}"))  # absorbed into the store


def test_each_stopped_run_of_a_job_is_listed_and_its_log_kept(tmp_path):
    """Three sittings of one job: the records' chain (sweeper/stores/exchange.earlier_attempts)
    and the logs moved aside (control.keep_earlier_log), as the launcher does on resume."""
    from sweeper.sweep.control import Job, keep_earlier_log
    from sweeper.job_spec import JobSpec
    from sweeper.sweep.job_process import failed_record
    from sweeper.stores.exchange import earlier_attempts

    config = {"autotune": True, "autotune_store": str(tmp_path / "store")}
    job = Job(0, ["model=mixnet_l"], None, tmp_path / "0", {})
    job.job_dir.mkdir()

    def stopped(phase_s, ops, seeded, before=None):
        store = {"job_ops": ops, "job_entries": 10 * ops, "job_kernel_configs": 0, "partial": True,
                 "phase_s_at_stop": phase_s, "seeded_ops": seeded, **({"earlier_attempts": before} if before else {})}
        return {"status": "cancelled", "reason": "cancelled", "job": {"duration_s": phase_s + 20},
                "timings": {"autotune_store": store}}

    (job.job_dir / "job.log").write_text("sitting 1")
    first = earlier_attempts(config, stopped(1274.0, 73, 0), log=keep_earlier_log(job))
    (job.job_dir / "job.log").write_text("sitting 2")
    second = earlier_attempts(config, stopped(600.0, 75, 73, first), log=keep_earlier_log(job))
    assert [a["phase_s_at_stop"] for a in second] == [1274.0, 600.0]
    assert [(a["seeded_ops"], a["job_ops"]) for a in second] == [(0, 73), (73, 75)]
    assert [a["log"] for a in second] == ["job.attempt1.log", "job.attempt2.log"]
    assert (job.job_dir / "job.attempt1.log").read_text() == "sitting 1"
    assert (job.job_dir / "job.attempt2.log").read_text() == "sitting 2"
    assert not (job.job_dir / "job.log").exists()  # the next run writes its own
    # a stopped run that gave nothing adds no entry but keeps those before it; an ok one ends the chain
    empty = stopped(5.0, 0, 75, second)
    empty["timings"]["autotune_store"]["job_entries"] = 0
    assert earlier_attempts(config, empty) == second
    assert earlier_attempts(config, {**stopped(5.0, 75, 75, second), "status": "ok"}) is None
    assert earlier_attempts({**config, "autotune": False}, stopped(5.0, 75, 0)) is None
    # a run stopped before its first partial write: the launcher's record still lists the runs before it
    job.job_dir.joinpath("job.log").write_text("sitting 3, stopped while tracing")
    record = failed_record(JobSpec("0", tuple(job.overrides), config, earlier_attempts=second), job.job_dir,
                           "cancelled (Ctrl-C or SIGTERM) before it finished", 12.0, status="cancelled")
    assert earlier_attempts(config, record) == second
