"""Repeats of one configuration (seed=0,1) as one side of a pair (sweeper/analysis/repeats.py,
reporting/pairs.py): one verdict, one regret table and one advice a pair of settings, from the
repeats' medians held against their spread; and the regret table's benchmark-only wins from the
decisions' modules (autotune_regret.alone_by_site). Read on two H100 runs of resnet50 b64
inference, autotune on and off, each twice (tests/fixtures/h100/autotune_aa*)."""

from __future__ import annotations

import pytest

from conftest import FIXTURES, sweep_from_fixture
from sweeper.analysis import autotune_advice as aa
from sweeper.analysis import autotune_regret as ar
from sweeper.analysis.repeats import figure_spread, merged, spread_pct, widest
from sweeper.reporting.autotune_advice import advice_findings
from sweeper.reporting.autotune_decisions import decided
from sweeper.reporting.autotune_regret import regret_findings, regret_table
from sweeper.reporting.kernel_findings import autotune
from sweeper.reporting.load import read_sweep
from sweeper.reporting.pairs import one_key_pairs

AA, AA_SITES = FIXTURES / "h100" / "autotune_aa", FIXTURES / "h100" / "autotune_aa_sites"


def _sweep(src, tmp_path):
    return read_sweep(sweep_from_fixture(src, tmp_path / src.name))


def test_merged_takes_medians_cold_compiles_and_spreads():
    rows = [{"job": 4, "label": "net autotune #4", "key": "k", "autotune": True, "device_ms": 10.0,
             "steady_step_ms": 12.0, "compile_s": 300.0, "compile_state": "cold", "template_tuning_s": 200.0,
             "share_triton_template": 50.0, "share_library_mm_conv": 50.0, "gpu": "H100"},
            {"job": 5, "label": "net autotune #5", "key": "k", "autotune": True, "device_ms": 11.0,
             "steady_step_ms": 12.6, "compile_s": 20.0, "compile_state": "seeded", "template_tuning_s": 0.0,
             "share_triton_template": 60.0, "share_library_mm_conv": 40.0, "gpu": "H100"},
            {"job": 6, "label": "net autotune #6", "key": "k", "autotune": True, "device_ms": 12.0,
             "steady_step_ms": 13.2, "compile_s": 22.0, "compile_state": "seeded", "template_tuning_s": 0.0,
             "share_triton_template": 50.0, "share_library_mm_conv": 50.0, "gpu": "H100"}]
    m = merged(rows)
    assert m["label"] == "net autotune (#4, #5 and #6)" and m["repeat_jobs"] == [4, 5, 6] and m["job"] == 4
    assert m["device_ms"] == 11.0 and m["steady_step_ms"] == pytest.approx(12.6)
    # a seeded repeat skipped the tuning: the compile is the cold one's, and the state says so
    assert m["compile_s"] == 300.0 and m["template_tuning_s"] == 200.0 and m["compile_state"] == "cold"
    assert m["autotune"] is True and m["gpu"] == "H100"  # flags and names stay as they are
    assert m["device_ms_spread_pct"] == pytest.approx(2 / 11 * 100)
    # shares are those of the median milliseconds: templates 5.0, 6.6, 6.0 ms -> 6.0 of 11.0
    assert m["share_triton_template"] == pytest.approx(6.0 / 11.0 * 100)
    assert merged(rows[:1])["label"] == "net autotune #4" and "device_ms_spread_pct" not in merged(rows[:1])
    assert spread_pct([1.0]) is None and spread_pct([None, 2.0, 2.2]) == pytest.approx(0.2 / 2.1 * 100)
    assert widest(5.0, None, 8.1) == 8.1 and widest(5.0, 0.3) == 5.0
    # the templates part is templates and library calls: all of device_ms here (10, 11, 12 ms)
    assert figure_spread(rows, lambda r: aa.part_ms(r, aa.TEMPLATES)) == pytest.approx(2.0 / 11.0 * 100)
    with pytest.raises(ValueError):
        merged([])


def test_repeats_are_one_side_of_one_pair_on_an_h100(tmp_path):
    """Each repeat paired with each other side's repeat said four verdicts and two contradicting advices
    on one page ("turn on the kernel configs" for #2 against #0, "leave it off" for #3 against #1): the
    off repeats' Triton kernels were 1.627 and 1.568 ms, 3.7% apart. As one pair: one of each, from the
    medians."""
    sweep = _sweep(AA, tmp_path)
    jobs = sweep.jobs
    (p,) = [p for p in one_key_pairs(jobs) if p.key == "autotune"]
    assert p.a_jobs == [2, 3] and p.b_jobs == [0, 1] and p.repeated
    # what pairing job with job said: the kernel configs gain beyond noise in one pair and not in the other
    row = {int(r["job"]): r.to_dict() for _, r in jobs.iterrows()}
    words = {(o, n): {r.part.name: r.word for r in aa.parts(row[o], row[n])} for o, n in ((2, 0), (3, 1))}
    assert words[(2, 0)]["kernel configs"] == aa.GAINS and words[(3, 1)]["kernel configs"] == aa.WITHIN

    (v,) = autotune(jobs, sweep.kernels)
    assert v.scope == "resnet50 b64 infer fp16 (#2 and #3)"
    assert "the kernels' time a step goes from 3.14 ms to 3.27 ms: within noise (+4.0%, noise ±5.0%)" in v.text
    # the cold autotune=on repeat's compile, not the seeded one's (306.5 and 22.5 s), against the off median
    assert "Its compile took 290 s longer for no change that can be told from noise." in v.text
    (a,) = advice_findings(jobs)
    assert "Leave it off: no part of it made its kernels faster beyond noise, and it adds 290 s of compile." in a.text
    assert "kernel configs: Inductor's own Triton kernels (pointwise, reduction) 1.60 ms -> 1.52 ms, within noise" \
        in a.text

    table = regret_table(jobs, sweep.model_modules, sweep.decisions)
    assert set(table["job_off"]) == {2} and set(table["job_on"]) == {0}  # one pair's rows
    # layer2.0 moved 8.1% between the two off runs: its noise is that, not the 5% floor
    l20 = table[table["layer"] == "layer2.0"].iloc[0]
    assert l20["repeat_spread_pct"] == pytest.approx(8.07, abs=0.05) and l20["noise_pct"] == l20["repeat_spread_pct"]
    assert l20["off_ms"] == pytest.approx(0.217, abs=5e-4) and l20["verdict"] == ar.SLOWER
    (f,) = regret_findings(jobs, sweep.model_modules, table)
    assert f.text.startswith("Where max-autotune loses in resnet50 b64 infer fp16 (#2 and #3): 7 layers take 0.226 ms")

    # the seeded repeat has the decisions behind its choices, from the store: on a GPU
    by_job = sweep.decisions.groupby("job")["timed"].agg(set).to_dict()
    assert by_job == {0: {"here"}, 1: {"store"}}
    texts = {f.scope: f.text for f in decided(jobs, sweep.decisions)}
    assert "24 of them by an earlier job's timings from the autotune store" in texts["resnet50 b64 infer fp16 autotune #1"]


def test_the_decisions_modules_name_the_benchmark_only_wins_on_an_h100(tmp_path):
    """Both autotune=on jobs seeded; each decision names the modules its op was lowered for. Every layer
    max-autotune made slower is one where its own benchmarks had the chosen templates faster than cuDNN,
    each alone (the main loop without the epilogue it then fused)."""
    sweep = _sweep(AA_SITES, tmp_path)
    sites = sweep.decisions[sweep.decisions["job"] == 0]["sites"]
    assert sites.notna().all() and "layer1.0.conv2 (forward); layer1.1.conv2 (forward); layer1.2.conv2 (forward)" \
        in set(sites)
    table = regret_table(sweep.jobs, sweep.model_modules, sweep.decisions)
    slower = table[table["verdict"] == ar.SLOWER]
    assert len(slower) == 7 and (slower["alone_word"] == ar.BENCHMARK_ONLY).all()
    l30 = slower[slower["layer"] == "layer3.0"].iloc[0]
    assert (l30["alone_chosen_ms"], l30["alone_library_ms"]) == pytest.approx((0.100, 0.168), abs=5e-4)
    assert table[table["verdict"] == ar.FASTER]["alone_word"].isna().all()
    (f,) = regret_findings(sweep.jobs, sweep.model_modules, table)
    assert "7 of the 7 won only in max-autotune's own benchmarks: it timed their choices 0.291 ms faster " \
           "than the library calls, each alone; in the model they took 0.257 ms longer" in f.text
    assert f.figures["benchmark_only_sites"] == 7
    # both on jobs seeded: compile seconds said as a seeded compile's, no payback from them
    (a,) = advice_findings(sweep.jobs)
    assert "paid back" not in a.text and "not a cold one's" in a.text


def test_a_site_of_the_decisions_and_its_word():
    decisions = [{"winner_ms": 0.03, "library_ms": 0.05, "winner_kind": "template",
                  "sites": "l1.0.conv2 (forward); l1.1.conv2 (forward)"},
                 {"winner_ms": 0.02, "library_ms": 0.02, "winner_kind": "library", "sites": "l1.0.conv3 (forward)"},
                 {"winner_ms": 0.01, "library_ms": None, "winner_kind": "template", "sites": "l1.0.conv1 (forward)"},
                 {"winner_ms": 0.04, "library_ms": 0.03, "winner_kind": "template", "sites": "fc (forward)"},
                 {"winner_ms": 0.04, "library_ms": 0.03, "winner_kind": "template", "sites": None}]
    got = ar.alone_by_site(decisions)
    assert got[("l1.0", "forward")] == pytest.approx({"chosen_ms": 0.05, "library_ms": 0.07, "ops": 2, "templates": 1})
    assert got[("l1.1", "forward")]["ops"] == 1 and got[("(model)", "forward")]["chosen_ms"] == 0.04
    slower, faster = {"verdict": ar.SLOWER}, {"verdict": ar.FASTER}
    assert ar.alone_word(slower, got[("l1.0", "forward")]) == ar.BENCHMARK_ONLY
    assert ar.alone_word(faster, got[("l1.0", "forward")]) is None
    assert ar.alone_word(slower, got[("(model)", "forward")]) is None  # its template lost alone too
    assert ar.alone_word(slower, None) is None


def test_no_payback_from_a_seeded_compile():
    off = {"device_ms": 10.0, "share_triton_pointwise": 50.0, "share_library_mm_conv": 50.0, "compile_s": 10.0,
           "coordinate_descent_s": 0.0, "kernel_autotuning_s": 0.0, "template_tuning_s": 0.0}
    on = {"device_ms": 9.0, "share_triton_pointwise": 44.0, "share_library_mm_conv": 56.0, "compile_s": 15.0,
          "coordinate_descent_s": 4.0, "kernel_autotuning_s": 0.0, "template_tuning_s": 1.0}
    cold = aa.advise(off, {**on, "compile_state": "cold"})
    seeded = aa.advise(off, {**on, "compile_state": "seeded"})
    assert cold.payback_steps == pytest.approx(4.0 * 1000 / (5.0 - 9.0 * 0.44))
    assert seeded.payback_steps is None and seeded.settings == cold.settings and seeded.compile_s == 4.0
