"""Change points over the nightly history (sweeper/analysis/changes.py, `python -m
sweeper.history changes`, the report's "What changed over the last N nights", trend's
marks). The nights are tables written as the aggregate writes them, with kernels and noise
from the committed H200 nights (bench/change_detection.py's generator), read by the real
command."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import changes as ch

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    from conftest import change_detection_bench

    return change_detection_bench()


@pytest.fixture(scope="module")
def forty(tmp_path_factory):
    """The issue's case: 40 jobs a night over 12 nights, Triton reductions 4% slower in every
    other job from night08 on (1% kernel noise); and the same nights without it."""
    bench = _bench()
    models = bench.real_models(np.random.default_rng(0))
    root = tmp_path_factory.mktemp("nights")
    with_change = root / "with"
    without = root / "without"
    bench.write_tables(with_change, models, 40, 12, np.random.default_rng(40), ("triton_reduction", 1.04, 8, 20))
    bench.write_tables(without, models, 40, 12, np.random.default_rng(40))
    return with_change, without


def _changes(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeper.history", "changes", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_forty_jobs_the_family_and_its_night_come_first(forty, tmp_path):
    with_change, without = forty
    got = _changes(str(with_change), "--top", "5", "--out", str(tmp_path), "--fail-on-regression")
    assert got.returncode == 1, got.stdout + got.stderr  # a slower change in the last 6 nights
    first = got.stdout.splitlines()[:3]
    assert first[0].startswith("# change points over 12 nights"), got.stdout
    # one cause, one change: the category and its families of one night and the same jobs
    assert first[1].startswith("1 change ("), got.stdout
    assert len(first[2]) <= 200 and first[2].startswith("- night08: Triton reduction kernels slower by"), first[2]
    about, running, touched = map(int, re.search(r"about (\d+) of (\d+) jobs moved \(mixture\), (\d+) significant "
                                                 r"alone", first[2]).groups())
    assert touched >= 8 and running >= about >= touched - 2, first[2]
    assert re.search(r"; \d+ families;", first[2]), first[2]
    # under it, the changes that make it up: the category first, then its families
    under = [ln for ln in got.stdout.splitlines()[3:] if ln.startswith("  - ")]
    assert under[0].startswith("  - Triton reduction (every kernel of the category)"), got.stdout
    assert all("kernel family triton_red_" in ln for ln in under[1:] if "more of this cause" not in ln), under
    # its size: 4% where it happened, the interval holding it
    table = pd.read_csv(tmp_path / "changes.csv")
    top = table.iloc[0]
    assert top["level"] == "category" and top["night"] == "night08", table
    assert top["ci_low_pct"] <= 4.0 <= top["ci_high_pct"] and abs(top["size_pct"] - 4.0) < 1.0, top
    # every change it states is a reduction's (the category, or one of its families), none other
    assert set(table["level"]) <= {"category", "family"}, table[["level", "name"]]
    # the jobs it names are those slowed (every other one), none of the others
    named = [int(j.rsplit("#", 1)[1]) for j in top["jobs"].split("; ")]
    # named: every job significant alone, and those the mixture puts among the moved
    assert len(named) >= touched and abs(len(named) - about) <= 2 and all(j % 2 == 0 for j in named), named
    assert table["night"].eq("night08").all(), table[["level", "name", "night"]]
    # it says how often it flags on nights with no change
    assert "false" in first[1] and ("per 100 nights" in first[1] or "not measured" in first[1]), first[1]


def test_forty_jobs_without_the_change_none(forty):
    _, without = forty
    got = _changes(str(without), "--fail-on-regression")
    assert got.returncode == 0, got.stdout + got.stderr
    assert "0 changes" in got.stdout.splitlines()[1], got.stdout


def test_changes_bad_input(tmp_path, forty):
    got = _changes(str(tmp_path / "nope"))
    assert got.returncode == 2 and "is not a folder" in got.stderr, got.stderr
    got = _changes(str(tmp_path))
    assert got.returncode == 2 and "no complete sweep" in got.stderr, got.stderr
    # too few nights to tell a change: said, not guessed
    few = tmp_path / "few"
    few.mkdir()
    for night in sorted(forty[0].iterdir())[:4]:
        (few / night.name).symlink_to(night)
    got = _changes(str(few))
    assert got.returncode == 0 and "too few complete nights" in got.stdout, got.stdout


def test_report_and_trend_carry_the_history(forty, tmp_path):
    from sweeper.reporting.compare_sections import history_section
    from sweeper.reporting.load import LoadedSweep
    from sweeper.reporting.changes_read import history_changes
    from sweeper.reporting.trend import trend_figure

    with_change, _ = forty
    nights = sorted(p for p in with_change.iterdir() if p.is_dir())
    last = LoadedSweep.__new__(LoadedSweep)
    last.path = nights[-1]
    got, notes = history_changes(last)
    assert got is not None and not notes
    html = "\n".join(history_section(got))
    assert "What changed over the last 12 nights" in html and "Triton reduction" in html and "night08" in html, html
    # the history ends with the sweep reported: an earlier night's report sees no later change
    early = LoadedSweep.__new__(LoadedSweep)
    early.path = nights[8]
    got8, _ = history_changes(early)
    assert got8 is not None and got8.nights[-1] == "night08" and not got8.changes  # one night after: not yet a change
    early.path = nights[4]
    assert history_changes(early)[0] is None  # 5 nights: too few
    _, data = trend_figure(nights, tmp_path / "trend.png")
    marks = data.attrs["change_points"]
    assert marks and marks[0].startswith("change 1: triton_reduction +") and marks[0].endswith("from night08"), marks
    assert (tmp_path / "trend.png").stat().st_size > 10_000


def _series(n: int, at: int | None, size: float, noise: float, rng) -> np.ndarray:
    y = np.exp(rng.normal(0, noise, n))
    if at is not None:
        y[at:] *= 1 + size
    return 10 * y


def test_one_job_step_found_at_its_night_and_not_without():
    rng = np.random.default_rng(1)
    found = ch.decide(ch.job_candidates("step", "j", _series(30, 20, 0.05, 0.01, rng)))
    assert [c.night for c in found] == [20], found
    assert abs(found[0].size_pct - 5) < 1.5 and found[0].p_value < 0.01, found[0]
    assert found[0].ci_pct[0] < 5 < found[0].ci_pct[1], found[0]
    # no change: over 200 series, a candidate that survives the multiple-test price is rare
    kept = [c for _ in range(200) for c in ch.job_candidates("step", "j", _series(30, None, 0, 0.01, rng))]
    assert sum(c.p < 0.01 for c in kept) <= 2, [c.p for c in kept if c.p < 0.01]


def test_family_pooled_finds_what_no_job_shows():
    """1.5% slower in 25 of 60 jobs with 1% noise: no job's own series passes, the family's does."""
    rng = np.random.default_rng(2)
    m = np.vstack([_series(30, 18 if j < 25 else None, 0.015, 0.01, rng) for j in range(60)])
    jobs = [f"j{j}" for j in range(60)]
    alone = ch.decide([c for j in range(60) for c in ch.job_candidates("kernels", jobs[j], m[j])])
    pooled = ch.decide(ch.pooled_candidates("family", "triton_red_fused_x", m, jobs))
    assert not [c for c in alone if c.night == 18], alone
    assert [c.night for c in pooled] == [18], pooled
    assert 0.8 < pooled[0].size_pct < 2.2 and pooled[0].ci_pct[0] < 1.5 < pooled[0].ci_pct[1], pooled[0]
    # the jobs named: by the mixture, mostly those moved (a 1.5% change under 1% noise leaves some doubt)
    named = set(pooled[0].jobs)
    assert len(named & set(jobs[:25])) >= 0.9 * len(named) and len(named & set(jobs[:25])) >= 15, sorted(named)
    assert pooled[0].significant >= ch.MIN_TOUCHED


def test_noise_is_robust_to_the_step_it_holds():
    rng = np.random.default_rng(3)
    y = np.log(_series(30, 15, 0.3, 0.01, rng))  # a 30% step in 1% noise
    assert 0.006 < ch.noise_of(y) < 0.016
    assert ch.noise_of(np.log(np.full(10, 5.0))) == ch.MIN_NOISE


def test_benjamini_hochberg_against_scipy():
    from scipy.stats import false_discovery_control

    p = np.array([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216])
    assert np.allclose(ch.benjamini_hochberg(p), false_discovery_control(p))
    # by hand: the smallest, 0.001 x 10 / 1 = 0.01; the second 0.008 x 10 / 2 = 0.04
    assert ch.benjamini_hochberg(p)[:2] == pytest.approx([0.01, 0.04])


def test_family_names_and_accuracy():
    assert ch.family_of("triton_red_fused_native_batch_norm_backward_12") == \
        "triton_red_fused_native_batch_norm_backward"
    assert ch.family_of("graph_0_cpp_fused_add_3") == "cpp_fused_add"
    assert ch.family_of("sm90_xmma_gemm_f16f16_f32_tn_n") == "sm90_xmma_gemm_f16f16_f32_tn_n"
    h = ch.History([f"n{i}" for i in range(8)], ["k"], {"k": "resnet18"},
                   accuracy={"k": ["passed"] * 5 + ["failed"] * 3},
                   versions=[{"torch": "2.10"}] * 5 + [{"torch": "2.11"}] * 3)
    got = ch.find_changes(h)
    assert [(c.level, c.night) for c in got] == [("accuracy", 5)]
    assert ch.versions_between(h, 5) == {"torch": ("2.10", "2.11")}


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    """40 jobs over 12 nights with the noise real nights have and no change: night06 a
    neighbour's (every job 8% slower, the GPU's clock 10% lower), and every fourth job's
    costliest Triton reduction family 30% slower on a third of the nights (its other config)."""
    bench = _bench()
    models = bench.real_models(np.random.default_rng(0))
    root = tmp_path_factory.mktemp("noisy")
    bench.write_tables(root, models, 40, 12, np.random.default_rng(41), slow_night=(6, 1.08), two_config=0.3)
    return root


def test_a_neighbour_night_is_the_machine_and_flags_nothing(noisy):
    got = _changes(str(noisy), "--fail-on-regression")
    assert got.returncode == 0, got.stdout + got.stderr
    lines = got.stdout.splitlines()
    assert lines[1].startswith("0 changes"), got.stdout
    machine = [ln for ln in lines if ln.startswith("- night06: every job's kernels")]
    assert len(machine) == 1, got.stdout
    size = float(re.search(r"kernels (\d+\.\d)% slower", machine[0]).group(1))
    assert 6.5 < size < 9.5 and "the machine, not the kernels" in machine[0], machine[0]
    assert "SM clock 1800 MHz against 1980" in machine[0], machine[0]  # the records say why
    # no other night is the machine's
    assert sum("the machine, not the kernels" in ln for ln in lines) == 1, got.stdout
    # the two-config families are said, judged in their own level
    assert any("ran in two configs" in ln for ln in lines), got.stdout


def test_clean_takes_out_the_machine_night_and_two_configs():
    """night_noise.clean on arrays: a neighbour's night (every job 8% slower) divided out of
    every job; a family flipping between two configs judged in its own level, and its job's
    kernel time with it; a step that stays is left for the tests."""
    from sweeper.analysis import night_noise

    rng = np.random.default_rng(3)
    jobs = [f"j{j}" for j in range(30)]
    m = np.vstack([_series(20, None, 0.0, 0.01, rng) for _ in jobs])
    m[:, 10] *= 1.08  # a neighbour's night
    h = ch.History([f"n{t:02d}" for t in range(20)], jobs, {j: j for j in jobs})
    for j, row in zip(jobs, m):
        h.per_job[("kernels", j)] = row
    flips = np.vstack([_series(20, None, 0.0, 0.01, rng) for _ in range(6)])
    flips[:, [3, 4, 8, 9, 10, 14, 15, 16]] *= 1.3
    h.pooled[("family", "triton_red_fused_x")] = (jobs[:6], flips)
    cleaned, what = night_noise.clean(h)
    assert [x.night for x in what.machine] == [10] and 7 < what.machine[0].size_pct < 9, what.machine
    assert len(what.two_configs) == 6, what.two_configs
    assert np.allclose(cleaned.per_job[("kernels", "j10")][10] / h.per_job[("kernels", "j10")][10],
                       1 / 1.08, rtol=0.02)
    # the flipping family's job: its kernel time less the slower config's excess
    flipped = h.pooled[("family", "triton_red_fused_x")][1][0]
    excess = flipped[3] - cleaned.pooled[("family", "triton_red_fused_x")][1][0][3]
    assert excess > 0.2 * flipped[3] / 1.3
    assert np.isclose(h.per_job[("kernels", "j0")][3] - cleaned.per_job[("kernels", "j0")][3], excess)
    assert ch.find_changes(h) == []
    # one switch that stays is not two configs: it is a change, and found
    step = np.vstack([_series(20, 12, 0.3, 0.01, rng) for _ in range(6)])
    assert all(night_noise.two_levels(np.log(row)) is None for row in step)


def test_a_drift_is_one_line_and_an_episode_no_change():
    """+0.3% a night over 30 nights in 40 jobs: one drift of the family, not a step at every
    few nights; one job's 6-night bump of its step that comes back: no slower and faster pair."""
    from sweeper.reporting.changes_read import Changes
    from sweeper.reporting.changes_text import changes_text

    rng = np.random.default_rng(5)
    n, jobs = 30, [f"j{j}" for j in range(40)]
    trend = np.exp(0.003 * np.arange(n))
    m = np.vstack([_series(n, None, 0.0, 0.005, rng) * trend for _ in jobs])
    h = ch.History([f"n{t:02d}" for t in range(n)], jobs, {j: j for j in jobs})
    h.pooled[("family", "triton_red_fused_x")] = (jobs, m)
    bump = _series(n, None, 0.0, 0.01, rng)
    bump[12:18] *= 1.06
    h.per_job[("step", "j0")] = bump
    found = ch.find_changes(h)
    drifts = [c for c in found if c.drift_pct == c.drift_pct]
    assert len(drifts) == 1 and drifts[0].level == "family" and 0.2 < drifts[0].drift_pct < 0.4, found
    assert not [c for c in found if c.level == "step"], found
    assert len(h.cleaned.episodes) == 1, h.cleaned.episodes
    text = changes_text(Changes(h.nights, [Path("/x") / t for t in h.nights], h, found))
    assert "drifts +0.3" in text and "a trend, not a step" in text, text
    assert "an episode that passed, not a change" in text, text


def test_the_first_screen_says_a_machine_night_first(tmp_path):
    """A history whose last night is a neighbour's: the report's change points say that night
    the machine's, and the compare's flags under them are told so (compare_sections)."""
    from sweeper.reporting.changes_read import changes_of
    from sweeper.reporting.compare_sections import _machine_tonight, history_section

    bench = _bench()
    models = bench.real_models(np.random.default_rng(0))
    nights = bench.write_tables(tmp_path, models, 40, 10, np.random.default_rng(7), slow_night=(9, 1.08))
    got = changes_of(nights)
    assert not got.changes, [c.name for c in got.changes]
    html = "\n".join(history_section(got))
    said = re.search(r"night09: every job&#x27;s kernels (\d+\.\d)% slower", html)
    assert said and 7.0 < float(said.group(1)) < 9.0, html
    assert "the last night" in html, html
    tonight = _machine_tonight(got)
    assert tonight is not None and tonight.night == 9 and 6.5 < tonight.size_pct < 9.5


def _change(level, name, night, size, jobs, running=40):
    return ch.Change(level, name, night, size, (size - 0.5, size + 0.5), 1e-9, tuple(jobs), running, "test",
                     q_value=1e-8, moved_share=len(jobs) / running, significant=len(jobs))


def test_a_diluted_category_yields_its_cause_to_the_family():
    """The category line (+0.5%, diluted over every reduction) sat above the family line
    (+3.9%): the cause is said by the family that moved; an undiluted category still leads."""
    from sweeper.analysis.causes import group

    jobs = [f"j{i}" for i in range(20)]
    diluted = group([_change("category", "triton_reduction", 8, 0.5, jobs),
                     _change("family", "triton_red_fused_x", 8, 3.9, jobs[:12]),
                     _change("kernels", "j3", 8, 1.0, ["j3"])])
    assert len(diluted) == 1 and diluted[0].lead.name == "triton_red_fused_x", diluted
    assert [c.level for c in diluted[0].changes] == ["family", "category", "kernels"]
    whole = group([_change("category", "triton_reduction", 8, 3.0, jobs), _change("family", "triton_red_fused_x", 8, 3.9, jobs[:12])])
    assert whole[0].lead.level == "category"
    # another night, or other jobs: another cause
    apart = group([_change("family", "a", 8, 3.0, jobs[:5]), _change("family", "b", 12, 3.0, jobs[:5]),
                   _change("family", "c", 8, 3.0, jobs[10:15]), _change("compile", "j18", 8, 30.0, ["j18"]),
                   _change("compile", "j19", 8, 25.0, ["j19"])])
    assert sorted(len(k.changes) for k in apart) == [1, 1, 1, 2], apart  # the two compile changes: one cause


def test_versions_cover_a_night_off_and_the_rate_names_its_histories():
    """A torch upgrade at night 10 read on a change located at night 11 said "no version
    changed"; the versions listed now cover the night before and after. And the A/A rate
    names the size and the noise of the histories it was measured on, and this history's size."""
    from sweeper.reporting.change_rates import false_rate_line
    from sweeper.reporting.changes_read import Changes
    from sweeper.reporting.changes_text import change_line

    h = ch.History([f"n{t:02d}" for t in range(14)], ["j0"], {"j0": "j0"})
    h.versions = [{"torch": "2.10.0"}] * 10 + [{"torch": "2.11.0"}] * 4
    got = Changes(h.nights, [Path("/x") / t for t in h.nights], h, [])
    for night in (9, 10, 11):
        line = change_line(_change("family", "triton_red_fused_x", night, 3.0, ["j0"]), got)
        assert "torch 2.10.0 -> 2.11.0" in line, (night, line)
    assert "no version changed" in change_line(_change("family", "f", 5, 3.0, ["j0"]), got)
    rate = false_rate_line(1000)
    assert re.search(r"[\d.]+ false flags per 100 nights on A/A histories of 30 nights x 200 jobs with real nights' "
                     r"noise \(1-3% jitter", rate) and rate.endswith("this history has 1000 jobs"), rate
