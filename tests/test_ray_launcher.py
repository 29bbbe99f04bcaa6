"""Sweeps through the Ray launcher (the default), with a real local Ray."""

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.record import read_record

ROOT = Path(__file__).resolve().parent.parent
TINY = ["mode=inference", "image_size=32", "batch_size=2", "measure.timed_steps=2", "measure.warmup_steps=1",
        "measure.profile_steps=1", "measure.module_rounds=2", "measure.module_calls_per_round=1",
        "measure.module_profile_calls=1", "measure.eager=false",
        "measure.steady_loop_s=0"]  # no steady loop: nothing here reads a figure over one (test_job_cpu.py does)


# A token-shaped value in the sweep's environment: it must not reach any file the sweep writes.
SECRET = "sk-sweeper-test-7f3a9c1e5b"


def sweep(sweep_dir, *overrides, timeout=900, faults=""):
    env = dict(os.environ, SWEEPER_TEST_API_TOKEN=SECRET, SWEEPER_TEST_FAULTS=faults)  # tasks/faults.py
    return subprocess.run([sys.executable, "-m", "sweeper", *overrides, f"hydra.sweep.dir={sweep_dir}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def sigint_default():
    """In a child: take SIGINT's default disposition. A shell running CI in the background
    starts it with SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def summary(sweep_dir):
    return json.loads((Path(sweep_dir) / "summary.json").read_text())


@pytest.fixture(scope="module")
def four_jobs(tmp_path_factory):
    d = tmp_path_factory.mktemp("four")
    scratch = tmp_path_factory.mktemp("scratch")
    args = ["model=test_resnet,test_vit", "autotune=on,off", *TINY, f"hydra.launcher.scratch_dir={scratch}"]
    proc = sweep(d, *args)
    return d, scratch, args, proc


@pytest.mark.slow
def test_four_job_sweep_on_ray(four_jobs):
    d, scratch, _, proc = four_jobs
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    out = proc.stdout + proc.stderr
    assert "embedded local Ray" in out and "Launching 4 jobs on Ray" in out
    s = summary(d)
    assert s["complete"] and s["counts"]["ok"] == 4
    seen = set()
    for job in s["jobs"]:
        rec = read_record(job["dir"])
        assert rec["status"] == "ok"
        seen.add((rec["config"]["model"], rec["config"]["autotune"]))
        assert rec["resolved"]["compile_mode"] == ("max-autotune-no-cudagraphs" if rec["config"]["autotune"] else "default")
        assert job["headline"]["compiled_step_ms"] == rec["timings"]["compiled_step_ms"]["median"]
        # artifacts came back into the sweep folder; the compile cache stayed in scratch, removed with it
        assert Path(rec["job"]["dir"]) == Path(job["dir"])
        for trace in rec["artifacts"]["traces"].values():
            assert Path(trace).is_file() and Path(trace).is_relative_to(d)
        assert not (Path(job["dir"]) / "cache").exists()
    assert seen == {("test_resnet", True), ("test_resnet", False), ("test_vit", True), ("test_vit", False)}
    assert list(Path(scratch).iterdir()) == []  # each job's scratch folder removed once its folder was back
    # the aggregation ran at the end: tables equal the records, the report lists every job
    import pandas as pd

    assert f"report: {d / 'report.html'}" in proc.stdout
    table = pd.read_parquet(d / "tables" / "jobs.parquet").set_index("job")
    for job in s["jobs"]:
        rec = read_record(job["dir"])
        row = table.loc[job["num"]]
        assert row["compiled_step_ms"] == rec["timings"]["compiled_step_ms"]["median"]
        assert row["share_cpp_kernel"] == rec["step"]["categories"]["cpp_kernel"]["share_of_device_pct"]
        assert row["device"] == "cpu" and pd.isna(row["peak_memory_mb"])
    page = (d / "report.html").read_text()
    assert page.count("<li>#") == 4 and "test_vit b2 infer bf16 autotune" in page  # a re-run line per job
    # one verdict per autotune pair, from the figure that carries it, and where max-autotune loses, site by site
    from sweeper.reporting.autotune_regret import REGRET_COLUMNS

    for model in ("test_resnet", "test_vit"):
        label = next(str(r["label"]) for _, r in table.iterrows() if r["model"] == model and not r["autotune"])
        assert page.count(f"max-autotune on {label}: the step ") == 1  # a CPU: the step, no kernels' figure
        assert f"Where max-autotune loses in {label}:" in page
    regret = pd.read_csv(d / "tables" / "autotune_regret.csv")
    assert list(regret.columns) == list(REGRET_COLUMNS)
    assert ((regret["change_ms"].abs() > regret["noise_pct"] / 100 * regret[["off_ms", "on_ms"]].max(axis=1))).all()
    assert sorted(p.name for p in (d / "figures").iterdir()) == ["autotune.png", "busy.png", "categories.png",
                                                                "compile.png", "modules.png", "pairs.png",
                                                                "roofline.png", "shares.png"]


@pytest.mark.slow
def test_dry_run_expects_the_time_the_same_jobs_took_before(four_jobs, tmp_path):
    d, _, args, proc = four_jobs
    assert proc.returncode == 0
    took = {read_record(j["dir"])["job"]["duration_s"] for j in summary(d)["jobs"]}
    # a sweep folder beside the finished one: outputs/<date>/<time> against outputs/<date>/<other time>
    again = subprocess.run([sys.executable, "-m", "sweeper", *args[1:], "model=test_resnet,test_vit,test_efficientnet",
                            "dry_run=true", f"hydra.sweep.dir={d.parent / 'again'}"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    line = next(x for x in again.stdout.splitlines() if x.startswith("expected duration"))
    from sweeper.sweep.estimate import duration_words

    # one CPU job at a time here: their durations added, in the dry run's words ("80 s", "2 min")
    assert f"about {duration_words(sum(took))} with 1 at a time" in line and "4 of 6 jobs on a CPU" in line, line
    listed = [x.split()[0] for x in again.stdout.splitlines() if "model=test_efficientnet" in x]
    assert f"no earlier record: {', '.join(listed)}" in line


@pytest.mark.slow
def test_resume_skips_finished_jobs(four_jobs):
    d, _, args, _ = four_jobs
    t0 = time.time()
    proc = sweep(d, *args)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "4/4 done (4 from an earlier run)" in proc.stdout
    assert all(j["reused_from_earlier_run"] for j in summary(d)["jobs"])
    assert time.time() - t0 < 120  # no job was compiled again


@pytest.mark.slow
def test_resume_reruns_a_job_whose_record_is_truncated(four_jobs):
    d, _, args, _ = four_jobs
    broken = Path(summary(d)["jobs"][1]["dir"]) / "result.json"
    broken.write_text(broken.read_text()[:200])  # a record cut off mid-write
    proc = sweep(d, *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert str(broken) in out and "running the job again" in out
    assert "Launching 1 job on Ray (3 kept from an earlier run)" in out
    jobs = summary(d)["jobs"]
    assert [j["reused_from_earlier_run"] for j in jobs] == [True, False, True, True]
    assert read_record(broken.parent)["status"] == "ok"


@pytest.mark.slow
def test_nothing_secret_is_written_and_generated_code_stays_in_the_job_cache(four_jobs):
    d, scratch, _, _ = four_jobs
    files = [p for p in Path(d).rglob("*") if p.is_file()]
    assert len(files) > 20
    for p in files:
        data = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        assert SECRET.encode() not in data, f"{p} holds a value of the sweep's environment"
    for job in summary(d)["jobs"]:
        rec = read_record(job["dir"])
        cache = Path(scratch).resolve()
        for m in rec["modules"]:
            # the module that ran came from this job's own cache folder, nowhere shared
            src = Path(m["source_path"]).resolve()
            assert src.is_relative_to(cache) and "cache" in src.relative_to(cache).parts, src
        # that cache went with the scratch folder: the record names no folder that is gone
        assert rec["artifacts"]["cache"] is None and "removed with its scratch folder" in rec["artifacts"]["cache_note"]


@pytest.mark.slow
@pytest.mark.beside  # the hang's 45 s would leave a worker's core idle: make test runs it beside the workers
def test_crash_and_hang_are_isolated(tmp_path):
    # one CPU a job: they run side by side, so the sweep lasts about the hang's time limit.
    # 45 s: the ok job took 23-26 s on 2 cores under the rest of make test as a cold compile
    # (when the four jobs were seeds 0-3). They differ now in how they are measured, not in
    # what they compile (sweeper/identity.py): one compile, which the run's other sweeps share
    args = ["model=test_resnet", "measure.timed_steps=2,3,4,5", "timeout_s=45",
            *[a for a in TINY if not a.startswith("measure.timed_steps=")], "hydra.launcher.num_cpus_per_job=1"]
    proc = sweep(tmp_path, *args, faults="0=crash,1=hang,2=raise")
    assert proc.returncode == 1
    crash, hang, raised, ok = sorted(summary(tmp_path)["jobs"], key=lambda j: j["num"])
    assert crash["status"] == "failed" and "killed by signal 11" in crash["reason"]
    # an exception in the job: recorded by the job itself, with its phase
    assert raised["status"] == "failed" and "injected fault (SWEEPER_TEST_FAULTS: raise)" in raised["reason"]
    assert read_record(raised["dir"])["phase"] == "setup"
    assert hang["status"] == "failed" and "timed out after 45 s" in hang["reason"]
    assert ok["status"] == "ok"
    assert "injecting fault 'crash'" in read_record(crash["dir"])["log_tail"]
    # the launcher wrote these records; they name the phase the job had reached, from its log
    assert read_record(crash["dir"])["phase"] == read_record(hang["dir"])["phase"] == "setup"
    # the closing report names the failed jobs, their logs, and how to re-run
    assert "3 of 4 jobs did not finish" in proc.stdout
    assert crash["log"] in proc.stdout and "hydra.sweep.dir=" in proc.stdout
    # resume: the ok job is kept, the failed ones run again. The time limit is how a job is
    # run, not which job it is (sweeper/identity.py): a shorter one resumes the same sweep,
    # and the hang, the only job that waits it out, ends 25 s sooner
    again = sweep(tmp_path, *[a for a in args if not a.startswith("timeout_s=")], "timeout_s=20")
    assert "4/4 done (1 from an earlier run)" in again.stdout, again.stdout[-3000:]


@pytest.mark.slow
def test_two_node_cluster_ships_artifacts_and_survives_node_loss(tmp_path):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    worker = cluster.add_node(num_cpus=2)
    try:
        scratch = tmp_path / "node-local"
        args = ["model=test_resnet,test_vit", *TINY, f"hydra.launcher.address={cluster.address}",
                f"hydra.launcher.scratch_dir={scratch}", "hydra.launcher.num_cpus_per_job=2"]
        proc = subprocess.Popen([sys.executable, "-m", "sweeper", *args, f"hydra.sweep.dir={tmp_path / 'sweep'}"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # once both jobs run (one a node), take the second node away
        deadline = time.time() + 300
        while time.time() < deadline and len(list(scratch.glob("*/*/job.log"))) < 2:
            time.sleep(1)
        assert len(list(scratch.glob("*/*/job.log"))) == 2, "both jobs should have started"
        cluster.remove_node(worker, allow_graceful=False)
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, out[-4000:]
        assert "joined Ray cluster" in out
        s = summary(tmp_path / "sweep")
        assert s["counts"]["ok"] == 2
        for job in s["jobs"]:
            rec = read_record(job["dir"])
            # the job that lost its node was retried: both finished on the head node
            assert rec["job"]["ray_node_id"] == cluster.head_node.node_id
            assert all(Path(t).is_relative_to(tmp_path / "sweep") for t in rec["artifacts"]["traces"].values())
    finally:
        cluster.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_cancels_running_jobs_and_keeps_the_summary(tmp_path, sig):
    scratch = tmp_path / "scratch"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweeper", "model=test_resnet", "seed=0,1", *TINY,
         f"hydra.launcher.scratch_dir={scratch}", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=sigint_default)
    deadline = time.time() + 120
    while time.time() < deadline and not list(scratch.glob("*/*/job.log")):
        time.sleep(0.5)
    time.sleep(2)
    proc.send_signal(sig)  # SIGTERM ends the sweep as Ctrl-C does
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    assert "interrupted: cancelling" in out
    s = summary(tmp_path / "sweep")
    assert not s["complete"] and s["counts"]["cancelled"] >= 1
    # cancelled is cancelled everywhere: the jobs' records and a report made afterwards
    cancelled = [j for j in s["jobs"] if j["status"] == "cancelled"]
    assert all(read_record(j["dir"])["status"] == "cancelled" for j in cancelled)
    # the closing report's log paths exist; a job cancelled before it started says it has none
    assert all(Path(j["log"]).is_file() if j["log"] else "never started" in j["log_note"] for j in cancelled)
    assert any(j["log"] for j in cancelled)  # the running one's log came back from the scratch folder
    from sweeper.aggregate import aggregate

    page = aggregate(tmp_path / "sweep").read_text()
    counts = re.search(r"\d+ jobs: ([^<]*)</p>", page).group(1)  # e.g. "2 cancelled" or "1 ok, 1 cancelled"
    assert f"{len(cancelled)} cancelled" in counts and "failed" not in counts
    time.sleep(2)
    left = subprocess.run(["pgrep", "-f", str(scratch)], capture_output=True, text=True).stdout.split()
    assert left == [], "job processes outlived the cancelled sweep"


def _alive(pid):  # a zombie has ended: only its parent's reaping is left
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _process_tree(root):
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            children.setdefault(int(stat.read_text().rsplit(")", 1)[1].split()[1]), []).append(int(stat.parent.name))
        except OSError:
            pass
    tree, todo = [], [root]
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    return tree


@pytest.mark.slow
def test_a_driver_killed_outright_leaves_no_ray_process_behind(tmp_path):
    scratch = tmp_path / "scratch"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweeper", "model=test_resnet", *TINY, "timeout_s=300",
         f"hydra.launcher.scratch_dir={scratch}", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, SWEEPER_TEST_FAULTS="*=hang"))
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not list(scratch.glob("*/*/job.log")):
            time.sleep(0.5)
        time.sleep(2)
        tree = _process_tree(proc.pid)  # Ray's GCS and raylet, its agents, the worker, the job
        names = " ".join(Path(f"/proc/{p}/cmdline").read_text() for p in tree if _alive(p))
        assert "DashboardAgent" in names and "tasks.job" in names, names[:2000]
        proc.kill()  # SIGKILL: the driver runs no handler, no atexit
        proc.wait()
        deadline = time.time() + 15
        while time.time() < deadline and any(map(_alive, tree)):
            time.sleep(0.5)
        left = [Path(f"/proc/{p}/cmdline").read_text().replace("\0", " ")[:80] for p in tree if _alive(p)]
        assert left == [], f"still running 15 s after the driver was killed: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()


# A driver as the watcher sees it: it starts the watcher, then a child (as ray.init starts
# Ray's processes), then its pipe to the watcher closes (as it does in the interpreter's
# shutdown) and it takes a few seconds more to end.
SLOW_ENDING_DRIVER = r"""
import subprocess, sys, time
from hydra_plugins.sweeper_ray import _reaper
_reaper.watch_embedded_ray()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
print(child.pid, flush=True)
time.sleep(1.5)  # the watcher notes the child
_reaper._watchers[0].stdin.close()
time.sleep(float(sys.argv[1]))
"""


def test_the_watcher_waits_for_a_slow_ending_driver_and_then_ends_what_it_left():
    """The watcher killed drivers that were ending normally: a finished sweep on a loaded CI
    machine exited -9 (SIGKILL) after printing its report, when its end took longer than the
    watcher's grace after the pipe closed. The driver's own end is now waited for."""
    proc = subprocess.Popen([sys.executable, "-c", SLOW_ENDING_DRIVER, "3.5"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    try:
        assert proc.wait(timeout=60) == 0  # not -9: the watcher's grace is 2 s
        deadline = time.time() + 15
        while time.time() < deadline and _alive(child):
            time.sleep(0.2)
        assert not _alive(child), "the driver's child should have been ended once the driver was gone"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


# A driver whose Ray session is named by a child's command line (as the GCS's --log_dir
# names it), which then ends at once: a worker the raylet started after the watcher's last
# look is nobody's known descendant.
SESSION_DRIVER = r"""
import subprocess, sys, time
from hydra_plugins.sweeper_ray import _reaper
_reaper.watch_embedded_ray()
gcs = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "--log_dir=" + sys.argv[1] + "/logs"],
                       start_new_session=True)
print(gcs.pid, flush=True)
time.sleep(1.5)  # the watcher notes the child and reads the session from it
"""


def test_the_watcher_ends_the_workers_of_its_session_it_never_saw_start(tmp_path):
    """Faults round 6, case 19: after SIGKILL of the driver, Ray workers started about 1 s
    before lived on for up to 30 s: started after the watcher's last look, orphaned with the
    raylet, they were no known descendant. Ray points a worker's stdout into its session's
    log folder: the watcher ends the processes writing there."""
    session = tmp_path / "ray" / "session_2026-12-07_23-28-00_262178_4242"
    (session / "logs").mkdir(parents=True)
    with open(session / "logs" / "worker-1.out", "w") as out:  # no descendant of the driver at all
        worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdout=out,
                                  start_new_session=True)
    elsewhere = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], stdout=subprocess.DEVNULL,
                                 start_new_session=True)  # another process of the user: left alone
    proc = subprocess.Popen([sys.executable, "-c", SESSION_DRIVER, str(session)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    gcs = int(proc.stdout.readline())
    try:
        assert proc.wait(timeout=60) == 0
        deadline = time.time() + 15
        while time.time() < deadline and (worker.poll() is None or _alive(gcs)):
            time.sleep(0.2)
        assert worker.poll() is not None, "a worker of the driver's Ray session outlived the driver"
        assert not _alive(gcs)
        assert elsewhere.poll() is None, "a process outside the session was killed"
    finally:
        for p in (worker, elsewhere):
            p.kill()
        if _alive(gcs):
            os.kill(gcs, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.3])
def test_sigterm_while_ray_starts_cancels_the_sweep_and_leaves_no_process(tmp_path, after_s):
    """SIGTERM once Ray's raylet is up but before ray.init returned: it exited 15 without a
    word (Ray's own handler), and Ray's two agents lived on. Now it is Ctrl-C's cancellation.
    Not yet right: a SIGTERM in the last moment of ray.init, while the driver connects and
    Ray's C++ failure-signal handler is installed (1.5 s after the raylet, on an idle 2-core
    machine), is cancelled and leaves nothing behind, but the driver then aborts (exit -6)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweeper", "model=test_resnet", *TINY, f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: set[int] = set()
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            seen |= set(_process_tree(proc.pid))
            if "raylet" in " ".join(Path(f"/proc/{p}/cmdline").read_text() for p in seen if _alive(p)):
                break
            time.sleep(0.05)
        time.sleep(after_s)
        seen |= set(_process_tree(proc.pid))
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out[-3000:]
    assert "interrupted: cancelling 0 running and 1 queued jobs" in out
    assert summary(tmp_path / "sweep")["counts"]["cancelled"] == 1
    deadline = time.time() + 15
    while time.time() < deadline and any(map(_alive, seen - {os.getpid()})):
        time.sleep(0.5)
    left = [Path(f"/proc/{p}/cmdline").read_text().replace("\0", " ")[:80] for p in seen if _alive(p)]
    assert left == [], f"still running 15 s after the sweep was stopped: {left}"


def sweep_killing_the_worker(tmp_path, *extra, until_in_log: str | None = None):
    """A one-job sweep whose Ray worker is killed mid-job (SIGKILL to the job process's
    parent), once the job's log says `until_in_log` where given (waited for, not timed: a
    loaded machine's job had written nothing 3 s in): (the finished process, its output,
    the job process's pid)."""
    scratch = tmp_path / "scratch"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweeper", "model=test_resnet", *TINY, "timeout_s=300", *extra,
         f"hydra.launcher.scratch_dir={scratch}", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, job_pid = time.time() + 180, None
        while time.time() < deadline and not job_pid:
            found = subprocess.run(["pgrep", "-f", f"tasks.job {scratch}"], capture_output=True, text=True)
            job_pid = found.stdout.split()[0] if found.stdout.split() else None
            time.sleep(0.5)
        assert job_pid, "the job process never started"
        if until_in_log:
            logs = list(scratch.rglob("job.log"))
            while time.time() < deadline and not any(until_in_log in p.read_text(errors="replace") for p in logs):
                time.sleep(0.2)
                logs = list(scratch.rglob("job.log"))
            assert any(until_in_log in p.read_text(errors="replace") for p in logs), f"no {until_in_log!r} in the job's log"
        worker_pid = int(Path(f"/proc/{job_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        os.kill(worker_pid, signal.SIGKILL)  # the Ray worker holding the job dies mid-job
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc, out, job_pid


@pytest.mark.slow
def test_ray_worker_killed_mid_job_is_retried(tmp_path):
    proc, out, job_pid = sweep_killing_the_worker(tmp_path)
    assert proc.returncode == 0, out[-4000:]
    time.sleep(1)
    assert not Path(f"/proc/{job_pid}").exists(), "the first attempt's job process outlived its worker"
    s = summary(tmp_path / "sweep")
    assert s["counts"]["ok"] == 1  # retried on a fresh worker (max_retries_on_node_loss=1)
    # said, not left to Ray's own lines: on the terminal, in the record and the summary (faults round 5, case 8)
    assert "#0 ran again after its worker or node was lost" in out and "runs again (attempt 2)" in out, out[-4000:]
    rec = read_record(tmp_path / "sweep" / "0")
    assert rec["job"]["retried"]["attempt"] == 2 and s["jobs"][0]["retried"].startswith("attempt 2 on ")
    # and where a reader looks later: the job's log first, the report (faults round 6, case 20)
    first = (tmp_path / "sweep" / "0" / "job.log").read_text().splitlines()[0]
    assert first.startswith("[sweeper] attempt 2 on ") and "worker or node was lost" in first, first
    report = (tmp_path / "sweep" / "report.html").read_text()
    assert "ran again from the start: #0 (attempt 2 on " in report, report[:3000]


@pytest.mark.slow
def test_a_job_whose_worker_died_with_no_retry_left_names_a_log_that_exists(tmp_path):
    # killed once its log says a phase began, with no retry left
    proc, out, _ = sweep_killing_the_worker(tmp_path, "hydra.launcher.max_retries_on_node_loss=0",
                                            until_in_log="[sweeper] phase")
    assert proc.returncode == 1, out[-4000:]
    job = summary(tmp_path / "sweep")["jobs"][0]
    assert job["status"] == "failed" and "Ray task failed" in job["reason"]
    # every path the closing report prints exists: the job's log (brought back from the
    # node's scratch folder) and Ray's own worker logs
    printed = re.search(r"#0: (\S+)", out).group(1)
    assert printed == job["log"] and Path(printed).is_file() and "[sweeper] phase" in Path(printed).read_text()
    ray_logs = re.search(r"Ray's own logs of its workers: (\S+)", out).group(1)
    assert Path(ray_logs).is_dir()
    rec = read_record(job["dir"])
    assert rec["phase"] not in ("process", "start")  # the phase its log announced last


EMBEDDED_RAY_CHECK = r"""
import json, os, socket
from pathlib import Path
from hydra_plugins.sweeper_ray._ray import init_ray
import ray
from ray._private.authentication.authentication_utils import is_token_auth_enabled

msg = init_ray({})

@ray.remote
def where():  # a worker, so that worker processes are listening too
    return ray.util.get_node_ip_address()

worker_ip = ray.get(where.remote())

def listening():  # inode -> "address:port" of every listening TCP socket on this machine
    out = {}
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] != "0A":
                continue
            addr, port = f[1].split(":")
            raw = bytes.fromhex(addr)
            if v6:  # four little-endian 32-bit words
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                ip = socket.inet_ntop(socket.AF_INET6, raw)
            else:
                ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
            out[f[9]] = f"{ip}:{int(port, 16)}"
    return out

def descendants(root):
    kids = {}
    for st in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = st.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(fields[1]), []).append(int(st.parent.name))
    todo, seen = [root], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += kids.get(pid, [])
    return seen

socks = listening()
mine = []
for pid in descendants(os.getpid()):
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in socks:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            mine.append((comm, socks[target[8:-1]]))
node = ray._private.worker.global_worker.node
print(json.dumps({"msg": msg, "sockets": sorted(set(mine)), "webui": node.address_info.get("webui_url"),
                  "token": is_token_auth_enabled(), "node_ip": node.node_ip_address, "worker_ip": worker_ip}))
ray.shutdown()
"""


AUTH_OFF_CHECK = r"""
from hydra_plugins.sweeper_ray._ray import init_ray
import ray
print(init_ray({}))
ray.shutdown()
"""


def test_the_launcher_says_when_token_authentication_is_off():
    proc = subprocess.run([sys.executable, "-c", AUTH_OFF_CHECK], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env=dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "token authentication OFF" in proc.stdout and "token authentication on" not in proc.stdout
    assert "warning: Ray's token authentication is off (RAY_AUTH_MODE=disabled)" in proc.stderr


def test_the_embedded_ray_is_its_own_even_where_ray_start_left_a_cluster_address(ray_tmpdir):
    """ray.init() with no address joins the cluster that `ray start` last wrote down on this
    machine (RAY_TMPDIR/ray/ray_current_cluster), and keeps retrying one that is gone: the
    default sweep must start its own instead."""
    (Path(ray_tmpdir) / "ray").mkdir()
    (Path(ray_tmpdir) / "ray" / "ray_current_cluster").write_text("127.0.0.1:9")  # a cluster started, then stopped
    proc = subprocess.run([sys.executable, "-c", AUTH_OFF_CHECK], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT), RAY_TMPDIR=ray_tmpdir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "started an embedded local Ray on 127.0.0.1" in proc.stdout


def test_embedded_ray_listens_on_loopback_only_without_dashboard_and_with_token_auth():
    # A fresh interpreter: Ray reads its local-only switch when it is imported.
    proc = subprocess.run([sys.executable, "-c", EMBEDDED_RAY_CHECK], cwd=ROOT, capture_output=True,
                          text=True, timeout=180, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "embedded local Ray" in out["msg"]
    assert out["node_ip"] == "127.0.0.1" and out["worker_ip"] == "127.0.0.1"
    comms = {comm for comm, _ in out["sockets"]}
    assert {"gcs_server", "raylet"} <= comms, out["sockets"]  # the sockets were found...
    outside = [(c, a) for c, a in out["sockets"] if not a.startswith(("127.0.0.1:", "::ffff:127.0.0.1:", "::1:"))]
    assert not outside, f"Ray listens beyond loopback: {outside}"  # ...and none faces the network
    assert not out["webui"]  # no dashboard
    assert out["token"]  # Ray 2.60's token authentication stays on


SHARE_CHECK = r"""
import json, os
import ray
from hydra_plugins.sweeper_ray._node import compile_threads_share
ray.init(address="local", num_cpus=4, num_gpus=2, include_dashboard=False)  # its own Ray, never another on this machine; two GPUs as Ray resources (none are used)

@ray.remote(num_gpus=1, num_cpus=1)
def gpu_job():
    return compile_threads_share()

@ray.remote(num_cpus=1)
def cpu_job():
    return compile_threads_share()

print(json.dumps({"gpu": ray.get(gpu_job.remote()), "cpu": ray.get(cpu_job.remote()),
                  "cores": len(os.sched_getaffinity(0))}))
ray.shutdown()
"""


def test_compile_threads_share_divides_a_nodes_cores_by_its_gpus():
    proc = subprocess.run([sys.executable, "-c", SHARE_CHECK], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["gpu"] == max(1, min(32, out["cores"] // 2))  # a GPU job: its GPU's share of the cores
    assert out["cpu"] == min(32, out["cores"])  # a CPU job: every core


def test_bad_compile_threads_value_stops_before_any_job(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=test_resnet", "hydra.launcher.compile_threads=half",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "hydra.launcher.compile_threads=half: one of auto, all, share" in proc.stderr
    assert not (tmp_path / "sweep").exists() or not [p for p in (tmp_path / "sweep").iterdir() if p.is_dir()]
