"""Holistic Trace Analysis (`traceinsight` 0.6.1, the `hta` package) reads a job's traces as its own: a rank, and one
iteration (ProfilerStep#<i>) a profiled call (sweeper/analysis/trace.profiler_steps, written
by tasks/profiling.label_trace). On the real H100 step trace of mixnet_l b128 training
(fixtures), HTA's kernel time per step is sweeper's within 1%."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

pytest.importorskip("hta")

FIXTURE = Path(__file__).parent / "fixtures" / "h100" / "model_code" / "mixnet_l_step.json.gz"


def hta_read(folder: Path, caplog):
    """HTA's TraceAnalysis of the folder, and the warnings it logged while reading."""
    from hta.trace_analysis import TraceAnalysis

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        analysis = TraceAnalysis(trace_dir=str(folder))
        analysis.t  # noqa: B018 - parsed on construction
    return analysis, [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
                      and any(w in r.getMessage() for w in UNREAD)]


# what HTA warns about when it cannot tell traces or iterations apart (hta/common/trace_file.py, trace.py)
UNREAD = ("distributedInfo", "same rank", "ProfilerStep", "only one iteration")


def test_hta_reads_a_gpu_step_trace_with_its_steps_and_rank_and_counts_the_same_kernel_time(tmp_path, caplog,
                                                                                            monkeypatch):
    from sweeper.analysis import trace as tr
    from tasks.profiling import analyse, label_trace

    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    folder = tmp_path / "traces"
    folder.mkdir()
    path = folder / "step.json.gz"
    with gzip.open(FIXTURE, "rt") as f:
        data = json.load(f)
    data["traceEvents"] = [e for e in data["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep")]
    data.pop("distributedInfo", None)  # as the profiler writes it: what label_trace adds, taken away
    with gzip.open(path, "wt") as f:
        json.dump(data, f)
    _, before = hta_read(folder, caplog)
    assert any("ProfilerStep not found" in w for w in before)  # what HTA says of the profiler's own trace
    label_trace(path, {}, runs=5, label="sweeper.step")
    steps = [e for e in json.load(gzip.open(path, "rt"))["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep")]
    assert [e["name"] for e in steps] == [f"ProfilerStep#{i}" for i in range(5)] and all(e["dur"] > 0 for e in steps)
    analysis, warnings = hta_read(folder, caplog)
    assert not warnings, warnings
    assert list(analysis.t.traces) == [0]
    df = analysis.t.get_trace(0)
    assert sorted(set(df["iteration"]) - {-1}) == [0, 1, 2, 3]  # HTA leaves the last step out, as it does its own
    # kernel time per step: HTA's (the steps it keeps) against sweeper's breakdown of the same trace
    events = tr.load_trace(path)
    ours = analyse(events, "cuda", "sweeper.step", 5, None)["device_ms"]
    kernels = df[(df["stream"] > 0) & df["iteration"].isin([0, 1, 2, 3])]
    theirs = kernels["dur"].sum() / 4 / 1000
    assert theirs == pytest.approx(ours, rel=0.01), (theirs, ours)


@pytest.mark.slow
def test_hta_reads_a_cpu_jobs_traces_one_rank_each(tmp_path, caplog):
    """A real CPU job's traces folder (the step and each compiled module): HTA reads each
    trace as a rank of its own, each with its steps."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    sweep = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=test_resnet", "image_size=32", "batch_size=2",
                           "measure.timed_steps=2", "measure.warmup_steps=1", "measure.profile_steps=3",
                           "measure.module_rounds=2", "measure.module_calls_per_round=1", "measure.module_profile_calls=3",
                           "measure.steady_loop_s=0", "measure.eager=false", "measure.accuracy=false",
                           f"hydra.sweep.dir={sweep}"], cwd=root, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    analysis, warnings = hta_read(sweep / "0" / "traces", caplog)
    assert not warnings, warnings
    assert sorted(analysis.t.traces) == [0, 1, 2]  # the step, forward_0, backward_1
    for rank in (0, 1, 2):  # three profiled calls each; HTA leaves the last out, as it does its own
        assert sorted(set(analysis.t.get_trace(rank)["iteration"]) - {-1}) == [0, 1], rank
