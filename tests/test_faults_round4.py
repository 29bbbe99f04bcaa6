"""Faults round 4 (docs/reliability.md): each case as the battery found it, with real
processes (the sweeper command, `history compare`) on real sweep folders made from the
committed H200 records."""

import hashlib
import io
import json
import shlex
import shutil
import subprocess
import sys
import tarfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from synthetic_sweeps import write_sweep

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory):
    """The headline's four jobs as two complete sweeps a day apart, the first aggregated."""
    root = tmp_path_factory.mktemp("faults")
    old = write_sweep(root / "old", 4, datetime(2026, 12, 1, 2))
    new = write_sweep(root / "new", 4, datetime(2026, 12, 2, 2))
    assert run("-m", "sweeper.aggregate", str(old)).returncode == 0
    return old, new


def test_a_record_that_cannot_be_read_is_a_changed_status_that_fails_the_nightly(two_sweeps, tmp_path):
    """Case 1: a truncated result.json was "1 gone" and the compare passed (exit 0)."""
    old, new = two_sweeps
    bad = tmp_path / "new"
    shutil.copytree(new, bad)
    with open(bad / "1" / "result.json", "r+b") as f:
        f.truncate(300)
    proc = run("-m", "sweeper.history", "compare", str(bad), str(old), "--fail-on-regression")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gone" not in proc.stdout and "1 changed status" in proc.stdout
    assert f"1 unreadable in the new sweep (counted as a changed status): mixnet_l b128 train fp16: {bad / '1' / 'result.json'}" in proc.stdout
    assert "status ok -> unreadable" in proc.stdout
    # case 2: the compared step figure says which it is, and which the report's is
    assert "| job | loop step ms old | loop step ms new |" in proc.stdout
    assert "the report's 'compiled ms' is the median of the timed steps" in proc.stdout
    # reversed: the old sweep's record is the one that cannot be read
    proc = run("-m", "sweeper.history", "compare", str(old), str(bad), "--fail-on-regression")
    assert proc.returncode == 1 and "new job" not in proc.stdout
    assert "1 unreadable in the old sweep" in proc.stdout and "status unreadable -> ok" in proc.stdout


def test_every_bad_launcher_setting_is_refused_before_ray_starts(tmp_path):
    """Case 5: negative and zero counts passed the dry run and ended in Ray's traceback;
    type errors in Hydra's "Error merging override"; all listed now, exit 2, nothing run."""
    bad = ["hydra.launcher.num_cpus_per_job=-1", "hydra.launcher.num_gpus_per_job=-1",
           "hydra.launcher.connect_timeout_s=-1", "hydra.launcher.max_retries_on_node_loss=-1",
           "hydra.launcher.connect_timeout_s=abc", "hydra.launcher.resume=maybe", "hydra.launcher.jobs_per_gpus=2"]
    sweep = tmp_path / "s"
    proc = run("-m", "sweeper", "model=resnet18", *bad, f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    err = proc.stderr
    assert "7 problem(s) found before starting" in err and "Traceback" not in err and "Error merging" not in err
    for text in ("num_cpus_per_job=-1: more than 0", "num_gpus_per_job=-1: more than 0",
                 "connect_timeout_s=-1: more than 0", "max_retries_on_node_loss=-1: at least 0",
                 "connect_timeout_s=abc: a number", "resume=maybe: true or false",
                 "hydra.launcher.jobs_per_gpus: no such launcher setting; did you mean jobs_per_gpu"):
        assert text in err, text
    assert "Started a local Ray instance" not in proc.stdout + err and not sweep.exists()
    proc = run("-m", "sweeper", "model=resnet18", "hydra.launcher.num_cpus_per_job=0", "dry_run=true")
    assert proc.returncode == 2 and "num_cpus_per_job=0: more than 0" in proc.stderr


def test_a_scratch_folder_that_cannot_be_written_is_refused_before_ray_starts(tmp_path):
    """Case 6: scratch_dir=/proc/x failed every job with a reason in terminal colours and a
    log path that could not exist."""
    sweep = tmp_path / "s"
    proc = run("-m", "sweeper", "model=resnet18", "hydra.launcher.scratch_dir=/proc/x", f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "hydra.launcher.scratch_dir=/proc/x: cannot be written" in proc.stderr
    assert "Started a local Ray instance" not in proc.stdout + proc.stderr and not sweep.exists()


def test_no_colour_code_reaches_a_record_or_the_summary():
    """Case 6: Ray's task errors colour the task's name; the reason kept is the error's
    own line, in plain text."""
    import ray

    from hydra_plugins.sweeper_ray._results import ray_error_line
    from sweeper.record import no_colour
    from sweeper.sweep.summary import job_entry

    error = ray.exceptions.RayTaskError("run_in_worker", "Traceback (most recent call last):\n  File x\n"
                                        "PermissionError: [Errno 13] Permission denied: '/proc/x'",
                                        PermissionError(13, "Permission denied"), pid=7, ip="127.0.0.1")
    assert "\x1b[" in str(error)  # Ray's own text is coloured
    line = ray_error_line(error)
    assert "\x1b" not in line and "PermissionError" in line and "/proc/x" in line
    record = {"status": "failed", "reason": "\x1b[36mray::run_in_worker()\x1b[39m failed", "phase": "process"}
    entry = job_entry(0, ["model=resnet18"], Path("/tmp/x/0"), record)
    assert entry["reason"] == "ray::run_in_worker() failed" and no_colour(None) is None


@pytest.mark.parametrize("text", ['{"jobs": [{"index": "a"}]}', '{"jobs": [{"num": 0, "dir": 5}]}'])
def test_a_summary_of_malformed_job_entries_aggregates_from_the_job_folders(two_sweeps, tmp_path, text):
    """Case 7: a traceback naming no file; now the summary is set aside with a note."""
    _, new = two_sweeps
    sweep = tmp_path / "s"
    shutil.copytree(new, sweep)
    (sweep / "summary.json").write_text(text)
    proc = run("-m", "sweeper.aggregate", str(sweep))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "holds a job entry without a job number and folder" in (sweep / "report.html").read_text()


def test_the_printed_rerun_command_runs_when_the_folder_has_spaces_and_quotes(tmp_path):
    """Case 9: the closing report's command failed with a Hydra parse error when pasted."""
    from sweeper.sweep.summary import closing_report

    sweep = tmp_path / "my sweep's folder"
    jobs = [{"num": 0, "overrides": ["model=resnet18"], "status": "failed", "reason": "x", "log": None}]
    text, failed = closing_report(jobs, sweep, ["model=resnet18", f"hydra.sweep.dir={sweep}"])
    line = text.splitlines()[text.splitlines().index("Re-run only the failed and missing jobs (finished ones are kept):") + 1]
    args = shlex.split(line.strip())
    assert args[:3] == ["python", "-m", "sweeper"]
    proc = run(*args[1:], "dry_run=true")  # as pasted into a shell, then a dry run of it
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "dry run: 1 job into" in proc.stdout and str(sweep) in proc.stdout


def test_an_unreadable_record_in_the_report_of_a_nightly(two_sweeps, tmp_path):
    """Case 1 in the report: the nightly's page says the changed status, naming the file."""
    old, new = two_sweeps
    nights = tmp_path / "nightly"
    a = shutil.copytree(old, nights / "a")
    b = shutil.copytree(new, nights / "b")
    summary = json.loads((b / "summary.json").read_text())
    summary["started_at"] = (datetime(2026, 12, 1, 2) + timedelta(days=1)).isoformat()
    (b / "summary.json").write_text(json.dumps(summary))
    (b / "2" / "result.json").write_text("{not json")
    assert run("-m", "sweeper.aggregate", str(a)).returncode == 0
    proc = run("-m", "sweeper.aggregate", str(b))
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = (b / "report.html").read_text()
    assert "1 of 4 jobs flagged" in page and "status ok -&gt; unreadable" in page
    assert str(b / "2" / "result.json") in page


def _export_of(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _manifest_for(rel: str, data: bytes) -> bytes:
    from sweeper.stores import export as cmd

    return json.dumps({"format": cmd.FORMAT, "version": cmd.FORMAT_VERSION, "created": "2026-12-06T00:00:00",
                       "files": [{"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                                  "ops": 0, "choices": 0, "kernel_configs": 0}]}).encode()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


REL = "torch-2.11.0+cu130/h200hash.json"


@pytest.mark.parametrize("case, says", [
    ("manifest_symlink", "manifest.json is a link, not a file"),
    ("manifest_hardlink", "manifest.json is a link, not a file"),
    ("cache_of_another_shape", "cache['op'] is int, not a mapping of inputs"),
    ("system_not_a_mapping", "system is str, not a mapping"),
    ("larger_than_its_manifest_says", "holds 2000000 bytes, its manifest says 20"),
])
def test_a_store_export_of_another_shape_is_refused_before_anything_merges(tmp_path, case, says):
    """Case 8: a linked manifest raised KeyError; a malformed `cache` an AttributeError after
    the store's lock file was made; `"system": "notadict"` imported and broke every later
    `store show`; an oversized member was read whole before it was refused."""
    store = tmp_path / "store"
    good = json.dumps({"system": {"device": {"name": "NVIDIA H200"}}, "cache": {}, "kernel_configs": {}}).encode()
    if case in ("manifest_symlink", "manifest_hardlink"):
        link = tarfile.TarInfo("manifest.json")
        link.type = tarfile.SYMTYPE if case == "manifest_symlink" else tarfile.LNKTYPE
        link.linkname = "real.json"
        members = [_file("real.json", _manifest_for(REL, good)), (link, None), _file(REL, good)]
    elif case == "larger_than_its_manifest_says":
        big = b" " * 2_000_000
        manifest = json.loads(_manifest_for(REL, good))
        manifest["files"][0]["bytes"] = 20
        members = [_file("manifest.json", json.dumps(manifest).encode()), _file(REL, big)]
    else:
        doc = ({"system": None, "cache": {"op": 5}} if case == "cache_of_another_shape"
               else {"system": "notadict", "cache": {}, "kernel_configs": {}})
        data = json.dumps(doc).encode()
        members = [_file("manifest.json", _manifest_for(REL, data)), _file(REL, data)]
    bad = _export_of(tmp_path / "bad.tgz", members)
    proc = run("-m", "sweeper.store", "--store", str(store), "import", str(bad))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{bad}: damaged" in proc.stderr or f"{bad}: " in proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert not store.exists() or not any(store.rglob("*"))  # not even a lock file


def test_store_show_never_crashes_on_what_is_in_the_store(tmp_path):
    """Case 8: a key file of another shape already in the store (an older sweeper imported
    it) is shown as unreadable; the others are shown."""
    store = tmp_path / "store"
    (store / "torch-2.11.0+cu130").mkdir(parents=True)
    (store / "torch-2.11.0+cu130" / "bad.json").write_text(json.dumps({"system": "notadict", "cache": {}}))
    (store / "torch-2.11.0+cu130" / "good.json").write_text(json.dumps(
        {"system": {"device": {"name": "NVIDIA H200"}}, "cache": {"mm": {"x": {"highest": {"a": 0.1}}}},
         "kernel_configs": {}}))
    proc = run("-m", "sweeper.store", "--store", str(store), "show")
    assert proc.returncode == 0, proc.stderr
    assert "bad.json: unreadable" in proc.stdout and "NVIDIA H200" in proc.stdout


def test_what_changed_says_what_was_judged_and_what_was_not_in_one_sentence():
    """Case 3: "Nothing moved beyond its noise." then "1 jobs could not be judged"."""
    from sweeper.reporting.compare_sections import changed_sentence

    assert changed_sentence(0, 3, 1) == ("0 of 4 jobs flagged: of the 3 judged, none moved beyond its noise; "
                                         "1 could not be judged, their noise hiding any change.")
    assert changed_sentence(0, 4, 0) == "0 of 4 jobs flagged: of the 4 judged, none moved beyond its noise."
    assert changed_sentence(0, 0, 2) == "0 of 2 jobs flagged: none could be judged, their noise hiding any change."
    assert changed_sentence(1, 3, 1).startswith("1 of 4 jobs flagged (a change beyond their noise, or of their status), of 3 judged; 1 could not")


def test_a_compiled_step_slower_than_eager_says_so_first_with_what_the_record_shows(tmp_path):
    """Case 4: "1018.7 ms against 367.2 ms eager (0.36x)" was stated without a word. A CPU
    job of the committed fixtures, its compiled step made slower than its eager step."""
    from sweeper.reporting.findings import where_time_goes
    from sweeper.reporting.load import read_sweep
    from sweeper.reporting.notes import all_notes

    sweep = write_sweep(tmp_path / "s", 4)
    record = json.loads((sweep / "3" / "result.json").read_text())
    t = record["timings"]
    t["eager_step_ms"]["median"] = t["compiled_step_ms"]["median"] / 0.36
    t["compiled_step_ms"]["median"] *= 1 / 0.36 ** 2  # 0.36x of eager
    t.pop("speedup", None)
    t["host_busy_cores"] = {"timing": 1.6}
    (sweep / "3" / "result.json").write_text(json.dumps(record))
    s = read_sweep(sweep)
    found = {f.scope: f for f in where_time_goes(s.jobs, s.cats, s.kernels)}
    text = found["densenet121 b16 train fp16"].text
    assert text.startswith("densenet121 b16 train fp16: its compiled step is slower than eager, ")
    assert "(0.36x); what the record shows: other work kept 1.6 cores of the host busy while it measured" in text
    assert "The compiled step takes" not in text  # said once, first
    assert any(n.startswith("compiled slower than eager: #3 densenet121 b16 train fp16 (0.36x)") for n in all_notes(s.jobs))
    faster = found["mixnet_l b128 train fp16"].text
    assert "slower than eager" not in faster and "The compiled step takes" in faster


def test_small_things_said_plainly(two_sweeps, tmp_path):
    """Case 11: a compare of a folder that does not exist, or of a folder with itself; the
    dry run's estimate of a large sweep; an undeclared key given without a `+`."""
    old, new = two_sweeps
    proc = run("-m", "sweeper.history", "compare", str(tmp_path / "missing"))
    assert proc.returncode == 2 and f"NEW {tmp_path / 'missing'} is not a folder" in proc.stderr
    proc = run("-m", "sweeper.history", "compare", str(new), str(new))
    assert proc.returncode == 2 and "NEW and OLD are the same folder" in proc.stderr

    from sweeper.sweep.estimate import expected_line
    from sweeper.sweep.overrides import problems

    keys = [f"k{i}" for i in range(200)]
    line = expected_line(keys, [f"#{i}" for i in range(200)], {"k0": 30.0}, 1, "", tmp_path, 3)
    assert "about 30 s with 1 at a time" in line and "0 min" not in line
    assert line.endswith("not counted, no earlier record: 199 jobs (#1, #2, #3, #4, #5, #6, #7, #8 and 191 more)")
    assert problems(["modle=x"], set()) == ["modle: not a sweeper key (did you mean mode or model?)"]
    assert problems(["+modle=x"], set())[0].endswith("a `+` in front does not make it one")
