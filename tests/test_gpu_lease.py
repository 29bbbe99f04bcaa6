"""The GPU's lease (tasks/gpu_lease.py) with real processes, and the packing rule
(sweeper/sweep/packing.py): jobs that share a GPU never time on it at once."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sweeper.sweep import packing
from tasks.gpu_lease import GpuLease

ROOT = Path(__file__).resolve().parent.parent

# A "job" that takes the lease N times from a common start, holding it 20 ms each time, as
# a phase and as Inductor's benchmarks would; every hold goes to the lease log.
HOLDER = """
import sys, time
from tasks.gpu_lease import GpuLease
lease = GpuLease("GPU-test", sys.argv[1], sys.argv[2], log_path=sys.argv[3])
time.sleep(max(0.0, float(sys.argv[5]) - time.time()))
for i in range(int(sys.argv[4])):
    with lease.hold("benchmark" if i % 2 else "timing"):
        time.sleep(0.02)
    time.sleep(0.001)
print(lease.report()["waits"], flush=True)
"""


def holds(log: Path) -> list[tuple[float, float, str]]:
    out = []
    for line in log.read_text().splitlines():
        _key, _pid, job, start, end, _what = line.split()
        out.append((float(start), float(end), job))
    return sorted(out)


def overlapping(spans: list[tuple[float, float, str]]) -> list:
    """Pairs of holds by different jobs that overlap in time."""
    return [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1] and a[2] != b[2]]


def test_jobs_never_hold_one_lease_at_once(tmp_path):
    log = tmp_path / "lease.log"
    start = str(time.time() + 3)
    procs = [subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "locks"), str(n), str(log), "30", start],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
             for n in range(3)]
    waits = [int(p.communicate(timeout=120)[0].strip()) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    spans = holds(log)
    assert len(spans) == 90 and {s[2] for s in spans} == {"0", "1", "2"}
    assert sum(waits) > 0, "three jobs taking the lease in a loop should have waited for each other"
    assert overlapping(spans) == []


def test_the_overlap_check_catches_two_holders(tmp_path):
    """The check above fails where the lease does not exclude: two leases of different GPUs
    (different files) held at once."""
    log = tmp_path / "lease.log"
    a = GpuLease("GPU-a", tmp_path, "0", log_path=str(log))
    b = GpuLease("GPU-b", tmp_path, "1", log_path=str(log))
    with a.hold("timing"), b.hold("timing"):
        time.sleep(0.01)
    assert len(overlapping(holds(log))) == 1


KILLED = """
import sys, time
from tasks.gpu_lease import GpuLease
lease = GpuLease("GPU-test", sys.argv[1], "7")
lease.acquire("timing")
print("held", flush=True)
time.sleep(600)
"""


def test_a_killed_holder_frees_the_gpu(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert holder.stdout.readline().strip() == "held"
    lease = GpuLease("GPU-test", tmp_path, "8")
    got = threading.Event()
    threading.Thread(target=lambda: (lease.acquire("timing"), got.set()), daemon=True).start()
    time.sleep(1.0)
    assert not got.is_set(), "the lease was taken while its holder lived"
    assert lease.waiting_line().startswith("waiting") and "job 7" in lease.waiting_line()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert got.wait(10), "a killed holder's lease was not freed"
    assert lease.report()["waits"] == 1 and lease.report()["longest_wait_s"] >= 1.0
    lease.release()


# One of three jobs on a GPU, from a common start: "phases" holds the lease for its warm-up,
# then enters its timing phase at +1.5 s; "waiter" wants the lease for its own warm-up from
# +0.3 s; "compile" wants it for one benchmark from +0.6 s.
ROLE = """
import sys, time
from tasks.gpu_lease import GpuLease
folder, job, log, start, role = sys.argv[1:6]
start = float(start)
lease = GpuLease("GPU-test", folder, job, log_path=log)
def at(s):
    time.sleep(max(0.0, start + s - time.time()))
if role == "phases":
    at(0.0); lease.for_phase("warmup", True)
    at(1.5); lease.for_phase("timing", True)
    time.sleep(0.2); lease.end()
elif role == "waiter":
    at(0.3); lease.for_phase("warmup", True); time.sleep(0.1); lease.end()
else:
    at(0.6)
    with lease.hold("benchmark"):
        time.sleep(0.1)
print(lease.report()["yielded"], flush=True)
"""


def test_a_compiles_benchmark_goes_between_two_phases_of_the_holder(tmp_path):
    """The compile's benchmark waits only until the holder's next phase (which gives the
    lease up, then takes it back before the job that waits to start its phases)."""
    log = tmp_path / "lease.log"
    start = str(time.time() + 3)
    procs = {role: subprocess.Popen([sys.executable, "-c", ROLE, str(tmp_path / "locks"), job, str(log), start, role],
                                    cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                    env=dict(os.environ, PYTHONPATH=str(ROOT)))
             for job, role in (("0", "phases"), ("1", "waiter"), ("2", "compile"))}
    yielded = {role: int(p.communicate(timeout=60)[0].strip()) for role, p in procs.items()}
    assert all(p.returncode == 0 for p in procs.values())
    order = [(line.split()[2], line.split()[5]) for line in sorted(log.read_text().splitlines(), key=lambda l: float(l.split()[3]))]
    assert order == [("0", "warmup"), ("2", "benchmark"), ("0", "timing"), ("1", "warmup")]
    assert yielded["phases"] == 1 and overlapping(holds(log)) == []
    assert not list((tmp_path / "locks").glob("*.bench.*")) and not list((tmp_path / "locks").glob("*.resume.*"))


def test_the_lease_is_reentrant_across_a_jobs_threads(tmp_path):
    """A job's phase holds the lease while Inductor benchmarks a choice from a helper thread:
    no deadlock, and the helper's hold is the phase's."""
    lease = GpuLease("GPU-test", tmp_path, "0")
    lease.for_phase("warmup", timed=True)
    done = threading.Event()
    threading.Thread(target=lambda: (lease.acquire("benchmark"), lease.release(), done.set()), daemon=True).start()
    assert done.wait(5)
    lease.for_phase("timing", timed=True)  # kept across timed phases: one hold
    lease.for_phase("compile", timed=False)
    other = GpuLease("GPU-test", tmp_path, "1")
    assert other.acquire("timing") < 0.5  # given back: another job takes it at once
    other.release()
    report = lease.report()
    assert report["acquired"] == 1 and len(report["spans"]) == 1 and report["spans"][0][2] == "warmup"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_the_holder_adds_its_launch_cores_and_gives_them_back(tmp_path):
    before = sorted(os.sched_getaffinity(0))
    shared, leased = before[:1], before
    lease = GpuLease("GPU-test", tmp_path, "0", cpus_shared=shared, cpus_leased=leased, jobs_per_gpu=2)
    try:
        from tasks.gpu_lease import set_process_cpus

        set_process_cpus(shared)
        seen = {}
        started, stop = threading.Event(), threading.Event()

        def other_thread():  # a thread that exists before the lease is taken moves too
            started.set()
            stop.wait(10)
            seen["thread"] = sorted(os.sched_getaffinity(0))

        t = threading.Thread(target=other_thread)
        t.start()
        started.wait(5)
        with lease.hold("timing"):
            assert sorted(os.sched_getaffinity(0)) == leased
            stop.set()
            t.join(5)
        assert seen["thread"] == leased
        assert sorted(os.sched_getaffinity(0)) == shared
    finally:
        os.sched_setaffinity(0, before)


def test_inductor_benchmarks_take_the_lease(tmp_path):
    """Inductor's own benchmarker, hooked (sweeper/torch_internals/benchmark_lease.py:
    leased_benchmarks), holds the lease for each benchmark while inside, and is put back on
    leaving: here its CPU path, on this machine."""
    code = """
import sys, json
from tasks.gpu_lease import GpuLease
from sweeper.torch_internals.benchmark_lease import leased_benchmarks
import torch
lease = GpuLease("GPU-test", sys.argv[1], "0")
from torch._inductor.runtime.benchmarking import Benchmarker, benchmarker
own = Benchmarker.__dict__["benchmark"]
x = torch.randn(64, 64)
def time_mm():
    return benchmarker.benchmark(torch.mm, (x, x), {})
with leased_benchmarks(lease.benchmark_hold) as got:
    got_method = Benchmarker.__dict__["benchmark"]
    ms = time_mm()
after = time_mm()  # the patch put back: not under the lease, not counted
print(json.dumps({"wrapped": got.wrapped, "report": lease.report(), "ms": ms,
                  "benchmarks": {"by_caller": dict(got.by_caller)}, "patched_inside": own is not got_method, "restored": Benchmarker.__dict__["benchmark"] is own}))
"""
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "Benchmarker.benchmark" in out["wrapped"] and "TuningProcessPool.target" in out["wrapped"]
    assert any(w.endswith(".benchmark_gpu") for w in out["wrapped"])
    assert out["report"]["benchmarks"]["acquired"] == 1 and out["ms"] > 0
    # counted once (benchmark() calls benchmark_cpu(), both hooked), under the code that ran it
    assert out["benchmarks"]["by_caller"] == {"<string>.time_mm < <module>": 1}
    assert out["patched_inside"] and out["restored"]  # Inductor's own method again on leaving


def test_auto_packs_as_many_jobs_as_memory_and_cores_allow():
    # an H200 node: 139 GiB, 16 cores, 1 GPU: 4 jobs (cores: (16 - 2) // 3 = 4; memory: 5)
    assert packing.jobs_per_gpu("auto", 139.8, 16, 1)[0] == 4
    # two H200s on 32 cores: 4 a GPU
    assert packing.jobs_per_gpu("auto", 139.8, 32, 2)[0] == 4
    # a 24 GiB card: memory decides; 8 cores: cores decide
    assert packing.jobs_per_gpu("auto", 24, 64, 1)[0] == 1
    assert packing.jobs_per_gpu("auto", 80, 8, 1)[0] == 2
    # asked for: as asked; no GPU: one job at a time
    assert packing.jobs_per_gpu("3", 24, 4, 1) == (3, "jobs_per_gpu=3")
    assert packing.jobs_per_gpu("auto", None, 64, 0)[0] == 1
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(packing.PackingError, match="auto, or a whole number >= 1"):
            packing.parse_jobs_per_gpu(bad)


def test_launch_cores_keep_hyperthreads_together_and_differ_between_gpus():
    cpus = list(range(16))
    siblings = {c: (c % 8, c % 8 + 8) for c in cpus}  # 8 physical cores, 2 threads each
    assert packing.launch_cpus(cpus, siblings, 0) == [7, 15]
    assert packing.launch_cpus(cpus, siblings, 1) == [6, 14]
    shared = packing.shared_cpus(cpus, siblings, 2)
    assert len(shared) == 12 and not {6, 7, 14, 15} & set(shared)
    alone = {c: (c,) for c in cpus}
    assert packing.launch_cpus(cpus, alone, 0) == [14, 15]
    assert packing.shared_cpus([0, 1], {0: (0,), 1: (1,)}, 1) == [0, 1]  # too small to keep any aside
    assert packing.compile_threads(14, 1, 4) == 7 and packing.compile_threads(2, 1, 4) == 2
