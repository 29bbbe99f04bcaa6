import pytest

from sweeper.analysis.reference import LAUNCH_PROBE_LINE, compare, parse_tabulate

from conftest import read_text


def test_parse_real_p_output(h200):
    run = parse_tabulate(read_text(h200 / "mixnet_l_forward_reference_p.txt.gz"))
    assert run.pct_of_wall["triton_pointwise"] == pytest.approx(19.15)
    assert run.pct_of_wall["unknown"] == pytest.approx(30.90)
    assert run.busy_pct == pytest.approx(59.60)
    assert run.wall_ms == pytest.approx(24.645)
    assert sum(run.share_of_device_pct.values()) == pytest.approx(100)
    assert run.launch_us is None  # saved before bench/run_reference.py appended its probe


def test_parse_reads_the_launch_probe_appended_after_the_run(h200):
    saved = read_text(h200 / "mixnet_l_forward_reference_p.txt.gz")
    saved += "\n--- exit 0, 75.1 s ---\n" + LAUNCH_PROBE_LINE.format(5.4321) + "\n"
    run = parse_tabulate(saved)
    assert run.launch_us == pytest.approx(5.432) and run.wall_ms == pytest.approx(24.645)


def test_parse_rejects_unfinished_output():
    with pytest.raises(ValueError, match="did not finish"):
        parse_tabulate("Compiled module path: x\nTraceback ...")


def test_h200_mixnet_shares_agree_with_reference(h200, mixnet_record):
    run = parse_tabulate(read_text(h200 / "mixnet_l_forward_reference_p.txt.gz"))
    fwd = next(m for m in mixnet_record["modules"] if m["role"] == "forward")
    result = compare(fwd["breakdown"], [run])
    for cat, share in result["shares"].items():
        assert share["ok"], (cat, share)
    # measured on the H200: sweeper's wall time was below the -p harness's (see
    # bench/results/fidelity/first_comparison), so the reference-style busy figure differs
    assert result["busy"]["sweeper"] > run.busy_pct


def test_harness_env_uses_the_jobs_own_caches(tmp_path):
    from sweeper.analysis.reference import harness_env

    # under cache_root the job records where its caches are...
    rec = {"job": {"dir": str(tmp_path / "0")}, "artifacts": {"cache": "/scratch/run-0"}}
    env = harness_env(rec, {"PATH": "/bin"}, "/tmp/x")
    assert env == {"PATH": "/bin", "TORCHINDUCTOR_CACHE_DIR": "/scratch/run-0/inductor",
                   "TRITON_CACHE_DIR": "/scratch/run-0/triton", "TMPDIR": "/tmp/x"}
    # ...and records written before that field existed use the job folder's cache
    old = {"job": {"dir": str(tmp_path / "0")}, "artifacts": {}}
    env = harness_env(old, {})
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "0" / "cache" / "triton") and "TMPDIR" not in env


def test_run_reference_says_when_a_module_cannot_be_run_and_exits_1(tmp_path, resnet18_record):
    """A record's modules whose cache file went with the job's scratch folder, and whose copy
    is missing too: bench/run_reference.py once failed on every module and exited 0."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    job = tmp_path / "0"
    job.mkdir()
    rec = dict(resnet18_record)
    rec["job"] = {**rec["job"], "dir": str(job)}
    rec["modules"] = [{**m, "source_path": str(tmp_path / "gone" / "m.py"), "artifact": str(job / "modules" / "m.py")}
                      for m in rec["modules"]]
    (job / "result.json").write_text(json.dumps(rec))
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "bench/run_reference.py", "--runs", "1", str(job)], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{len(rec['modules'])} module run(s) failed" in proc.stderr
    assert "removed with the job's scratch folder" in proc.stderr and str(job / "modules" / "m.py") in proc.stderr
