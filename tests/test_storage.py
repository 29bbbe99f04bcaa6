"""Shared storage (hydra.launcher.storage_path): the storage itself on a folder and on an
S3-compatible server (moto's, on loopback), the compile store's entries read from it only
when the node lacks them, and real CPU sweeps on a two-node local Ray cluster whose compile
and artifacts never pass through the driver."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import moto_s3
from sweeper.stores import compile_store
from sweeper.stores.storage import Storage

ROOT = Path(__file__).resolve().parent.parent
TINY = ["mode=inference", "image_size=32", "batch_size=2", "measure.timed_steps=2", "measure.warmup_steps=1",
        "measure.profile_steps=1", "measure.module_rounds=2", "measure.module_calls_per_round=1",
        "measure.module_profile_calls=1", "measure.eager=false",
        "measure.steady_loop_s=0"]  # no steady loop: nothing here reads a figure over one (test_job_cpu.py does)


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server with a bucket (conftest.moto_s3): the storage URI."""
    with moto_s3() as (uri, _):
        yield uri


@pytest.fixture(params=["folder", "s3"])
def storage(request, tmp_path) -> Storage:
    if request.param == "folder":
        got = Storage.of(str(tmp_path / "shared"))
    else:
        got = Storage.of(request.getfixturevalue("s3_server"))
    assert got is not None
    return got


def test_storage_keeps_trees_and_files_and_says_where(storage, tmp_path):
    job = tmp_path / "job"
    (job / "traces").mkdir(parents=True)
    # not a .gz name: moto's server answers a HEAD of one with the size gzip would give it
    (job / "traces" / "step.json").write_bytes(b"t" * 5000)
    (job / "job.log").write_text("log\n")
    (job / "cache").mkdir()
    (job / "cache" / "big").write_bytes(b"x" * 100)
    assert storage.problem() is None
    assert storage.put_tree(job, "sweeps/a/0", leave_out=("cache",)) == 5004
    assert storage.stat("sweeps/a/0/traces/step.json")[0] == 5000
    assert storage.stat("sweeps/a/0/cache/big") is None  # left out
    assert storage.stat("sweeps/a/0/nothing") is None
    assert storage.get_file("sweeps/a/0/job.log", tmp_path / "back.log") == 4
    assert (tmp_path / "back.log").read_text() == "log\n"
    where = storage.location("sweeps/a/0")
    if storage.local:
        assert Path(where, "traces", "step.json").read_bytes() == b"t" * 5000
    else:  # the bucket and path, without the query that says how to connect
        assert where == "s3://sweeps/nightly/sweeps/a/0"


def test_a_storage_that_cannot_be_written_is_named_with_the_fix(tmp_path, s3_server):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    problem = Storage.of(str(blocked / "under")).problem()
    assert problem and "storage_path=" in problem and "every node sees" in problem
    no_bucket = Storage.of(s3_server.replace("s3://sweeps/", "s3://no-such-bucket/")).problem()
    assert no_bucket and "no-such-bucket" in no_bucket and "credentials" in no_bucket


def _left_blob(job_dir: Path, data: bytes) -> None:
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / compile_store.BLOB).write_bytes(data)
    (job_dir / compile_store.META).write_text(json.dumps({"torch": "2.99.0", "bytes": len(data)}))


def test_a_node_reads_a_store_entry_only_when_it_lacks_it(storage, tmp_path):
    config = {"model": "test_resnet", "mode": "inference", "compile_store": "on"}
    node_a, node_b = tmp_path / "node_a", tmp_path / "node_b"
    _left_blob(tmp_path / "job1", b"compiled-1" * 100)
    assert compile_store.keep_in_storage(storage, tmp_path / "job1", config, node_a) == 1000
    assert not (tmp_path / "job1" / compile_store.BLOB).exists()  # kept in the storage, not in the job folder

    seed = compile_store.reference(storage, "2.99.0", config)
    assert seed.data is None  # the driver sends a reference, not the bytes
    on_a = compile_store.fetch(seed, node_a)
    assert on_a.source == "node" and on_a.fetched_bytes == 0  # the node that compiled it kept its copy
    on_b = compile_store.fetch(seed, node_b)
    assert on_b.source == "storage" and on_b.fetched_bytes >= 1000
    assert Path(on_b.path).read_bytes() == b"compiled-1" * 100
    assert compile_store.fetch(seed, node_b).source == "node"  # read once

    _left_blob(tmp_path / "job2", b"compiled-2" * 100)  # a later compile of the same job, on node A
    compile_store.keep_in_storage(storage, tmp_path / "job2", config, node_a)
    again = compile_store.fetch(seed, node_b)
    assert again.source == "storage" and Path(again.path).read_bytes() == b"compiled-2" * 100
    (tmp_path / "job3").mkdir()
    spec = compile_store.place_seed(_spec(again), tmp_path / "job3")
    assert (tmp_path / "job3" / compile_store.SEED).read_bytes() == b"compiled-2" * 100
    assert spec.compile_seed.file == compile_store.SEED and spec.compile_seed.path is None

    missing = compile_store.fetch(compile_store.reference(storage, "2.99.0", {**config, "model": "other"}), node_b)
    assert missing.path is None and not missing.notes  # nothing stored for that job: a cold compile


def _spec(seed):
    from sweeper.job_spec import JobSpec

    return JobSpec(job_id="0", overrides=(), config={}, compile_seed=seed)


def _sweeps(runs: dict[str, tuple[Path, list[str]]]) -> dict[str, str]:
    """Sweeps of test_resnet run at once (name -> (sweep folder, overrides)); each one's
    output, asserted to have ended well."""
    procs = {name: subprocess.Popen([sys.executable, "-m", "sweeper", "model=test_resnet", *TINY, *args,
                                     f"hydra.sweep.dir={folder}"], cwd=ROOT, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
             for name, (folder, args) in runs.items()}
    outs = {name: proc.communicate(timeout=900)[0] for name, proc in procs.items()}
    for name, proc in procs.items():
        assert proc.returncode == 0, f"{name}: {outs[name][-4000:]}"
    return outs


def _stored_files(storage: Storage, rel: str) -> list[str]:
    import pyarrow.fs as pafs

    from sweeper.stores.storage import _filesystem

    fs, root = _filesystem(storage.uri)
    infos = fs.get_file_info(pafs.FileSelector(f"{root}/{rel}", recursive=True, allow_not_found=True))
    return sorted(i.path[len(root) + len(rel) + 2:] for i in infos if i.type == pafs.FileType.File)


@pytest.mark.slow
def test_on_a_two_node_cluster_the_compile_and_artifacts_never_pass_through_the_driver(tmp_path, s3_server):
    """Two sweeps on one two-node cluster at once, one a node: storage_path a folder, and an
    S3 server; each run cold, then again with another scratch folder (a node without the
    compile store's entry)."""
    from ray.cluster_utils import Cluster

    uris = {"folder": str(tmp_path / "shared"), "s3": s3_server}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=2)
    try:
        def runs(night: str) -> dict[str, tuple[Path, list[str]]]:
            return {kind: (tmp_path / kind / night, [
                f"hydra.launcher.address={cluster.address}", "hydra.launcher.num_cpus_per_job=2",
                f"hydra.launcher.storage_path='{uri}'",  # quoted: a URI's query holds = and &
                f"hydra.launcher.scratch_dir={tmp_path / kind / ('scratch-' + night)}",
                # the driver's compile store of this test alone: a compile of the same job that another
                # test's sweep brought back into the session's store was put into this storage by the
                # driver (compile_store.promote), and the cold run ran warm
                f"compile_store={tmp_path / kind / 'compile_store'}"]) for kind, uri in uris.items()}

        _sweeps(runs("cold"))
        kept = {}
        for kind, uri in uris.items():
            storage = Storage.of(uri)
            assert storage is not None
            job_dir = tmp_path / kind / "cold" / "0"
            rec = json.loads((job_dir / "result.json").read_text())
            # the driver's job folder holds the record (and Hydra's files), nothing the job wrote
            assert sorted(p.name for p in job_dir.iterdir()) == [".hydra", "result.json"], kind
            stored = _stored_files(storage, "sweeps/" + rec["job"]["stored_at"].rsplit("/sweeps/", 1)[1])
            assert {"job.log", "result.json", "traces/step.json.gz"} <= set(stored), (kind, stored)
            assert rec["artifacts"]["traces"]["step"] == rec["job"]["stored_at"] + "/traces/step.json.gz"
            assert "kept_bytes" in rec["timings"]["compile_store"], (kind, rec["timings"]["compile_store"])
            kept[kind] = rec["timings"]["compile_store"]["kept_bytes"]
            through = rec["job"]["driver_bytes"]
            # what went out and came back: the spec, and the record plus a small constant; not the compile
            assert through["out"] < 16_000 and through["back"] <= (job_dir / "result.json").stat().st_size + 16_000 \
                < kept[kind], (kind, through, kept[kind])

        _sweeps(runs("warm"))  # a later night on nodes without the entry: read from the storage, compiled warm
        for kind in uris:
            again = json.loads((tmp_path / kind / "warm" / "0" / "result.json").read_text())
            seeded = again["timings"]["compile_store"]
            assert seeded["from"] == "storage" and seeded["fetched_bytes"] >= kept[kind] and seeded["loaded"], seeded
            assert again["timings"]["compile_cache"]["fxgraph_hits"] >= 1, kind
            assert again["job"]["driver_bytes"]["out"] < 16_000, kind  # the reference went out, not the compile
    finally:
        cluster.shutdown()
