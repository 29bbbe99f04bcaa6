import pytest

from sweeper import breakdown as bd
from sweeper import trace as tr


def k(name, start, dur, cat="kernel"):
    return tr.Interval(name, cat, start, dur)


def test_shares_and_per_run_figures():
    kernels = [k("triton_poi_a", 0, 30), k("triton_red_b", 30, 10), k("sm90_xmma_gemm", 50, 60),
               k("triton_poi_a", 200, 30), k("triton_red_b", 230, 10), k("sm90_xmma_gemm", 250, 60)]
    b = bd.breakdown(kernels, runs=2, span=(0, 400), wall_ms=0.2)
    assert b["device_ms"] == pytest.approx(0.1)
    cats = b["categories"]
    assert list(cats) == ["triton_pointwise", "triton_reduction", "library_mm_conv"]
    assert cats["triton_pointwise"]["share_of_device_pct"] == pytest.approx(30)
    assert cats["library_mm_conv"]["pct_of_wall"] == pytest.approx(30)
    assert b["busy_pct"] == pytest.approx(200 / 400 * 100)
    assert b["busy_pct_reference_style"] == pytest.approx(50)
    top = b["kernels"][0]
    assert top["name"] == "sm90_xmma_gemm" and top["count"] == 1 and top["device_ms"] == pytest.approx(0.06)
    assert sum(c["share_of_device_pct"] for c in cats.values()) == pytest.approx(100)
    assert b["reference_categories_share_pct"]["unknown"] == pytest.approx(60)


def test_busy_never_exceeds_100_with_overlapping_streams():
    kernels = [k("a", 0, 100), k("b", 0, 100), k("c", 50, 100)]
    b = bd.breakdown(kernels, runs=1, span=bd.profiled_span(kernels, []), wall_ms=0.1)
    assert b["busy_pct"] == pytest.approx(100)
    assert b["busy_pct_reference_style"] == pytest.approx(300)  # the -p figure can pass 100%


def test_span_starts_at_the_host_range_and_ends_at_the_last_kernel():
    kernels = [k("a", 10, 5), k("b", 50, 20)]
    assert bd.profiled_span(kernels, [(0, 30)]) == (0, 70)
    assert bd.profiled_span(kernels, []) == (10, 70)
    assert bd.profiled_span([], []) is None


def test_spread():
    s = bd.spread([13, 11, 50, 10, 12.123456])
    assert s["median"] == 12.123456 and s["min"] == 10 and s["max"] == 50 and s["n"] == 5
    assert s["values"] == [13, 11, 50, 10, 12.1235]  # in the order measured, rounded
    assert s["range_pct"] == pytest.approx(40 / 12.123456 * 100)
    with pytest.raises(ValueError):
        bd.spread([])


def test_h200_step_breakdown_is_reproduced_from_its_trace(h200, resnet18_record):
    """The GPU job computed its step breakdown from this very trace: same code, same figures."""
    step = resnet18_record["step"]
    kernels = tr.device_kernels(tr.load_trace(h200 / "resnet18_step.json.gz"))
    b = bd.breakdown(kernels, runs=step["runs"], span=bd.profiled_span(kernels, []), wall_ms=step["wall_ms"])
    assert b["device_ms"] == pytest.approx(step["device_ms"])
    assert b["busy_pct"] == pytest.approx(step["busy_pct"])
    assert b["busy_pct"] < 100
    for cat, c in step["categories"].items():
        assert b["categories"][cat]["share_of_device_pct"] == pytest.approx(c["share_of_device_pct"])
    # resnet18, batch 32, training, no CUDA graphs: launch-bound, well under half busy
    assert 5 < b["busy_pct"] < 50


def test_steady_means_a_small_interquartile_range():
    from sweeper.breakdown import steady

    assert steady([10.0, 10.05, 10.1, 9.95, 10.0], 2.0)  # IQR 0.1 ms of 10 ms: 1%
    assert not steady([10.0, 14.0, 10.0, 14.0, 12.0], 2.0)  # launch-bound noise
    assert not steady([0.0, 0.0, 0.0, 0.0], 2.0)  # nothing measured is never steady


def test_module_timing_stops_early_only_when_rounds_agree():
    import time

    from tasks.timing import time_until_steady

    calm, no_probe = time_until_steady(lambda: time.sleep(0.002), "cpu", 2, min_samples=3, max_samples=12,
                                       steady_pct=50.0)
    assert len(calm) == 3 and no_probe == []  # sleep(2 ms) rounds agree within 50%: no round beyond the minimum
    delays = iter([0.001, 0.001, 0.008, 0.008] * 10)
    noisy, _ = time_until_steady(lambda: time.sleep(next(delays)), "cpu", 1, min_samples=3, max_samples=8,
                                 steady_pct=2.0)
    assert len(noisy) == 8  # 1 ms against 8 ms rounds never settle: every round is taken


def test_each_timed_round_comes_with_a_launch_probe_reading_taken_just_before_it():
    from tasks.timing import launch_probe_us, time_until_steady

    order = []

    def probe():
        order.append("probe")
        return launch_probe_us("cpu")

    samples, readings = time_until_steady(lambda: order.append("call"), "cpu", 2, min_samples=4, max_samples=4,
                                          steady_pct=0.0, probe=probe)
    assert len(samples) == len(readings) == 4
    assert order == ["probe", "call", "call"] * 4  # one reading, then that round's 2 calls
    # A real reading of the CPU's dispatch of a tiny op: microseconds, not zero or seconds.
    assert all(0.05 < r < 10_000 for r in readings)
