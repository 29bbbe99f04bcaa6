"""The autotune store's own command (sweeper/stores/command.py, export.py): show, export, import, prune; and
that two writers into one store lose nothing. The store files are made by the store's own
functions (sweeper/stores/autotune_store.py), as a job's entries are absorbed."""

import io
import json
import multiprocessing
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from sweeper.stores import command as cmd
from sweeper.stores.export import MANIFEST
from sweeper.stores import autotune_store as st
from tasks import job_stores
from sweeper.torch_internals.kernel_configs import CODE_INDEX

ROOT = Path(__file__).resolve().parent.parent
H200 = {"hash": "h200hash", "device": {"name": "NVIDIA H200"}}


def give(store: Path, job: Path, torch="2.11.0+cu130", system="h200hash", ops=3, configs=2, tag="a") -> dict:
    """One job's entries (timings of `ops` ops, `configs` kernel configs) absorbed into store."""
    cache = {"mm": {f"{tag}inputs{i}": {"highest": {"choiceA": 0.1 * i, "choiceB": 0.2}} for i in range(ops)}}
    kernel_configs = {f"{tag[:1] * 2}/{tag}{i}.best_config": json.dumps({"XBLOCK": 128, "num_warps": 4, "num_stages": 1,
                                                                         "found_by_coordesc": True})
                      for i in range(configs)}
    job.mkdir(parents=True, exist_ok=True)
    (job / st.ENTRIES_FILE).write_text(json.dumps(
        {"torch": torch, "partial": False, "systems": {system: {"system": H200, "cache": cache,
                                                                "kernel_configs": kernel_configs}}}))
    return st.absorb(store, job)


def run(*args, store: Path):
    return subprocess.run([sys.executable, "-m", "sweeper.store", "--store", str(store), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_export_then_import_carries_every_key_to_another_store(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    give(a, tmp_path / "j1", ops=3, configs=2)
    give(a, tmp_path / "j2", torch="2.12.0", system="otherhash", ops=1, configs=0, tag="b")
    give(b, tmp_path / "j3", ops=2, configs=1, tag="c")  # the other machine already has some of its own
    out = run("export", str(tmp_path / "s.tgz"), store=a)
    assert out.returncode == 0, out.stderr
    assert "exported 2 keys (4 ops, 2 kernel configs)" in out.stdout
    assert (tmp_path / "s.tgz").stat().st_size < 5e6
    got = run("import", str(tmp_path / "s.tgz"), store=b)
    assert got.returncode == 0, got.stderr
    assert "imported 2 keys" in got.stdout and "8 timed choices and 2 kernel configs were new" in got.stdout
    mine = st.read_doc(b / "torch-2.11.0+cu130" / "h200hash.json")
    assert st.count_ops(mine["cache"]) == 5 and len(mine["kernel_configs"]) == 3  # merged, nothing lost
    assert st.count_ops(st.read_doc(b / "torch-2.12.0" / "otherhash.json")["cache"]) == 1
    # what a job of that build then starts with on the other machine
    seed = st.load(b, "2.11.0+cu130")
    assert st.count_ops(seed.systems["h200hash"]["cache"]) == 5
    again = run("import", str(tmp_path / "s.tgz"), store=b)  # importing twice adds nothing
    assert "0 timed choices and 0 kernel configs were new" in again.stdout
    shown = run("show", store=b)
    assert shown.returncode == 0
    line = next(x for x in shown.stdout.splitlines() if x.startswith("2.11.0+cu130"))
    assert "NVIDIA H200" in line and line.split()[4:7] == ["5", "10", "3"]  # ops, choices, kernel configs
    assert "(today)" in line
    via_sweeper = subprocess.run([sys.executable, "-m", "sweeper", "store", "--store", str(b), "show"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=120)
    assert via_sweeper.returncode == 0 and via_sweeper.stdout == shown.stdout


def _export(tmp_path: Path) -> Path:
    give(tmp_path / "a", tmp_path / "j1")
    assert cmd.main(["--store", str(tmp_path / "a"), "export", str(tmp_path / "s.tgz")]) == 0
    return tmp_path / "s.tgz"


def _rewrite(src: Path, dest: Path, change) -> Path:
    """A copy of an export with its members passed through change(name, bytes) -> bytes."""
    with tarfile.open(src) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    with tarfile.open(dest, "w:gz") as tar:
        for m, data in members:
            data = change(m.name, data)
            m.size = len(data)
            tar.addfile(m, io.BytesIO(data))
    return dest


def _manifest_version(name, data, version=2):
    if name != MANIFEST:
        return data
    return json.dumps({**json.loads(data), "version": version}).encode()


@pytest.mark.parametrize("damage, says", [
    ("truncated", "damaged or not a sweeper store export"),
    ("changed", "does not match its checksum"),
    ("foreign", "an export of format version 2; this sweeper reads version 1"),
    ("not_an_export", "not a sweeper store export (no manifest.json)"),
    ("missing", "no such file"),
])
def test_a_damaged_or_foreign_file_is_refused_and_the_store_is_untouched(tmp_path, damage, says):
    good = _export(tmp_path)
    target = tmp_path / "b"
    give(target, tmp_path / "j0", ops=1, configs=0, tag="z")
    before = (target / "torch-2.11.0+cu130" / "h200hash.json").read_bytes()
    bad = tmp_path / "bad.tgz"
    if damage == "truncated":
        bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif damage == "changed":  # a key file altered after export
        _rewrite(good, bad, lambda n, d: d.replace(b"0.2", b"0.3") if n != MANIFEST else d)
    elif damage == "foreign":
        _rewrite(good, bad, _manifest_version)
    elif damage == "not_an_export":
        with tarfile.open(bad, "w:gz") as tar:
            tar.add(tmp_path / "a" / "torch-2.11.0+cu130" / "h200hash.json", arcname="h200hash.json")
    out = run("import", str(bad), store=target)
    assert out.returncode == 2, out.stdout + out.stderr
    assert says in out.stderr and str(bad) in out.stderr
    assert (target / "torch-2.11.0+cu130" / "h200hash.json").read_bytes() == before


def test_an_empty_store_has_nothing_to_export(tmp_path):
    out = run("export", str(tmp_path / "s.tgz"), store=tmp_path / "none")
    assert out.returncode == 2 and "the store is empty" in out.stderr and not (tmp_path / "s.tgz").exists()
    assert "empty" in run("show", store=tmp_path / "none").stdout


def test_prune_drops_keys_unused_for_n_days(tmp_path):
    store = tmp_path / "s"
    give(store, tmp_path / "j1")
    give(store, tmp_path / "j2", torch="2.12.0", tag="b")
    old = store / "torch-2.11.0+cu130" / "h200hash.used"
    long_ago = time.time() - 40 * 86400
    os.utime(old, (long_ago, long_ago))
    dry = run("prune", "--days", "30", "--dry-run", store=store)
    assert "would drop torch-2.11.0+cu130/h200hash" in dry.stdout and old.exists()
    out = run("prune", "--days", "30", store=store)
    assert out.returncode == 0 and "dropped torch-2.11.0+cu130/h200hash" in out.stdout
    assert "1 of 2 keys dropped" in out.stdout
    assert [p.relative_to(store).as_posix() for p in cmd.keys(store)] == ["torch-2.12.0/h200hash.json"]
    # a job seeded from a key counts as a use: it stays
    kept = store / "torch-2.12.0" / "h200hash.used"
    os.utime(kept, (long_ago, long_ago))
    st.load(store, "2.12.0")
    assert "0 of 1 keys dropped" in run("prune", "--days", "30", store=store).stdout


@pytest.mark.parametrize("days", ["nan", "inf", "-1"])
def test_prune_refuses_a_number_of_days_that_is_not_one(tmp_path, days):
    """`--days nan` once dropped every key: NaN is older than nothing and younger than nothing."""
    store = tmp_path / "s"
    give(store, tmp_path / "j1")
    out = run("prune", "--days", days, store=store)
    assert out.returncode == 2 and f"--days {float(days)}: a number of days, 0 or more" in out.stderr
    assert "nothing was dropped" in out.stderr
    assert [p.relative_to(store).as_posix() for p in cmd.keys(store)] == ["torch-2.11.0+cu130/h200hash.json"]


def _import_many(store: str, root: str, tag: str) -> None:
    """One writer: 25 jobs absorbed and 25 exports of another store imported, interleaved."""
    for i in range(25):
        give(Path(store), Path(root) / f"{tag}job{i}", ops=1, configs=1, tag=f"{tag}{i}")
        other = Path(root) / f"{tag}other{i}"
        give(other, Path(root) / f"{tag}x{i}", ops=1, configs=1, tag=f"{tag}imp{i}")
        cmd.export(other, Path(root) / f"{tag}{i}.tgz")
        cmd.import_(Path(store), Path(root) / f"{tag}{i}.tgz")


def test_two_writers_into_one_store_lose_nothing(tmp_path):
    """Two sweeps (absorbing their jobs' entries) and imports into one store at once."""
    store = tmp_path / "store"
    procs = [multiprocessing.get_context("spawn").Process(target=_import_many, args=(str(store), str(tmp_path), t))
             for t in ("p", "q")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    doc = st.read_doc(store / "torch-2.11.0+cu130" / "h200hash.json")
    assert st.count_ops(doc["cache"]) == 100 and len(doc["kernel_configs"]) == 100


H200_EXPORT = ROOT / "tests" / "fixtures" / "h200" / "headline_store.tgz"  # bench/results/headline: after the second run
H200_SYSTEM = "c33ff64252de0fc95aafeb63c22d2f93666cf684f9102841c20702613368c40d"  # Inductor's hash of that H200


def test_the_h200_headline_export_imports_and_seeds_only_that_gpu(tmp_path):
    """The store exported on the H200 after the headline's first run (both max-autotune
    training jobs, mixnet_l's and densenet121's, finished across sittings) and its second
    run (1125 kernel configs; 916 of them, those the second run's jobs gave or met again,
    with the code key that a renamed kernel finds its config by), as a later sitting imports it."""
    store = tmp_path / "store"
    got = run("import", str(H200_EXPORT), store=store)
    assert got.returncode == 0, got.stderr
    assert "2449 timed choices and 1125 kernel configs were new" in got.stdout
    shown = run("show", store=store)
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if line.startswith("2.11.0+cu130"))
    assert "NVIDIA H200" in row and row.split()[4:7] == ["142", "2449", "1125"], row
    seed = st.load(store, "2.11.0+cu130")
    same_gpu = job_stores.seed_autotune(seed, tmp_path / "h200_cache", "2.11.0+cu130", H200_SYSTEM, coordinate_descent=True)
    assert (same_gpu["seeded_ops"], same_gpu["seeded_kernel_configs"]) == (142, 1125)
    assert len(list((tmp_path / "h200_cache").glob("*/*.best_config"))) == 1125  # where its kernels look
    # the code index a renamed kernel looks in: one entry a code key (916 keyed configs, two
    # pairs of them of the same code)
    index = json.loads((tmp_path / "h200_cache" / CODE_INDEX).read_text())
    assert same_gpu["seeded_kernel_codes"] == len(index) == 914
    # another GPU model (another system hash) uses none of it: Inductor reads only its own
    # GPU's timings file; a job without coordinate descent none of these configs (all 1125 found by it)
    other = job_stores.seed_autotune(seed, tmp_path / "other_cache", "2.11.0+cu130", "another-gpu", coordinate_descent=True)
    no_coordesc = job_stores.seed_autotune(seed, tmp_path / "plain_cache", "2.11.0+cu130", H200_SYSTEM, coordinate_descent=False)
    assert (other["seeded_ops"], other["seeded_kernel_configs"]) == (0, 0)
    assert no_coordesc["seeded_ops"] == 142 and no_coordesc["seeded_kernel_configs"] == 0
    assert not list((tmp_path / "other_cache").glob("*/*.best_config"))
