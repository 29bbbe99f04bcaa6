"""Faults round 5 (docs/reliability.md): each case as the battery found it, with real processes
(the sweeper command, `history compare`, `sweeper.store`), real storage (a folder, moto's S3
server) and real sweep folders made from the committed H200 records. The two-node cluster
cases are tests/test_storage.py and tests/test_own_cluster.py; the lost worker's retry is
tests/test_ray_launcher.py::test_ray_worker_killed_mid_job_is_retried."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from datetime import datetime
from pathlib import Path

import pytest

from conftest import moto_s3
from synthetic_sweeps import write_sweep

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


# --- storage: bytes as written (cases 1, 2) -------------------------------------------------


@pytest.fixture(scope="module")
def s3_server():
    with moto_s3() as got:
        yield got


def _gz(tmp_path: Path) -> tuple[Path, bytes]:
    """A C++ libraries tarball as a CPU job leaves it (gzip: pyarrow guesses compression
    from the name)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"\x7fELF" + os.urandom(4000)
        info = tarfile.TarInfo("kernel.so")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "x.libs.tar.gz"
    path.write_bytes(buf.getvalue())
    return path, buf.getvalue()


def test_a_folder_storage_gives_back_a_gz_file_as_it_was_written(tmp_path):
    """Case 1: pyarrow's compression="detect" decompressed `.libs.tar.gz` read from a folder,
    so it no longer unpacked, and every C++ kernel was built again."""
    from sweeper.stores.storage import Storage

    src, data = _gz(tmp_path)
    storage = Storage.of(str(tmp_path / "shared"))
    storage.put_file(src, "compile_store/torch-x/abc.libs.tar.gz")
    assert (tmp_path / "shared" / "compile_store" / "torch-x" / "abc.libs.tar.gz").read_bytes() == data
    storage.get_file("compile_store/torch-x/abc.libs.tar.gz", tmp_path / "back.tar.gz")
    assert (tmp_path / "back.tar.gz").read_bytes() == data
    with tarfile.open(tmp_path / "back.tar.gz", "r:gz") as tar:  # it unpacks
        assert tar.getnames() == ["kernel.so"]
    assert storage.read_bytes("compile_store/torch-x/abc.libs.tar.gz") == data


def test_an_s3_storage_keeps_a_gz_object_gzipped_once(tmp_path, s3_server):
    """Case 2: every `.gz` written to S3 was gzipped again on the way (the same default on
    write): read with a plain client, a trace was gzip of gzip."""
    from sweeper.stores.storage import Storage

    uri, client = s3_server
    src, data = _gz(tmp_path)
    storage = Storage.of(uri)
    storage.put_file(src, "sweeps/k/0/traces/step.json.gz")
    raw = client.get_object(Bucket="sweeps", Key="nightly/sweeps/k/0/traces/step.json.gz")["Body"].read()
    assert raw == data  # the bytes as written: a plain gzip reader reads it once, and it is the tar
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(raw)), mode="r:") as tar:
        assert tar.getnames() == ["kernel.so"]
    storage.get_file("sweeps/k/0/traces/step.json.gz", tmp_path / "back.gz")
    assert (tmp_path / "back.gz").read_bytes() == data


# --- a compile that missed storage (case 3), silent failures (case 4) -----------------------


def _kept_compile(store: Path, torch_version: str, config: dict) -> Path:
    from sweeper.stores import compile_store
    from sweeper.stores.autotune_store import torch_folder

    folder = torch_folder(store, torch_version)
    folder.mkdir(parents=True)
    stem = compile_store._stem(config)
    (folder / f"{stem}.bin").write_bytes(b"blob" * 100)
    (folder / f"{stem}.json").write_text(json.dumps({"torch": torch_version, "bytes": 400}))
    return folder / f"{stem}.bin"


def test_a_compile_that_came_back_through_the_driver_goes_to_storage_before_the_next_run(tmp_path, monkeypatch):
    """Case 3: with the storage down, three jobs' compiles came back into the driver's
    compile store; the next storage run never looked there and compiled them cold."""
    from sweeper.stores import compile_store, exchange
    from sweeper.stores.storage import Storage

    monkeypatch.setattr(exchange, "_torch_version", lambda: "2.14.1")
    config = {"model": "resnet18", "compile_store": str(tmp_path / "driver_store"), "autotune": False,
              "autotune_store": "off"}
    blob = _kept_compile(tmp_path / "driver_store", "2.14.1", config)
    storage = Storage.of(str(tmp_path / "shared"))
    _, seed = exchange.seeds(config, storage)
    assert seed is not None and seed.entry and any("moved to" in n and "driver's copy" in n and "removed" in n for n in seed.notes), seed.notes
    assert storage.stat(f"{seed.entry}.bin")[0] == 400 and storage.stat(f"{seed.entry}.json") is not None
    assert not blob.exists()  # the driver's copy went: the storage's is the one
    # the job's node reads it from there: a warm compile, not a cold one
    fetched = compile_store.fetch(seed, tmp_path / "node")
    assert fetched.source == "storage" and Path(fetched.path).read_bytes() == b"blob" * 100


def test_results_that_missed_storage_are_said_on_the_terminal_in_the_summary_and_the_report(tmp_path):
    """Case 4: server down mid-sweep: exit 0, the jobs' folders back through the driver with
    a note in the record only; nothing on the terminal, in summary.json or in the report."""
    from sweeper.reporting.notes import storage_missed_notes
    from sweeper.sweep import summary as sm

    rec = {"status": "ok", "job": {"storage_note": "its folder could not be written to s3://b/x (timeout): "
                                                   "it came back through Ray instead"},
           "timings": {"compile_store": {"notes": ["its compile could not be kept in s3://b/x: timeout"]}}}
    entry = sm.job_entry(3, ["model=resnet18"], tmp_path / "3", rec)
    assert "came back through Ray" in entry["storage_missed"] and "could not be kept" in entry["storage_missed"]
    text, failed = sm.closing_report([entry], tmp_path, ["model=resnet18"])
    assert not failed and "1 job missed the shared storage" in text and "#3: its folder could not be written" in text
    path = sm.write_summary(tmp_path, [entry], time.time(), ["model=resnet18"], done=True)
    assert json.loads(path.read_text())["counts"]["storage_missed"] == 1
    import pandas as pd

    notes = storage_missed_notes(pd.DataFrame({"job": [3], "storage_missed": [entry["storage_missed"]]}))
    assert len(notes) == 1 and "#3 (its folder could not be written" in notes[0]


def test_resume_runs_again_a_job_whose_folder_in_storage_is_gone(tmp_path):
    """Case 4: resume kept jobs whose artifacts were gone from storage without checking."""
    from sweeper.stores.storage import Storage
    from sweeper.sweep.control import stored_artifacts_missing

    storage = Storage.of(str(tmp_path / "shared"))
    storage.put_bytes(b"log", "sweeps/k/0/job.log")
    rec = {"job": {"stored_at": storage.location("sweeps/k/0"), "storage": storage.uri}}
    assert stored_artifacts_missing(rec) is None
    shutil.rmtree(tmp_path / "shared" / "sweeps")
    assert "is gone" in stored_artifacts_missing(rec)
    assert stored_artifacts_missing({"job": {}}) is None  # no storage: the folder is the sweep's own


# --- bounded calls (case 5), credentials (case 6), links (case 7) -----------------------------


def test_a_gcs_path_without_credentials_fails_in_seconds_not_minutes(monkeypatch):
    """Case 5: `storage_path=gs://bucket/x` with no credentials held the start for about 16
    minutes (pyarrow's GCS retry policy), deaf to Ctrl-C."""
    from sweeper.stores import storage as st

    monkeypatch.setattr(st, "CALL_TIMEOUT_S", 3.0)
    st._filesystem.cache_clear()
    for var in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    t0 = time.time()
    problem = st.Storage.of("gs://sweeper-no-such-bucket-5e1f/x").problem_within(30)
    took = time.time() - t0
    st._filesystem.cache_clear()
    assert problem is not None and "gs://sweeper-no-such-bucket-5e1f/x" in problem
    assert took < 25, took


def test_credentials_in_the_storage_uri_are_refused_before_anything_is_written(tmp_path):
    """Case 6: `storage_path='s3://KEY:SECRET@bucket/...'` copied the secret into
    summary.json, report.html, multirun.yaml, the re-run command and the check's error."""
    sweep = tmp_path / "sweep"
    proc = run("-m", "sweeper", "model=resnet18", "dry_run=true", "hydra.launcher.storage_path=s3://AKIAXX:s3cr3tv4lue@bucket/x",
               f"hydra.sweep.dir={sweep}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "AWS_ACCESS_KEY_ID" in out and "s3cr3tv4lue" not in out and "AKIAXX" not in out
    assert not sweep.exists()  # no multirun.yaml, no summary: nothing holds it
    from sweeper.stores.storage import Storage, StorageError, redacted

    assert redacted("s3://K:S@bucket/x") == "s3://***@bucket/x"
    with pytest.raises(StorageError, match="AWS_ACCESS_KEY_ID"):
        Storage("s3://K:S@bucket/x").stat("a")


def test_report_links_work_for_folders_and_object_storage_and_follow_no_other_scheme(tmp_path):
    """Case 7: links into object storage were `../../s3:/sweeps/...`, and a crafted record's
    log path `javascript:alert(1)` gave a live link."""
    from sweeper.reporting.html_parts import link

    assert link(str(tmp_path / "0" / "job.log"), tmp_path, "log") == '<a href="0/job.log">log</a>'
    s3 = link("s3://sweeps/nightly/sweeps/k-1/0/job.log", tmp_path, "log")
    assert "href" not in s3 and "s3://sweeps/nightly/sweeps/k-1/0/job.log" in s3
    assert "aws s3 cp s3://sweeps/nightly/sweeps/k-1/0/job.log ." in s3
    assert "gsutil cp -r gs://b/x/0 ." in link("gs://b/x/0", tmp_path, "folder")
    for bad in ("javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,<script>", "vbscript:x"):
        assert "href" not in link(bad, tmp_path, "log"), bad
    assert link("https://ci.example/job/1", tmp_path, "log") == '<a href="https://ci.example/job/1">log</a>'
    assert 'href="./javascript:x"' in link(str(tmp_path / "javascript:x"), tmp_path, "log")  # a file so named stays a file


# --- accuracy is a status the nightly judges (case 10) ----------------------------------------


def _failed_accuracy(sweep: Path, job: int) -> None:
    path = sweep / str(job) / "result.json"
    rec = json.loads(path.read_text())
    rec["accuracy"] = {"checked": True, "passed": False, "compared": 100, "failed_count": 3, "tolerance": 0.01,
                       "failed": ["loss", "fc.weight", "conv1.weight"]}
    path.write_text(json.dumps(rec))


def test_a_compiled_step_that_fails_its_accuracy_check_fails_the_nightly(tmp_path):
    """Case 10: with a compiled step that does not compute what eager does, the console said
    ok, summary.json had no accuracy field, and `history compare --fail-on-regression`
    against a run that passed said "2 unchanged" (exit 0)."""
    old = write_sweep(tmp_path / "old", 2, datetime(2026, 12, 1, 2))
    new = write_sweep(tmp_path / "new", 2, datetime(2026, 12, 2, 2))
    for sweep in (old, new):
        for j in (0, 1):
            path = sweep / str(j) / "result.json"
            rec = json.loads(path.read_text())
            rec["accuracy"] = {"checked": True, "passed": True, "compared": 100, "failed_count": 0, "tolerance": 0.01}
            path.write_text(json.dumps(rec))
    _failed_accuracy(new, 1)
    proc = run("-m", "sweeper.history", "compare", str(new), str(old), "--fail-on-regression")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "accuracy passed -> failed" in proc.stdout
    back = run("-m", "sweeper.history", "compare", str(old), str(new), "--fail-on-regression")
    assert "accuracy failed -> passed" in back.stdout  # said both ways
    # the sweep's own summary and closing lines
    from sweeper.sweep import summary as sm

    rec = json.loads((new / "1" / "result.json").read_text())
    entry = sm.job_entry(1, [], new / "1", rec)
    assert entry["accuracy"].startswith("failed: 3 of 100 tensors")
    text, _ = sm.closing_report([entry], new, [])
    assert text.splitlines()[0].startswith("ok, accuracy FAILED #1") and "does not compute what eager does" in text
    path = sm.write_summary(tmp_path, [entry], time.time(), [], done=True)
    assert json.loads(path.read_text())["counts"]["accuracy_failed"] == 1


def test_a_builds_comparison_flags_the_build_whose_step_fails_its_accuracy_check():
    """Case 10: a `python=stable,buggy` comparison never mentioned accuracy."""
    import pandas as pd

    from sweeper.analysis import regression as rg

    def jobs(acc):
        return pd.DataFrame([{"key": "k", "label": "resnet18", "status": "ok", "job": 0, "steady_step_ms": 10.0,
                              "compiled_step_ms": 10.0, "step_noise_pct": 1.0, "device_ms": 5.0,
                              "kernel_launches": 100, "busy_pct": 50.0, "gpu": "H200", "eager_step_ms": 20.0,
                              "accuracy": acc}])

    table = rg.compare_jobs(jobs("passed"), jobs("failed"))
    assert table.loc[0, "verdict"] == "accuracy passed -> failed" and len(rg.flagged(table)) == 1
    assert rg.compare_jobs(jobs("passed"), jobs("passed")).loc[0, "verdict"] == "unchanged"
    assert rg.compare_jobs(jobs("not checked: out of memory"), jobs("failed")).loc[0, "verdict"] == "unchanged"


# --- tables trusted only for the records they were made from (case 11) ------------------------


@pytest.fixture(scope="module")
def aggregated(tmp_path_factory):
    root = tmp_path_factory.mktemp("round5")
    old = write_sweep(root / "old", 2, datetime(2026, 12, 1, 2))
    assert run("-m", "sweeper.aggregate", str(old)).returncode == 0
    return root, old


def test_a_record_copied_in_with_an_older_time_is_read_not_its_stale_table(aggregated, tmp_path):
    """Case 11: a record copied in with an older mtime (`cp -p`, `touch -d`) gave "2
    unchanged" where the records said 2x slower."""
    root, old = aggregated
    new = write_sweep(tmp_path / "new", 2, datetime(2026, 12, 2, 2))
    assert run("-m", "sweeper.aggregate", str(new)).returncode == 0
    slow = write_sweep(tmp_path / "slow", 2, datetime(2026, 12, 2, 2), slower={0: 2.0, 1: 2.0})
    for j in (0, 1):  # the slow records into the aggregated sweep, keeping their (older) times
        shutil.copy2(slow / str(j) / "result.json", new / str(j) / "result.json")
        past = time.time() - 86400
        os.utime(new / str(j) / "result.json", (past, past))
    proc = run("-m", "sweeper.history", "compare", str(new), str(old), "--fail-on-regression")
    assert proc.returncode == 1 and "2 of 2 jobs flagged" in proc.stdout, proc.stdout[-3000:]


def test_tables_from_another_sweep_or_of_another_type_are_not_trusted(aggregated, tmp_path):
    """Case 11: tables copied from another sweep flagged "2 slower" falsely; a jobs.parquet
    with the right columns and text values crashed compare and trend."""
    import pandas as pd

    root, old = aggregated
    new = write_sweep(tmp_path / "new", 2, datetime(2026, 12, 2, 2))
    other = write_sweep(tmp_path / "other", 2, datetime(2026, 12, 2, 3), slower={0: 2.0, 1: 2.0})
    assert run("-m", "sweeper.aggregate", str(other)).returncode == 0
    shutil.copytree(other / "tables", new / "tables")
    proc = run("-m", "sweeper.history", "compare", str(new), str(old))
    assert proc.returncode == 0 and "0 of 2 jobs flagged" in proc.stdout, proc.stdout[-3000:]
    jobs = pd.read_parquet(new / "tables" / "jobs.parquet")
    jobs = jobs.astype({c: str for c in ("device_ms", "compiled_step_ms", "busy_pct")})
    jobs.to_parquet(new / "tables" / "jobs.parquet")
    for args in (["compare", str(new), str(old)], ["trend", str(tmp_path), "--out", str(tmp_path / "t.png")]):
        proc = run("-m", "sweeper.history", *args)
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


# --- input and files (cases 13 to 16) ----------------------------------------------------------


def test_a_trace_goes_to_a_path_with_a_backslash_in_it(tmp_path):
    """Case 13: a backslash in the sweep folder or scratch_dir name failed every job in
    profile_step (PyTorch's profiler turns `\\` into `/` in the trace's path)."""
    import torch

    from tasks.profiling import profile_calls

    trace = tmp_path / "my\\sweep" / "0" / "traces" / "step.json.gz"
    events = profile_calls(lambda: torch.ones(64) * 2, 2, "cpu", "sweeper.step", trace)
    assert trace.is_file() and events and not (tmp_path / "my" / "sweep").exists()


def _store_with_one_key(store: Path, name: str = "NVIDIA H200") -> None:
    folder = store / "torch-2.11.0+cu130"
    folder.mkdir(parents=True)
    (folder / "h200hash.json").write_text(json.dumps(
        {"system": {"device": {"name": name}}, "cache": {"mm": {"x": {"highest": {"a": 0.1, "b": 0.2}}}},
         "kernel_configs": {}}))


def test_store_files_that_cannot_be_written_are_said_not_a_traceback(tmp_path):
    """Case 14: `store export /proc/x.tgz` and `decisions --csv /proc/x.csv` (or a read-only
    file system) ended in a traceback."""
    store = tmp_path / "store"
    _store_with_one_key(store)
    for args in (["export", "/proc/sweeper-x.tgz"], ["decisions", "--csv", "/proc/sweeper-x.csv"]):
        proc = run("-m", "sweeper.store", "--store", str(store), *args)
        assert proc.returncode == 2 and "cannot be written" in proc.stderr and "Traceback" not in proc.stderr, \
            proc.stderr[-2000:]


def _export(path: Path, doc: dict, rel: str = "torch-2.11.0+cu130/h200hash.json") -> Path:
    from sweeper.stores import export as cmd

    data = json.dumps(doc).encode()
    manifest = json.dumps({"format": cmd.FORMAT, "version": cmd.FORMAT_VERSION, "created": "2026-12-07T00:00:00",
                           "files": [{"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                                      "ops": 0, "choices": 0, "kernel_configs": 0}]}).encode()
    with tarfile.open(path, "w:gz") as tar:
        for name, blob in (("manifest.json", manifest), (rel, data)):
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


@pytest.mark.parametrize("doc, says", [
    ({"system": {}, "cache": {"mm": {"x": {"highest": {"a": 0.1}}}}, "kernel_configs": {},
      "repeats": {"mm": {"x": {"highest": {"a": 5}}}}}, "repeats['mm']['x'] is not precisions to choices"),
    ({"system": {"device": "H200"}, "cache": {}, "kernel_configs": {}}, "system.device is str, not a mapping"),
])
def test_a_crafted_export_is_refused_whole_and_leaves_no_lock_file(tmp_path, doc, says):
    """Case 15: a `repeats` of another shape crashed the import after earlier keys merged and
    left lock files; `system.device` not a mapping imported with exit 0, after which `store
    show` and `decisions` crashed every time."""
    store = tmp_path / "store"
    bad = _export(tmp_path / "bad.tgz", doc)
    proc = run("-m", "sweeper.store", "--store", str(store), "import", str(bad))
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert not store.exists() or not any(store.rglob("*"))


def test_escape_sequences_in_store_names_are_shown_escaped(tmp_path):
    """Case 15: terminal escape sequences in names were printed raw."""
    store = tmp_path / "store"
    _store_with_one_key(store, name="H200\x1b[2J\x1b[31mred")
    proc = run("-m", "sweeper.store", "--store", str(store), "show")
    assert proc.returncode == 0 and "\x1b" not in proc.stdout and "\\x1b[2J" in proc.stdout


def test_an_export_that_unpacks_into_a_huge_key_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """Case 15: a 1.4 MB export unpacked into a 300 MB key file at 947 MB peak memory."""
    from sweeper.stores import export as cmd

    monkeypatch.setattr(cmd, "KEY_MAX_BYTES", 100_000)  # the cap, small here: the file below compresses to nothing
    doc = {"system": {}, "cache": {"mm": {"x" * 200_000: {}}}, "kernel_configs": {}}
    bad = _export(tmp_path / "big.tgz", doc)
    assert bad.stat().st_size < 5_000
    with pytest.raises(cmd.StoreCommandError, match="no key file of a store is that large"):
        cmd.read_export(bad)


@pytest.mark.parametrize("setting, says", [("num_cpus_per_job=inf", "a finite number"),
                                           ("num_gpus_per_job=inf", "a finite number"),
                                           (f"num_cpus_per_job={(os.cpu_count() or 1) + 1}", "no job could ever start")])
def test_resources_no_job_can_have_are_refused_before_ray_starts(tmp_path, setting, says):
    """Case 16: `num_cpus_per_job=inf` started Ray and ended in a traceback leaving a folder;
    `num_cpus_per_job=3` on a 2-CPU machine showed "1 running" forever (the dry run accepted it)."""
    sweep = tmp_path / "sweep"
    proc = run("-m", "sweeper", "model=resnet18", "dry_run=true", f"hydra.launcher.{setting}", f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert says in proc.stderr and "Traceback" not in proc.stderr
