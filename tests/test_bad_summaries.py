"""A summary.json that is valid JSON but no sweep's (`null`, `[]`, `{"jobs": 5}`) under
outputs/ once made every later sweep, dry runs too, and `aggregate` fail with an
AttributeError naming no file. Now that sweep is skipped with a warning naming it, and the
folder itself still aggregates from its job folders."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import H200, sweep_from_fixture

ROOT = Path(__file__).resolve().parent.parent
# the last two: job entries of another shape (no job number, a folder that is a number):
# `aggregate` once crashed on them with a KeyError naming no file
BAD = ["null", "[]", '{"jobs": 5}', '{"jobs": [], "counts": [1]}', '{"jobs": [{"index": "a"}]}',
       '{"jobs": [{"num": 0, "dir": 5}]}']


def test_a_later_dry_run_skips_sweeps_whose_summary_is_no_sweeps(tmp_path):
    outputs = tmp_path / "outputs"
    for i, text in enumerate(BAD):
        d = outputs / "2026-01-01" / f"00-00-0{i}"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=resnet18", "dry_run=true",
                           f"hydra.sweep.dir={outputs / '2026-01-02' / '00-00-00'}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "AttributeError" not in proc.stderr
    for i, why in enumerate(["holds NoneType, not an object", "holds list, not an object",
                             "holds `jobs` that is not a list of jobs", "holds `counts` that is not an object",
                             "holds a job entry without a job number and folder ({'index': 'a'})",
                             "holds a job entry without a job number and folder ({'num': 0, 'dir': 5})"]):
        assert f"warning: skipped {outputs / '2026-01-01' / f'00-00-0{i}'}: its summary.json {why}" in proc.stderr


@pytest.mark.parametrize("text", BAD)
def test_a_sweep_whose_summary_is_no_sweeps_aggregates_from_its_job_folders(tmp_path, text):
    sweep = sweep_from_fixture(H200 / "headline", tmp_path / "sweep")
    (sweep / "summary.json").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "sweeper.aggregate", str(sweep)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert (sweep / "report.html").exists() and (sweep / "tables" / "jobs.csv").exists()
    assert f"{sweep / 'summary.json'}:" in proc.stdout + proc.stderr + (sweep / "report.html").read_text()
