"""The other jobs of a packed GPU, paused while one times a launch-bound phase
(sweeper/host_pause.py), with real processes in sessions of their own, as jobs run."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sweeper import host_pause
from tasks.gpu_lease import GpuLease

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, PYTHONPATH=str(ROOT))

# A compiling job: registered on the GPU, it and a child of its process group (as its
# compile workers) write a time stamp every 10 ms.
BUSY = """
import subprocess, sys, time
from tasks.gpu_lease import GpuLease
folder, out = sys.argv[1], sys.argv[2]
lease = GpuLease("GPU-test", folder, "1", jobs_per_gpu=2, pause_others=True)
child = subprocess.Popen([sys.executable, "-c", "import sys, time\\n"
                          "while True:\\n open(sys.argv[1], 'a').write(f'{time.time()}\\\\n'); time.sleep(0.01)",
                          out + ".child"])
print("ready", flush=True)
while True:
    with open(out, "a") as f:
        f.write(f"{time.time()}\\n")
    time.sleep(0.01)
"""

# The job that holds the lease: a timed phase that must run alone for `hold` seconds, then
# a phase that times nothing.
HOLDER = """
import sys, time
from tasks.gpu_lease import GpuLease
folder, hold = sys.argv[1], float(sys.argv[2])
lease = GpuLease("GPU-test", folder, "0", jobs_per_gpu=2, pause_others=True)
lease.for_phase("timing", True, alone=True)
t0 = time.time()
time.sleep(hold)
t1 = time.time()
lease.for_phase("microbench_prepare", False)
print(t0, t1, lease.report()["paused_others"]["pauses"], flush=True)
if len(sys.argv) > 3:  # stay, holding nothing
    time.sleep(600)
lease.end()
"""


def start_busy(tmp_path):
    out = tmp_path / "stamps"
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(tmp_path / "locks"), str(out)], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert busy.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    return busy, out


def stamps(path: Path) -> list[float]:
    return [float(x) for x in path.read_text().split()]


def longest_gap(times: list[float], start: float, end: float) -> float:
    inside = [t for t in times if start - 1 <= t <= end + 1]
    return max(b - a for a, b in zip(inside, inside[1:]))


def test_the_other_jobs_of_the_gpu_stand_still_while_one_times_alone(tmp_path):
    busy, out = start_busy(tmp_path)
    try:
        holder = subprocess.run([sys.executable, "-c", HOLDER, str(tmp_path / "locks"), "1.0"], cwd=ROOT, env=ENV,
                                capture_output=True, text=True, timeout=60, start_new_session=True)
        assert holder.returncode == 0, holder.stderr
        t0, t1, pauses = holder.stdout.split()
        t0, t1 = float(t0), float(t1)
        time.sleep(0.3)
        for path in (out, Path(f"{out}.child")):  # the job and its compile worker alike
            times = stamps(path)
            during = [t for t in times if t0 + 0.05 < t < t1 - 0.05]
            assert during == [], f"{path.name}: {len(during)} stamps while the holder timed alone"
            assert longest_gap(times, t0, t1) >= 0.9
            assert max(times) > t1, f"{path.name} did not continue after the holder's phase"
        assert int(pauses) == 1
        assert not list((tmp_path / "locks").glob("*.pause.*")), "the pause's marker was left behind"
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()


def test_a_paused_job_is_continued_when_its_pauser_dies(tmp_path):
    busy, out = start_busy(tmp_path)
    try:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "locks"), "600"], cwd=ROOT,
                                  env=ENV, start_new_session=True)
        deadline = time.time() + 30
        while host_pause.state(busy.pid) != "T" and time.time() < deadline:
            time.sleep(0.05)
        assert host_pause.state(busy.pid) == "T", "the compiling job was not paused"
        watchdog = host_pause.Watchdog(tmp_path / "locks", "GPU-test", busy.pid)
        watchdog.check()
        assert host_pause.state(busy.pid) == "T", "the watchdog ended the pause of a live pauser"
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        watchdog.check()
        assert watchdog.continued == 1
        time.sleep(0.5)
        watchdog.check()
        assert host_pause.state(busy.pid) != "T"
        assert watchdog.paused_s > 0
        before = len(stamps(out))
        time.sleep(0.3)
        assert len(stamps(out)) > before, "the job did not run again"
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()


def test_a_pause_longer_than_any_phase_is_ended(tmp_path, monkeypatch):
    """A pauser that hangs (say, behind a lock a paused job holds) frees the others after
    MAX_PAUSE_S."""
    monkeypatch.setattr(host_pause, "MAX_PAUSE_S", 0.5)
    busy, _out = start_busy(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "locks"), "600"], cwd=ROOT, env=ENV,
                              start_new_session=True)
    try:
        watchdog = host_pause.Watchdog(tmp_path / "locks", "GPU-test", busy.pid)
        deadline = time.time() + 30
        while watchdog.continued == 0 and time.time() < deadline:
            watchdog.check()
            time.sleep(0.1)
        assert watchdog.continued == 1 and host_pause.state(busy.pid) != "T"
        assert holder.poll() is None, "the pauser itself is left alone"
    finally:
        holder.kill()
        holder.wait()
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()


def test_a_registration_whose_process_ended_is_never_signalled(tmp_path):
    """A pid the kernel gave to another process since: its start time differs, so it is
    dropped, not stopped."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        folder = tmp_path / "locks"
        lease = GpuLease("GPU-test", folder, "0", jobs_per_gpu=2, pause_others=True)
        stale = folder / f"GPU-test.job.{other.pid}"
        stale.write_text(f"{other.pid} 1")  # started at tick 1: not this process
        assert lease.pauser.others() == []
        assert not stale.exists()
        lease.for_phase("timing", True, alone=True)
        assert host_pause.state(other.pid) != "T" and lease.pauser.paused == []
        lease.end()
    finally:
        other.kill()
        other.wait()


def test_an_unpacked_job_pauses_no_one(tmp_path):
    busy, out = start_busy(tmp_path)
    try:
        lease = GpuLease("GPU-test", tmp_path / "locks", "0", jobs_per_gpu=1, pause_others=True)
        assert lease.pauser is None
        lease.for_phase("timing", True, alone=True)
        assert host_pause.state(busy.pid) != "T"
        lease.end()
    finally:
        os.killpg(busy.pid, signal.SIGKILL)
        busy.wait()
