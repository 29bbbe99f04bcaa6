"""Faults round 6: the cases of the issue that this file covers so far (the nightly gate and
the history: a broken job is a change, a night is counted once, counts and --out are
checked before the analysis). The nights are tables written as the aggregate writes them
(bench/change_detection.py's generator), read by the real `python -m sweeper.history`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    from conftest import change_detection_bench

    return change_detection_bench()


def _history(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeper.history", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def bench_models():
    bench = _bench()
    return bench, bench.real_models(np.random.default_rng(0))


@pytest.mark.parametrize("how", ["failed", "missing"])
def test_a_job_that_breaks_is_a_change_the_gate_fails_on(bench_models, tmp_path, how):
    """Case 6: a job that failed (or was not in the sweep) on each of the last 3 nights passed
    `--fail-on-regression` with "0 changes" before; ok -> failed and ok -> missing are changes."""
    bench, models = bench_models
    bench.write_tables(tmp_path, models, 12, 10, np.random.default_rng(3), broken=(7, 4, how))
    got = _history("changes", str(tmp_path), "--fail-on-regression")
    assert got.returncode == 1, got.stdout + got.stderr
    lines = got.stdout.splitlines()
    assert lines[1].startswith("1 change"), got.stdout
    assert lines[2].startswith(f"- night07: 1 job {how} that ran ok the night before:"), got.stdout


def test_a_night_is_counted_once_whatever_links_reach_it(bench_models, tmp_path):
    """Case 8: a `latest` link added a night, and a link to the root doubled every night (6
    nights passed the 7-night minimum)."""
    bench, models = bench_models
    root = tmp_path / "nightly"
    nights = bench.write_tables(root, models, 8, 6, np.random.default_rng(4))
    (root / "latest").symlink_to(nights[-1])
    (root / "again").symlink_to(root)
    got = _history("changes", str(root))
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[0].startswith("# change points over 6 nights"), got.stdout
    assert "too few complete nights to tell a change point (6; at least 7)" in got.stdout, got.stdout
    trend = _history("trend", str(root), "--out", str(tmp_path / "trend.png"))
    assert trend.returncode == 0, trend.stderr


@pytest.mark.parametrize("args, word", [(["--last", "0"], "--last"), (["--last", "-1"], "--last"),
                                        (["--top", "-3"], "--top"), (["--last", "x"], "--last")])
def test_counts_must_be_one_or_more(tmp_path, args, word):
    """Case 9: `--last 0` read every night, `--last -1` dropped one, `--top -3` printed nonsense."""
    got = _history("changes", str(tmp_path), *args)
    assert got.returncode == 2 and word in got.stderr and "Traceback" not in got.stderr, got.stderr
    if args[0] == "--last":
        got = _history("trend", str(tmp_path), *args)
        assert got.returncode == 2 and word in got.stderr, got.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: the read-only folder is tested as a user")
def test_out_that_cannot_be_written_is_said_before_the_analysis(bench_models, tmp_path):
    bench, models = bench_models
    bench.write_tables(tmp_path / "n", models, 4, 7, np.random.default_rng(5))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    got = _history("changes", str(tmp_path / "n"), "--out", str(locked / "x"))
    assert got.returncode == 2 and "cannot be written" in got.stderr and "Traceback" not in got.stderr, got.stderr


def test_out_on_a_file_is_said_before_the_analysis(bench_models, tmp_path):
    """Case 9's --out: a place that cannot be a folder (a file is there) ended in a traceback
    after the analysis (changes, compare, trend, confirm)."""
    bench, models = bench_models
    bench.write_tables(tmp_path / "n", models, 4, 7, np.random.default_rng(5))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for cmd in (["changes", str(tmp_path / "n")], ["compare", str(tmp_path / "n" / "night06")],
                ["confirm", str(tmp_path / "n" / "night06"), str(tmp_path / "n" / "night05")]):
        got = _history(*cmd, "--out", str(blocker / "sub"))
        assert got.returncode == 2 and "cannot be written" in got.stderr and "Traceback" not in got.stderr, \
            (cmd, got.stderr)
    got = _history("trend", str(tmp_path / "n"), "--out", str(blocker / "sub" / "trend.png"))
    assert got.returncode == 2 and "cannot be written" in got.stderr, got.stderr


def test_a_fifo_in_place_of_a_summary_or_record_hangs_nothing(bench_models, tmp_path):
    """Case 14: a FIFO in place of summary.json hung `changes`, and one in place of a record
    hung the aggregation; only regular files are opened."""
    from sweeper.record import RecordError, read_record

    bench, models = bench_models
    root = tmp_path / "nightly"
    nights = bench.write_tables(root, models, 4, 8, np.random.default_rng(6))
    (nights[3] / "summary.json").unlink()
    os.mkfifo(nights[3] / "summary.json")
    got = subprocess.run([sys.executable, "-m", "sweeper.history", "changes", str(root)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and "# change points over 7 nights" in got.stdout, got.stdout + got.stderr
    assert f"skipped {nights[3]}" in got.stderr and "not a regular file" in got.stderr, got.stderr
    job = tmp_path / "job"
    job.mkdir()
    os.mkfifo(job / "result.json")
    with pytest.raises(RecordError, match="not a regular file"):
        read_record(job)


def test_seeds_past_torch_and_repeated_seeds_stop_the_sweep(tmp_path):
    """Case 18: a seed above 2^63 passed the checks and failed in the job; `seed=0,0` made two
    identical jobs. Both stop the sweep before any job, with the fix."""
    from sweeper.sweep.validate import SweepConfigError, check_sweep, job_problems

    cfg = {"model": "resnet18", "seed": 2 ** 63}
    assert job_problems(cfg) == [f"seed={2 ** 63}: must be a whole number from 0 to 2^63-1 ({2 ** 63 - 1})"]
    assert job_problems({"model": "resnet18", "seed": 2 ** 63 - 1}) == []
    assert "seed=-1" in job_problems({"model": "resnet18", "seed": -1})[0]
    with pytest.raises(SweepConfigError, match=r"job #1 \(seed=0\): the same job as #0 \(seed=0\)"):
        check_sweep([(0, ["seed=0"], {"model": "resnet18", "seed": 0}), (1, ["seed=0"], {"model": "resnet18", "seed": 0})])
    check_sweep([(0, ["seed=0"], {"model": "resnet18", "seed": 0}), (1, ["seed=1"], {"model": "resnet18", "seed": 1})])
    # through the real command: Hydra composes, nothing runs, no job folder is made
    sweep = tmp_path / "sweep"
    got = subprocess.run([sys.executable, "-m", "sweeper", "seed=0,0", f"hydra.sweep.dir={sweep}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 2 and "the same job as #0" in got.stderr, got.stderr[-2000:]
    assert not sweep.exists() or not any(p.is_dir() and p.name.isdigit() for p in sweep.iterdir())
    got = subprocess.run([sys.executable, "-m", "sweeper", f"seed={2 ** 64}", f"hydra.sweep.dir={sweep}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 2 and "must be a whole number from 0 to 2^63-1" in got.stderr, got.stderr[-2000:]


def test_store_export_onto_a_device_or_fifo_replaces_nothing(tmp_path):
    """Case 16: `store export` onto a device node replaced it with a regular file (exit 0)."""
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = subprocess.run([sys.executable, "-m", "sweeper.store", "--store", str(tmp_path / "s"), "export", str(fifo)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert got.returncode == 2 and "not a regular file" in got.stderr, got.stdout + got.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    got = subprocess.run([sys.executable, "-m", "sweeper.store", "--store", str(tmp_path / "s"), "export", "/dev/null"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert got.returncode == 2 and "not a regular file" in got.stderr, got.stdout + got.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_confirm_refuses_what_it_cannot_judge_before_compiling(bench_models, tmp_path):
    """Case 13: NEW = OLD exited 0 with "nothing to confirm"; `--calls -3` failed only after
    both sides compiled; `--calls 0` silently meant the default."""
    bench, models = bench_models
    nights = bench.write_tables(tmp_path, models, 2, 2, np.random.default_rng(8))
    got = _history("confirm", str(nights[1]), str(nights[1]))
    assert got.returncode == 2 and "the same folder" in got.stderr, got.stderr
    for calls in ("-3", "0"):
        got = _history("confirm", str(nights[1]), str(nights[0]), "--calls", calls)
        assert got.returncode == 2 and "--calls" in got.stderr and "Traceback" not in got.stderr, got.stderr


def test_report_links_only_inside_the_sweep_folder(tmp_path):
    """Case 17: a crafted record's `../../../../etc/passwd` was linked, and `//host/x` became a
    relative path (a link to another host). Only paths inside the sweep folder are links."""
    from sweeper.reporting.html_parts import link

    sweep = tmp_path / "sweep"
    for bad in ("../../../../etc/passwd", "/etc/passwd", "//host/x", str(tmp_path / "other" / "job.log"),
                "file:///etc/passwd", str(sweep) + "-other/0/job.log"):
        got = link(bad, sweep, "log")
        assert "href" not in got and "not linked" in got, (bad, got)
    assert link(str(sweep / "0" / "job.log"), sweep, "log") == '<a href="0/job.log">log</a>'
    assert link(f"file://{sweep}/0/job.log", sweep, "log") == '<a href="0/job.log">log</a>'


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: a read-only folder is tested as a user")
def test_aggregate_of_a_read_only_sweep_says_it_and_writes_nothing(tmp_path):
    """Case 15: `aggregate` of a read-only sweep folder ended in a traceback."""
    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    (sweep / "summary.json").write_text("{}")
    sweep.chmod(0o500)
    try:
        got = subprocess.run([sys.executable, "-m", "sweeper.aggregate", str(sweep)], cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
    finally:
        sweep.chmod(0o700)
    assert got.returncode == 2 and "cannot be written" in got.stderr and "Traceback" not in got.stderr, got.stderr
    assert sorted(p.name for p in sweep.iterdir()) == ["0", "summary.json"]


def test_aggregate_checks_its_folder_before_reading(tmp_path, monkeypatch):
    """Case 15 as root (CI): the same check, its write refused by the file system."""
    from sweeper import aggregate as ag
    from sweeper.reporting.load import AggregateError

    sweep = tmp_path / "sweep"
    sweep.mkdir()

    def refuse(self, *a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "write_text", refuse)
    with pytest.raises(AggregateError, match="cannot be written .*Permission denied"):
        ag.aggregate(sweep)


KEY, SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's own example pair
SECRET_URIS = [f"s3://{KEY}:{SECRET}@bucket/sweeps?region=us-east-1",
               f"s3://bucket/sweeps?access_key={KEY}&secret_key={SECRET}&region=us-east-1",
               f"s3://bucket/sweeps?region=us-east-1&X-Amz-Signature={SECRET}",
               f"s3://bucket/sweeps?endpoint_override={KEY}:{SECRET}@minio:9000&region=us-east-1"]


@pytest.mark.parametrize("uri", SECRET_URIS)
def test_no_secret_of_any_shape_is_printed_or_written(tmp_path, uri):
    """Case 2: a secret with `/` (AWS's example has two) was neither refused nor hidden, and
    credentials in the query or in endpoint_override were echoed. Each shape is refused before
    the sweep starts; neither half of the pair appears in the output or any file; the
    suggested URI keeps the other options."""
    from sweeper.stores.storage import credentials_in, redacted

    assert credentials_in(uri) is not None and SECRET not in credentials_in(uri) and KEY not in credentials_in(uri)
    assert SECRET not in redacted(uri) and KEY not in redacted(uri) and "***" in redacted(uri)
    assert "region=us-east-1" in credentials_in(uri)
    sweep = tmp_path / "sweep"
    got = subprocess.run([sys.executable, "-m", "sweeper", f"hydra.launcher.storage_path='{uri}'",
                          f"hydra.sweep.dir={sweep}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert got.returncode == 2 and "is refused" in got.stderr, got.stdout[-2000:] + got.stderr[-2000:]
    for text in (got.stdout, got.stderr, *(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())):
        assert SECRET not in text and KEY not in text


def test_storage_uris_without_secrets_pass():
    from sweeper.stores.storage import credentials_in, redacted

    for uri in ("s3://bucket/x?region=eu&endpoint_override=minio:9000", "s3://bucket/us@er/x", "/shared/sweeps",
                "gs://bucket/x"):
        assert credentials_in(uri) is None and redacted(uri) == uri, uri


def test_aws_endpoint_url_names_the_s3_server(monkeypatch):
    """Case 3: AWS_ENDPOINT_URL was ignored (the pyarrow S3 filesystem was made without it),
    though docs/running.md promises it: a storage URI with no endpoint_override reaches the
    server the variable names."""
    from conftest import moto_s3

    from sweeper.stores import storage as st

    with moto_s3() as (uri, client):
        endpoint = uri.split("endpoint_override=")[1].split("&")[0]
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{endpoint}")
        st._filesystem.cache_clear()
        plain = st.Storage.of("s3://sweeps/by-env")
        assert plain is not None
        plain.put_bytes(b"hello", "x/probe.txt")
        assert client.get_object(Bucket="sweeps", Key="by-env/x/probe.txt")["Body"].read() == b"hello"
        assert plain.stat("x/probe.txt") is not None
    st._filesystem.cache_clear()


def test_a_failed_write_to_folder_storage_leaves_no_part_file(tmp_path):
    """Case 4: folder storage on a full disk left the failed writes' `.part` files behind,
    keeping it full. The write fails as a full disk does (ENOSPC from the stream)."""
    import errno

    from sweeper.stores.storage import Storage

    store = Storage.of(str(tmp_path / "shared"))
    assert store is not None

    def full(out):
        out.write(b"x" * 1000)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        store._put("sweeps/a/0/trace.json", full)
    assert not [p for p in (tmp_path / "shared").rglob("*") if p.is_file()], list((tmp_path / "shared").rglob("*"))
    store.put_bytes(b"ok", "sweeps/a/0/trace.json")  # and the next write goes in whole
    assert (tmp_path / "shared" / "sweeps" / "a" / "0" / "trace.json").read_bytes() == b"ok"


def test_two_drivers_with_one_sweep_path_get_storage_folders_of_their_own(tmp_path):
    """Case 1: two drivers whose sweep folders have the same path (two machines; emulated by
    one path made twice) wrote one storage folder: one run's artifacts overwritten. Each
    sweep folder now keeps a token of its own, kept by a resume of it."""
    import shutil

    from hydra_plugins.sweeper_ray._ray import storage_key

    sweep = tmp_path / "shared" / "nightly" / "2026-12-07"
    first = storage_key(sweep)
    assert storage_key(sweep) == first  # a resume of this folder: the same storage folder
    shutil.rmtree(sweep)  # the other machine's folder of the same path
    second = storage_key(sweep)
    assert second != first and first.startswith("2026-12-07-") and second.startswith("2026-12-07-")


def test_compare_pools_a_configurations_repeats_and_says_so():
    """Case 10: `history compare` of two sweeps with seed=0,1 compared one repeat a
    configuration and dropped the others without a word; now the repeats are pooled (their
    median, their spread in the noise) and the label says so."""
    import pandas as pd

    from sweeper.analysis.regression import compare_jobs

    def sweep(steps):
        return pd.DataFrame([{"key": "model=resnet50,seed-free", "label": "resnet50 b64", "status": "ok", "job": i,
                              "compiled_step_ms": s, "steady_step_ms": s, "step_noise_pct": 1.0, "device_ms": s * 0.8,
                              "gpu": "H100"} for i, s in enumerate(steps)])

    table = compare_jobs(sweep([10.0, 10.4]), sweep([11.0, 12.0]))
    assert len(table) == 1
    row = table.iloc[0]
    assert row["label"] == "resnet50 b64 (median of 2 repeats)"
    assert row["step_ms_old"] == pytest.approx(10.2) and row["step_ms_new"] == pytest.approx(11.5)
    assert row["step_noise_pct_new"] == pytest.approx(100 * 0.5 / 11.5)  # the repeats' spread, not one's 1%


def test_a_record_that_turns_unreadable_is_said_and_counts(tmp_path):
    """Case 7: `changes` dropped truncated records without a word (compare flags them). Each
    unreadable record is said; a job whose record turned unreadable is a change under
    --fail-on-regression."""
    from synthetic_sweeps import write_nights

    nights = write_nights(tmp_path / "nightly", 4, nights=8)
    rec = nights[-1] / "2" / "result.json"
    rec.write_text(rec.read_text()[: len(rec.read_text()) // 2])  # truncated
    got = _history("changes", str(tmp_path / "nightly"), "--fail-on-regression")
    assert got.returncode == 1, got.stdout + got.stderr
    assert "night8: job #2's record cannot be read" in got.stderr and "truncated" in got.stderr, got.stderr
    assert any(ln.startswith("- night8: 1 job unreadable that ran ok the night before") for ln in got.stdout.splitlines()), \
        got.stdout
    trend = _history("trend", str(tmp_path / "nightly"), "--out", str(tmp_path / "trend.png"))
    assert trend.returncode == 0 and "night8: job #2's record cannot be read" in trend.stderr, trend.stderr


def test_the_closing_lines_and_the_report_say_the_storage_and_its_server(tmp_path):
    """Case 5: nothing said at the end that the jobs' folders are in storage, and the report's
    fetch command had no --endpoint-url for an S3-compatible server (the AWS CLI would ask AWS)."""
    from sweeper.reporting.html_parts import link
    from sweeper.sweep.summary import closing_report

    storage = "s3://sweeps/nightly?endpoint_override=127.0.0.1:9000&scheme=http"
    log = "s3://sweeps/nightly/sweeps/k-1/0/job.log"
    assert "aws s3 cp --endpoint-url http://127.0.0.1:9000 s3://sweeps/nightly/sweeps/k-1/0/job.log ." in \
        link(log, tmp_path, "log", storage)
    assert "--endpoint-url" not in link(log, tmp_path, "log", "s3://sweeps/nightly")  # AWS itself
    assert "aws s3 cp --recursive --endpoint-url http://127.0.0.1:9000 s3://sweeps/x/0 ." in \
        link("s3://sweeps/x/0", tmp_path, "folder", storage)

    jobs = [{"num": n, "overrides": [f"model=m{n}"], "status": "ok",
             "stored_at": f"s3://sweeps/nightly/sweeps/k-1/{n}"} for n in range(3)]
    text, failed = closing_report(jobs, tmp_path, ["model=m0,m1,m2"])
    assert not failed
    assert "storage: 3 jobs' folders (traces, logs, modules) are in s3://sweeps/nightly/sweeps/k-1" in text
    plain, _ = closing_report([{**j, "stored_at": None} for j in jobs], tmp_path, [])
    assert "storage" not in plain
