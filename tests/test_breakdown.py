import pytest

from sweeper.analysis import breakdown as bd
from sweeper.analysis import trace as tr


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
    # per run: 100 us of kernel intervals in 200 us of unprofiled wall time
    assert b["busy_ms"] == pytest.approx(0.1)
    assert b["busy_pct"] == pytest.approx(50) and b["busy_capped"] is False
    assert b["busy_pct_profiled_span"] == pytest.approx(200 / 400 * 100)
    assert b["busy_pct_reference_style"] == pytest.approx(50)
    top = b["kernels"][0]
    assert top["name"] == "sm90_xmma_gemm" and top["count"] == 1 and top["device_ms"] == pytest.approx(0.06)
    assert sum(c["share_of_device_pct"] for c in cats.values()) == pytest.approx(100)
    assert b["reference_categories_share_pct"]["unknown"] == pytest.approx(60)


def test_busy_never_exceeds_100_with_overlapping_streams():
    kernels = [k("a", 0, 100), k("b", 0, 100), k("c", 50, 100)]
    b = bd.breakdown(kernels, runs=1, span=bd.profiled_span(kernels, []), wall_ms=0.2)
    assert b["busy_ms"] == pytest.approx(0.15)  # three kernels on three streams: their union, once
    assert b["busy_pct"] == pytest.approx(75) and not b["busy_capped"]
    assert b["busy_pct_profiled_span"] == pytest.approx(100)
    assert b["busy_pct_reference_style"] == pytest.approx(150)  # the -p figure counts overlaps twice


def test_busy_over_100_from_noise_is_capped_and_says_so():
    # the unprofiled step ran a little faster than the profiled steps' kernels took
    kernels = [k("a", 0, 100), k("b", 100, 10)]
    b = bd.breakdown(kernels, runs=1, span=(0, 110), wall_ms=0.1)
    assert b["busy_pct"] == 100.0 and b["busy_capped"] is True
    assert b["busy_pct_uncapped"] == pytest.approx(110)


def test_busy_needs_a_span_and_a_wall_time():
    kernels = [k("a", 0, 100)]
    assert bd.breakdown(kernels, runs=1, span=(0, 100))["busy_pct"] is None  # no unprofiled wall time
    assert bd.breakdown(kernels, runs=1, wall_ms=0.2)["busy_pct"] is None  # no profiled span


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
    assert s["trimmed_mean"] == pytest.approx((13 + 11 + 50 + 10 + 12.123456) / 5)  # under 10 rounds: nothing trimmed
    with pytest.raises(ValueError):
        bd.spread([])


def test_a_module_wall_figure_follows_the_mix_of_two_host_speeds_where_the_median_jumps():
    # Rounds on a host switching between two launch speeds (14 and 20 ms a call): the
    # median jumps from one level to the other as the mix passes one half; the trimmed
    # mean moves with the mix, and a stalled round (90 ms) moves it no more than the median.
    def rounds(fast):
        return [14.0] * fast + [20.0] * (19 - fast) + [90.0]

    medians = [bd.spread(rounds(f))["median"] for f in (9, 11)]
    figures = [bd.wall_figure(bd.spread(rounds(f))) for f in (9, 11)]
    assert medians == [20.0, 14.0]
    # 20 rounds: two off each end, the stall among them; (7 x 14 + 9 x 20) / 16, (9 x 14 + 7 x 20) / 16
    assert figures == pytest.approx([17.375, 16.625])
    # a record written before the trimmed mean existed gives its median
    assert bd.wall_figure({"median": 12.5}) == 12.5


def test_h200_step_breakdown_is_reproduced_from_its_trace(h200, resnet18_record):
    """The GPU job computed its step breakdown from this very trace: same code, same figures."""
    step = resnet18_record["step"]
    kernels = tr.device_kernels(tr.load_trace(h200 / "resnet18_step.json.gz"))
    b = bd.breakdown(kernels, runs=step["runs"], span=bd.profiled_span(kernels, []), wall_ms=step["wall_ms"])
    assert b["device_ms"] == pytest.approx(step["device_ms"])
    # this record predates the unprofiled busy figure: its busy_pct was the profiled span's
    assert b["busy_pct_profiled_span"] == pytest.approx(step["busy_pct"])
    assert b["busy_pct"] == pytest.approx(b["busy_ms"] / step["wall_ms"] * 100)
    assert b["busy_pct_profiled_span"] <= b["busy_pct"] < 100
    for cat, c in step["categories"].items():
        assert b["categories"][cat]["share_of_device_pct"] == pytest.approx(c["share_of_device_pct"])
    # resnet18, batch 32, training, no CUDA graphs: launch-bound, well under half busy
    assert 5 < b["busy_pct"] < 50


def test_a_version_1_record_reads_with_the_unprofiled_busy_figure(h200, tmp_path):
    import gzip
    import json

    from sweeper.record import SCHEMA_VERSION, read_record

    raw = json.loads(gzip.decompress((h200 / "resnet18_result.json.gz").read_bytes()))
    assert raw["schema_version"] == 1
    kernels = tr.device_kernels(tr.load_trace(h200 / "resnet18_step.json.gz"))
    fresh = bd.breakdown(kernels, runs=raw["step"]["runs"], span=bd.profiled_span(kernels, []),
                         wall_ms=raw["step"]["wall_ms"])
    rec = read_record(h200 / "resnet18_result.json.gz")
    assert rec["schema_version"] == SCHEMA_VERSION and rec["upgraded_from_schema"] == 1
    step = rec["step"]
    assert step["busy_pct_profiled_span"] == raw["step"]["busy_pct"]
    # derived from what version 1 kept, it equals the figure computed afresh from the trace
    assert step["busy_pct"] == pytest.approx(fresh["busy_pct"])
    assert step["busy_ms"] == pytest.approx(fresh["busy_ms"])


class _Clock:
    """Seconds that pass only when a round runs: each round below takes one."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _rounds(clock, order, names, fail_at=None):
    def one(name):
        def round_():
            n = sum(1 for o in order if o == name)
            if fail_at == (name, n):
                raise RuntimeError(f"{name} broke")
            order.append(name)
            clock.t += 1.0
            return n
        return round_
    return {name: one(name) for name in names}


def test_module_rounds_are_taken_in_turn_until_the_span_has_passed():
    from tasks.timing import rounds_in_turn

    clock, order = _Clock(), []
    taken, failed = rounds_in_turn(_rounds(clock, order, ["fwd", "bwd"]), min_rounds=2, max_rounds=50,
                                   span_s=6.0, clock=clock)
    # One round of each in turn, so that both modules' rounds spread over the whole span
    assert order == ["fwd", "bwd"] * 3
    assert taken == {"fwd": [0, 1, 2], "bwd": [0, 1, 2]} and failed == {}


def test_module_rounds_keep_their_minimum_past_the_span_and_stop_at_their_maximum():
    from tasks.timing import rounds_in_turn

    clock, order = _Clock(), []
    taken, _ = rounds_in_turn(_rounds(clock, order, ["a", "b"]), min_rounds=4, max_rounds=9, span_s=1.0, clock=clock)
    assert [len(taken["a"]), len(taken["b"])] == [4, 4]  # the span passed after one round
    clock, order = _Clock(), []
    taken, _ = rounds_in_turn(_rounds(clock, order, ["a", "b"]), min_rounds=1, max_rounds=3, span_s=100.0,
                              clock=clock)
    assert [len(taken["a"]), len(taken["b"])] == [3, 3]  # the cap ends it long before the span


def test_a_failing_module_round_stops_that_module_only():
    from tasks.timing import rounds_in_turn

    clock, order = _Clock(), []
    taken, failed = rounds_in_turn(_rounds(clock, order, ["a", "b"], fail_at=("a", 1)), min_rounds=4,
                                   max_rounds=4, span_s=0.0, clock=clock)
    assert list(failed) == ["a"] and str(failed["a"]) == "a broke"
    assert taken == {"a": [0], "b": [0, 1, 2, 3]}


def test_rounds_in_turn_really_spread_over_the_span_on_the_real_clock():
    import time

    from tasks.timing import rounds_in_turn

    stamps = {"x": [], "y": []}
    t0 = time.perf_counter()
    rounds = {k: (lambda k=k: stamps[k].append(time.perf_counter() - t0) or time.sleep(0.01)) for k in stamps}
    taken, _ = rounds_in_turn(rounds, min_rounds=2, max_rounds=1000, span_s=0.3)
    assert time.perf_counter() - t0 >= 0.3
    # each measurement's rounds run from the start of the span to its end, not in one burst
    assert all(v[0] < 0.05 and v[-1] > 0.25 for v in stamps.values())
    assert abs(len(taken["x"]) - len(taken["y"])) <= 1


def test_each_timed_round_comes_with_a_launch_probe_reading_taken_just_before_it(monkeypatch):
    from tasks import timing

    order = []
    real_probe = timing.launch_probe_us

    def probe(device):
        order.append("probe")
        return real_probe(device)

    monkeypatch.setattr(timing, "launch_probe_us", probe)
    results = [timing.probed_round(lambda: order.append("call"), "cpu", 2) for _ in range(4)]
    readings = [r for _, r in results]
    assert order == ["probe", "call", "call"] * 4  # one reading, then that round's 2 calls
    # A real reading of the CPU's dispatch of a tiny op: microseconds, not zero or seconds.
    assert all(0.05 < r < 10_000 for r in readings)


def test_the_steady_loops_stretches_cover_the_whole_loop_so_a_slow_tail_counts(monkeypatch):
    """The steady loop's stretches bracket its mean step, a slow end of the loop included:
    a 1-s loop of 10-ms steps whose last 4 take 30 ms. They fall after the last full
    stretch; before that tail was a stretch of its own, the loop's mean (10.6 ms) stood
    above every stretch's (10 ms), and the spread that compare reads missed the slow end."""
    from types import SimpleNamespace

    from tasks import timing

    clock = [0.0]

    def step():  # a fake clock that only the steps move: the stretches fall the same way every run
        clock[0] += 0.03 if clock[0] >= 0.945 else 0.01  # 3 settling steps, then 1 s from 0.03

    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: clock[0], time=lambda: 1e9 + clock[0]))
    loop = timing.steady_loop(step, seconds=1.0, device="cpu")
    assert loop["steps"] == 91 + 4 and loop["loop_s"] == pytest.approx(1.01)
    assert loop["chunk_step_ms"] == pytest.approx([10.0] * 7 + [25.0])  # the tail: 9 steps of 10 ms, 4 of 30
    assert min(loop["chunk_step_ms"]) <= loop["step_ms"] <= max(loop["chunk_step_ms"])


def test_host_timed_breakdown_is_scaled_to_the_unprofiled_run_and_a_gpu_one_is_not():
    """Two ops of 60 and 40 ms a run, profiled over a 100 ms span, where the unprofiled
    run takes 50 ms: on a CPU (the ops timed on the slowed host) they become 30 and 20 ms;
    on a GPU, kernel times stand as measured; a profiled run faster than the unprofiled one
    changes nothing."""
    from sweeper.analysis.breakdown import breakdown
    from sweeper.analysis.trace import Interval

    ops = [Interval("aten::convolution", "cpu_op", 0.0, 60_000.0), Interval("graph_0_cpp_fused_add_0", "cpu_op", 60_000.0, 40_000.0)]
    cpu = breakdown(ops, runs=1, span=(0.0, 100_000.0), wall_ms=50.0, host_timed=True)
    assert cpu["profiled_scale"] == 0.5 and cpu["device_ms_profiled"] == 100.0
    assert [k["device_ms"] for k in cpu["kernels"]] == [30.0, 20.0] and cpu["device_ms"] == 50.0
    assert sum(k["pct_of_wall"] for k in cpu["kernels"]) == 100.0 and cpu["busy_pct"] == 100.0
    assert sum(c["share_of_device_pct"] for c in cpu["categories"].values()) == 100.0
    kernels = [Interval(k.name, "kernel", k.start_us, k.dur_us) for k in ops]
    gpu = breakdown(kernels, runs=1, span=(0.0, 100_000.0), wall_ms=50.0)
    assert [k["device_ms"] for k in gpu["kernels"]] == [60.0, 40.0] and "profiled_scale" not in gpu
    fast = breakdown(ops, runs=1, span=(0.0, 100_000.0), wall_ms=120.0, host_timed=True)
    assert fast["profiled_scale"] == 1.0 and [k["device_ms"] for k in fast["kernels"]] == [60.0, 40.0]
    # a host ~30x slower profiled (as under load): the scale still gives the times it scaled
    # to its fourth digit (rounded to 4 decimals, 0.0323 put them 0.16% off)
    slow = breakdown(ops, runs=1, span=(0.0, 100_000.0), wall_ms=3.2345, host_timed=True)
    assert slow["device_ms"] == pytest.approx(slow["device_ms_profiled"] * slow["profiled_scale"], rel=1e-3)


def test_one_preempted_call_among_five_does_not_rank_a_kernel_first():
    """On a loaded host one profiled step can be preempted inside an op: five steps of a
    squeeze-excite convolution took 133.25, 0.04, 0.04, 85.88 and 0.04 ms. Its mean (43.85
    ms) would rank it first; its typical step's time is 0.04 ms, and the two steps are
    counted as outliers. The launch ranking of what is left to win uses the typical time."""
    from sweeper.analysis import attribution as at
    from sweeper.analysis import launch_sites as ls
    from sweeper.analysis import node_tags as nt
    from sweeper.analysis import roofline as rl

    se = [133.25, 0.04, 0.04, 85.88, 0.04]
    events, t = [], 0.0
    for run in range(5):  # each step: the squeeze-excite conv, then a 1 ms convolution
        events.append(tr.Interval("aten::convolution", "cpu_op", t, se[run] * 1000))
        t += se[run] * 1000
        events.append(tr.Interval("aten::mkldnn_convolution", "cpu_op", t, 1000.0))
        t += 2000
    ranges = [(0.0, 1.0)]  # not one a run: the runs are told by count
    run_of = tr.run_index(events, 5, ranges)
    assert run_of == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    b = bd.breakdown(events, runs=5, run_of=run_of)
    first, second = b["kernels"]
    assert first["name"] == "aten::mkldnn_convolution" and first["typical_ms"] == pytest.approx(1.0)
    assert second["typical_ms"] == pytest.approx(0.04) and second["outlier_runs"] == 2
    assert second["device_ms"] == pytest.approx(sum(se) / 5)  # the mean stays, beside it
    se_site = ls.Site("extern_kernels.convolution", 1, True, layers=(nt.Layer("blocks.1.se.conv_reduce", "Conv2d", "forward"),),
                      work=nt.Work(76800, 1e4, "float32"))
    conv = ls.Site("extern_kernels.convolution", 2, True, layers=(nt.Layer("conv_head", "Conv2d", "forward"),),
                   work=nt.Work(1e9, 1e6, "float32"))
    placed = at.Placed(runs=5, event_sites=[((se_site, 1.0),), ((conv, 1.0),)] * 5, run_of=run_of)
    rows = rl.launch_rows(events, placed, {}, {"copy_gbps": 10.0, "matmul_tflops": {"float32": 2.0}, "key": {}})
    assert [r["site"] for r in rows] == ["extern_kernels.convolution:2", "extern_kernels.convolution:1"]
    assert rows[1]["typical_ms"] == pytest.approx(0.04) and rows[1]["outlier_runs"] == 2
    assert rows[1]["device_ms"] == pytest.approx(sum(se) / 5)
