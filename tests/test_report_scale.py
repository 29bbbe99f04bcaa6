"""The report, the compare and the trend of a nightly of 200 jobs: synthetic sweeps made
from the committed H200 records (tests/synthetic_sweeps.py: the 18 real jobs copied, each
copy's model renamed), two nights, the second with three jobs made slower. Real
aggregation, real `history compare`, real Chromium for the page's layout."""

import os
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from conftest import chromium
from synthetic_sweeps import real_records, write_sweep
from sweeper.aggregate import aggregate
from sweeper.reporting import figures as fg
from sweeper.reporting import sweeps as sw
from sweeper.reporting.load import read_sweep
from sweeper.reporting.overview import SMALL_SWEEP_JOBS, family, left_to_win, overview

N = 200
SLOWER = {1: 1.3, 7: 1.25, N - 3: 1.4}  # job -> factor, in the second night


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    root = tmp_path_factory.mktemp("nightly")
    records = real_records()
    start = datetime(2026, 12, 1, 2, 0, 0)
    first = write_sweep(root / "night1", N, start, None, records)
    second = write_sweep(root / "night2", N, start + timedelta(days=1), SLOWER, records)
    aggregate(first)
    fg.GEOMETRY.clear()
    report = aggregate(second)
    return first, second, report, dict(fg.GEOMETRY)


def _between(page: str, start: str, end: str) -> str:
    return page[page.index(start):page.index(end, page.index(start))]


def test_the_first_screen_answers_for_the_sweep_before_any_job(nights):
    _, second, report, _ = nights
    page = report.read_text()
    sweep = _between(page, "<ul class='findings sweep'>", "</ul>")
    said = re.findall(r"<li data-rule='([^']+)'>", sweep)
    assert 5 <= len(said) <= 15, said  # a screenful, not one a job
    assert said[:3] == ["sweep_time", "sweep_families", "sweep_variants"]
    assert f"Over its {N} finished jobs, one step each, the sweep spends" in sweep
    assert "By model family: mixnet" in sweep and "densenet" in sweep
    assert re.search(r"Launch-bound: \d+ of the jobs; most: densenet121", sweep)
    # what changed comes first, the flagged jobs by name; the per-job findings only in the job sections
    assert page.index("id='changed'") < page.index("<ul class='findings sweep'>") < page.index("id='summary'")
    assert page.index("id='summary'") < page.index("<ul class='findings job'>")
    assert "3 of " in _between(page, "id='changed'", "</p>") and "mixnet_l b128 train fp16" in page
    # every job has its section, reachable from its row of the jobs table
    for job in (0, 57, N - 1):
        assert f"<details class='job' id='details-{job}'>" in page and f"href='#details-{job}'" in page
    assert len(re.findall(r"<details class='job' id='details-\d+'>", page)) == N
    # the rankings say their rule, and name the costliest jobs and kernels
    assert "Ranked by GPU time a step" in page and "<table id='top-jobs'>" in page
    assert len(re.findall(r"<tr><td><a href='#details-", _between(page, "<table id='top-jobs'>", "</table>"))) == 10


def test_a_small_sweep_reads_as_before():
    """The 4-job command's page keeps its findings list first, every job's findings in it."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        report = aggregate(write_sweep(Path(tmp) / "four", 4))
        page = report.read_text()
    assert 4 <= SMALL_SWEEP_JOBS
    assert "The sweep at a glance" not in page and "<ul class='findings'>" in page
    assert page.index("id='findings'") < page.index("id='summary'") < page.index("id='figures'")
    assert page.count("data:image/png;base64,") == 7


def test_every_figure_is_readable_at_the_width_the_report_shows_it(nights):
    _, second, report, geometry = nights
    drawn = {Path(p).stem: g for p, g in geometry.items()}
    assert set(drawn) == {"shares", "busy", "pairs", "categories", "autotune", "roofline", "compile"}
    for name, (width, text_px) in drawn.items():
        assert text_px >= fg.MIN_TEXT_PX, (name, width, text_px)
    from PIL import Image

    for png in (second / "figures").glob("*.png"):
        w, h = Image.open(png).size
        assert h <= 2200, (png.name, w, h)  # no strip of 200 bars: grouped or ranked
    page = report.read_text()
    assert page.count("data:image/png;base64,") == 7  # 200 jobs: still one self-contained page
    assert report.stat().st_size <= 5_000_000


def test_the_report_lays_out_its_first_screen_in_a_browser(nights):
    _, _, report, _ = nights
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                           "--virtual-time-budget=15000", "--dump-dom", report.as_uri()],
                          capture_output=True, text=True, timeout=300)
    dom = proc.stdout
    height = int(re.search(r'data-sweep-findings-height="(\d+)"', dom).group(1))
    sections = int(re.search(r'data-job-sections-y="(-?\d+)"', dom).group(1))
    page = int(re.search(r'data-page-height="(\d+)"', dom).group(1))
    assert 0 < height <= 1000, height  # the sweep's answers fit a screen at 1400 px
    assert sections > 2000  # each job's findings come after the overview, the jobs table and the figures
    assert page - sections < 40 * N  # each job's section folded to a line
    assert 'data-figures-rendered="7"' in dom
    # a link to a job's section opens it
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                           "--virtual-time-budget=15000", "--dump-dom", report.as_uri() + "#details-57"],
                          capture_output=True, text=True, timeout=300)
    assert '<details class="job" id="details-57" open="">' in proc.stdout
    assert '<details class="job" id="details-58">' in proc.stdout


def test_compare_says_the_verdict_and_the_flagged_jobs_before_its_table(nights):
    first, second, _, _ = nights
    proc = subprocess.run([sys.executable, "-m", "sweeper.history", "compare", str(second), "--fail-on-regression"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    verdict = next(i for i, x in enumerate(lines) if " jobs flagged (" in x)
    flagged = [i for i, x in enumerate(lines) if x.startswith("- ")]
    table = lines.index("## Every job")
    assert verdict < 5 and len(flagged) == 3 and max(flagged) < table
    assert lines[verdict].startswith("3 of ")
    assert "- mixnet_l b128 train fp16 #1: slower (kernel time)" in proc.stdout or "slower (kernel time)" in lines[flagged[0]]
    kernels = [i for i, x in enumerate(lines) if x.startswith("### ")]
    assert len(kernels) == 3 and max(kernels) < table  # the flagged jobs' kernels only, before the table


def test_earlier_sweeps_are_read_from_their_tables_while_they_are_current(nights, tmp_path):
    first, _, _, _ = nights
    start = time.perf_counter()
    t = sw.sweep_tables(first)
    assert t.source == "tables" and len(t.jobs) == N and set(t.kernels["scope"]) == {"step"}
    assert time.perf_counter() - start < 5
    from_records = read_sweep(first)
    step = from_records.kernels[from_records.kernels["scope"] == "step"].reset_index(drop=True)
    pd.testing.assert_frame_equal(t.kernels.reset_index(drop=True), step[t.kernels.columns], check_dtype=False)
    # a record newer than the tables (a resumed job): the records decide
    import shutil

    copy = tmp_path / "night1"
    shutil.copytree(first, copy)
    future = time.time() + 60
    os.utime(copy / "5" / "result.json", (future, future))
    assert sw.sweep_tables(copy).source == "records"
    (copy / "tables" / "jobs.parquet").write_bytes(b"not parquet")  # unreadable tables: the records decide
    assert sw.sweep_tables(copy).source == "records"


def test_the_overview_adds_up_the_sweep():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        s = read_sweep(write_sweep(Path(tmp) / "s", 36))
    o = overview(s.jobs, s.cats, s.kernels, s.bench, "GPU")
    ok = s.jobs[s.jobs["status"] == "ok"]
    assert o.device_ms == pytest.approx(ok["device_ms"].sum())
    assert o.by_category["share_pct"].sum() == pytest.approx(100, abs=0.01)
    assert o.by_family["jobs"].sum() == len(ok) and o.by_family["share_pct"].sum() == pytest.approx(100)
    assert set(o.by_family["family"]) == {"mixnet", "densenet", "resnet", "convnext", "vit"}
    assert list(o.top_jobs["device_ms"]) == sorted(ok["device_ms"], reverse=True)[:10]
    assert (o.top_kernels["device_ms"].diff().dropna() <= 0).all()
    assert family("densenet121_v3") == "densenet" and family("vit_base_patch16_224") == "vit"
    # left to win: a benchmarked kernel's time above its bandwidth bound, never more than its time
    left = left_to_win(s.bench).merge(s.bench[["job", "kernel", "step_ms"]], on=["job", "kernel"])
    assert len(left) and (left["left_ms"] >= 0).all() and (left["left_ms"] <= left["step_ms"]).all()
    k = left.iloc[0]
    assert k["left_ms"] == pytest.approx(k["step_ms"] * (1 - min(k["pct_of_peak"], 100) / 100))
    assert o.left_ms == pytest.approx(left["left_ms"].sum())


def test_one_key_pairs_finds_what_comparing_every_two_jobs_finds():
    """The grouped search against the brute force it replaced, on a 60-job sweep: pairs of configurations,
    each standing as its first job (its repeats, seeds, are one side of the pair)."""
    import tempfile

    from sweeper.reporting.pairs import PAIR_KEYS, one_key_pairs
    from sweeper.reporting.tables import key_fields

    with tempfile.TemporaryDirectory() as tmp:
        jobs = read_sweep(write_sweep(Path(tmp) / "s", 60)).jobs
    ok = jobs[jobs["status"] == "ok"].sort_values("job")
    firsts = ok.drop_duplicates("key")
    assert len(firsts) < len(ok)  # the sweep repeats configurations
    rows = [(r, key_fields(r["key"])) for _, r in firsts.iterrows()]
    brute = []
    for i, (ra, pa) in enumerate(rows):
        for rb, pb in rows[i + 1:]:
            differ = {k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k)}
            if "amp" in differ:
                differ.discard("amp_dtype")
            if len(differ) == 1 and (key := differ.pop()) in PAIR_KEYS:
                brute.append((key, {ra["job"], rb["job"]}))
    pairs = one_key_pairs(jobs)
    found = [(p.key, {p.a["job"], p.b["job"]}) for p in pairs]
    assert found == brute and len(found) > 10
    repeats = ok.groupby("key")["job"].agg(list).to_dict()
    assert all(p.a_jobs == repeats[p.a["key"]] and p.b_jobs == repeats[p.b["key"]] for p in pairs)


def test_the_trend_of_many_jobs_draws_the_flagged_ones_and_a_band(nights, tmp_path):
    from sweeper.reporting.trend import TREND_LINES, last_flagged, most_changed, trend_data, trend_figure

    first, second, _, _ = nights
    data = trend_data([first, second])
    assert not data.duplicated(["sweep", "key"]).any()  # one point a job and sweep (seeds stand as one)
    assert not data["label"].str.contains(r" #\d+$").any()
    flagged = last_flagged([first, second], data)
    assert len(flagged) == 3 and any(lab.startswith("mixnet_l b128 train fp16") for lab in flagged)
    moved = most_changed(data, TREND_LINES)
    assert set(flagged) <= set(moved) and len(moved) == 3  # the others stayed within 2%: in the band
    path, _ = trend_figure([first, second], tmp_path / "trend.png")
    assert path.exists()
