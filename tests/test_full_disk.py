"""A sweep folder that fills up while a finished job's results come back (a 48 KiB tmpfs,
where this user may mount one). It once ended in a traceback with the finished job's
record, traces and log gone (its scratch folder was already removed) and the next job never
run; now the scratch folder stays until the results are written, the sweep stops with a
message that says where they are, and exits 2."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_ray_launcher import TINY

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    got = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount)], capture_output=True, text=True)
    if got.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {got.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.slow
def test_a_full_sweep_folder_stops_the_sweep_and_loses_no_finished_result(tmp_path, small_disk):
    scratch = tmp_path / "scratch"
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=test_resnet", "seed=0,1", *TINY,
                           f"hydra.launcher.scratch_dir={scratch}", f"hydra.sweep.dir={small_disk / 'sweep'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    assert "Traceback" not in out
    kept = [p.parent for p in scratch.glob("*/*/result.json")]
    assert len(kept) == 1, "the finished job's results should still be in its scratch folder"
    record = json.loads((kept[0] / "result.json").read_text())
    assert record["status"] == "ok" and (kept[0] / "job.log").is_file() and list((kept[0] / "traces").iterdir())
    assert (f"results could not be written into {small_disk / 'sweep' / kept[0].name}: [Errno 28] No space left on "
            f"device; they are still in {kept[0]}") in proc.stderr
    assert "run the same command again" in proc.stderr
