"""One verdict per autotune twin (sweeper/analysis/autotune_verdict.py): synthetic twins with
the figures of real pairs, the committed H200 headline pairs, and the rule the report keeps:
a speedup is said only of a figure that moved beyond its noise and that autotune accounts for."""

from __future__ import annotations

import pytest

from conftest import H200, fixture_records
from sweeper.analysis import autotune_verdict as av

GPU = "NVIDIA H100 80GB HBM3"


def twin(device_ms, step_median, step_loop, busy, launches=100.0, noise=1.0, launch_us=6.0, gpu=GPU):
    return {"device_ms": device_ms, "compiled_step_ms": step_median, "steady_step_ms": step_loop, "busy_pct": busy,
            "kernel_launches": launches, "step_noise_pct": noise, "launch_us": launch_us, "gpu": gpu}


def test_the_h100_pair_of_the_issue_gets_one_verdict_and_no_speedup():
    """inference b64 on an H100: kernels 1.577 -> 1.573 ms, the timed median 3.47 -> 5.06 ms, the steady
    loop 4.71 -> 3.91 ms, the GPU busy 33-40%: "GPU time unchanged, step cannot tell", never "1.20x"."""
    off = twin(1.577, 3.47, 4.71, 33.0, launches=420)
    on = twin(1.573, 5.06, 3.91, 40.0, launches=420)
    v = av.twin_verdict(off, on)
    assert v.gpu.word == av.WITHIN and v.step_word == av.CANNOT_TELL
    assert v.speedup is None and v.saved_ms is None
    text = av.sentence(v)
    assert text.startswith("the kernels' time a step goes from 1.58 ms to 1.57 ms: within noise (-0.3%, noise ±5.0%)")
    assert "the step: cannot tell (the step times disagree: the timed steps' median moved +45.8%, the steady loop -17.0%)" \
        in text
    assert "1.20x" not in text and "x faster" not in text


def test_a_busy_gpu_step_follows_its_kernels():
    off, on = twin(50.0, 55.0, 55.0, 92.0), twin(40.0, 45.0, 45.2, 93.0)
    v = av.twin_verdict(off, on)
    assert (v.gpu.word, v.step_word) == (av.FASTER, av.FASTER)
    assert v.speedup == pytest.approx(55.0 / 45.2) and v.saved_ms == pytest.approx(9.8)
    assert "1.22x faster (it follows the kernels (the GPU is busy 92-93% of the step))" in av.sentence(v)


def test_a_launch_bound_step_follows_its_launches_and_the_kernels_can_lose():
    """densenet121 b16 training on the H200 (headline): max-autotune's kernels took 9.1% longer, its step
    launched 10% fewer kernels; here the step moved 10% with the launches."""
    off = twin(8.24, 40.4, 40.4, 20.0, launches=2047)
    on = twin(8.99, 36.4, 36.4, 24.0, launches=1839)
    v = av.twin_verdict(off, on)
    assert v.gpu.word == av.SLOWER and v.gpu.said() == "9.1% slower"
    assert v.step_word == av.FASTER and "it follows the launches: 2047 -> 1839 a step (-10.2%" in v.step_why
    assert v.speedup == pytest.approx(40.4 / 36.4)  # the step's, with what accounts for it said beside


def test_a_step_that_moved_alone_is_the_hosts():
    off, on = twin(10.0, 20.0, 20.0, 50.0, launch_us=10.0), twin(10.1, 16.0, 16.0, 62.0, launch_us=7.9)
    v = av.twin_verdict(off, on)
    assert v.step_word == av.CANNOT_TELL and v.speedup is None
    assert "the host launched at 10.0 and 7.9 µs a launch: the host's doing, not autotune's" in v.step_why


def test_a_busy_step_has_the_reruns_noise_and_a_cpu_step_is_its_own_figure():
    # CUDA graphs, both 97% busy: the step moved 2.9%, inside the kernels' run-to-run noise
    v = av.twin_verdict(twin(0.707, 0.731, 0.731, 96.7, noise=0.02), twin(0.694, 0.709, 0.709, 97.8, noise=0.01))
    assert v.step_word == av.WITHIN and v.step.noise_pct == av.RERUN_DEVICE_PCT and v.speedup is None
    # on a CPU the host is the device: no kernels' figure, the step against its own noise
    cpu = av.twin_verdict(twin(30.0, 100.0, 100.0, None, noise=3.0, gpu=None),
                          twin(30.0, 80.0, 80.0, None, noise=4.0, gpu=None))
    assert cpu.gpu is None and cpu.step_word == av.FASTER and cpu.speedup == pytest.approx(1.25)
    assert av.twin_verdict(twin(1.0, None, None, 50.0), twin(1.0, 2.0, 2.0, 50.0)) is None


def test_the_headline_pairs_on_the_h200(headline_jobs):
    """The committed mission's command on an H200: mixnet_l's kernels within noise and its step the
    host's (it launched at 10.1 against 7.9 µs); densenet121's kernels 9.1% slower with max-autotune."""
    jobs = headline_jobs.set_index("label")
    mix = av.twin_verdict(jobs.loc["mixnet_l b128 train fp16"], jobs.loc["mixnet_l b128 train fp16 autotune"])
    assert mix.gpu.word == av.WITHIN and mix.step_word == av.CANNOT_TELL and mix.speedup is None
    dense = av.twin_verdict(jobs.loc["densenet121 b16 train fp16"], jobs.loc["densenet121 b16 train fp16 autotune"])
    assert dense.gpu.word == av.SLOWER and dense.gpu.change_pct == pytest.approx(9.11, abs=0.01)
    assert dense.step_word == av.WITHIN  # -9.3% inside both runs' step noise (±10.9%)


@pytest.fixture(scope="module")
def headline_jobs():
    from sweeper.reporting import tables

    return tables.jobs_table(fixture_records(H200 / "headline"))
