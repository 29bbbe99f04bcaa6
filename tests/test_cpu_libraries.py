"""Inductor's instruction-set probes kept for every job of a host (tasks/cpu_libraries.py):
a real probe run by Inductor in one process, then put into a fresh cache folder of another,
where Inductor finds it and builds and loads nothing."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks import cpu_libraries

ROOT = Path(__file__).resolve().parent.parent

# a process that picks the CPU's instruction set as Inductor does before its first C++
# kernel, with the job's two steps around it; it prints how many probes it was given and kept
PICK = r"""
import sys, time
from pathlib import Path
import torch
from tasks import cpu_libraries
cache = Path(sys.argv[1])
given = cpu_libraries.probes_into(cache, torch.__version__)
from torch._inductor.cpu_vec_isa import pick_vec_isa
t0 = time.time()
isa = pick_vec_isa()
print(given, cpu_libraries.keep_probes(cache, torch.__version__), str(isa), round(time.time() - t0, 2), sep="|")
"""


def _pick(cache: Path, probes: Path) -> tuple[int, int, str, float]:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("SWEEPER_CPU_PROBES", None)  # the default folder, under the temporary folder
    env["TMPDIR"] = str(probes)
    proc = subprocess.run([sys.executable, "-c", PICK, str(cache)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    given, kept, isa, seconds = proc.stdout.strip().splitlines()[-1].split("|")
    return int(given), int(kept), isa, float(seconds)


@pytest.mark.slow
def test_the_hosts_probes_are_run_once_and_given_to_the_next_job(tmp_path):
    probes = tmp_path / "tmp"
    probes.mkdir()
    given, kept, isa, _ = _pick(tmp_path / "job1", probes)
    assert given == 0 and kept >= 1  # the first job ran them and left them to the host
    folder = next((probes / "sweeper-cpu-probes").iterdir())
    assert folder.name.startswith("torch-") and len(list(folder.glob("*/*.so.load_ok"))) == kept
    again = _pick(tmp_path / "job2", probes)
    assert again[:3] == (kept, 0, isa)  # the next: all of them given, none new, the same answer
    # given, Inductor built no probe again: each library is the host's copy, as it was
    for lib in folder.glob("*/*.so"):
        assert (tmp_path / "job2" / lib.parent.name / lib.name).stat().st_mtime_ns == lib.stat().st_mtime_ns


def test_a_library_without_its_mark_is_not_a_probe(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_libraries, "PROBES", tmp_path / "host")
    cache = tmp_path / "cache"
    (cache / "ab").mkdir(parents=True)
    (cache / "ab" / "cab.so").write_bytes(b"probe")
    (cache / "ab" / "cab.so.load_ok").write_text("")
    (cache / "cd").mkdir()
    (cache / "cd" / "ccd.main.so").write_bytes(b"a kernel, no mark")
    assert cpu_libraries.keep_probes(cache, "2.0") == 1 and cpu_libraries.keep_probes(cache, "2.0") == 0
    assert cpu_libraries.probes_into(tmp_path / "fresh", "2.0") == 1
    assert sorted(p.name for p in (tmp_path / "fresh").rglob("*")) == ["ab", "cab.so", "cab.so.load_ok"]
    assert cpu_libraries.probes_into(tmp_path / "fresh", "2.1") == 0  # another torch: none
