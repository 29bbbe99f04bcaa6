"""The aggregator on a whole real GPU sweep: the example grid as it ran on two H200s
(`python -m sweeper +sweep=example`, bench/results/busy/), its six records and summary
committed under tests/fixtures/h200/example. Re-aggregated here, as
`python -m sweeper.aggregate` does over an existing sweep folder."""

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from sweeper.aggregate import aggregate

FIX = Path(__file__).parent / "fixtures" / "h200" / "example"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    sweep = tmp_path_factory.mktemp("gpu") / "example"
    summary = json.loads(gzip.decompress((FIX / "summary.json.gz").read_bytes()))
    records = {}
    for n in range(6):
        rec = json.loads(gzip.decompress((FIX / f"{n}.result.json.gz").read_bytes()))
        (sweep / str(n)).mkdir(parents=True)
        (sweep / str(n) / "result.json").write_text(json.dumps(rec))
        records[n] = rec
    (sweep / "summary.json").write_text(json.dumps(summary))
    return sweep, records, aggregate(sweep)


def test_microbench_table_holds_every_benchmarked_kernel(example):
    sweep, records, _ = example
    bench = pd.read_parquet(sweep / "tables" / "microbench.parquet")
    for n, rec in records.items():
        rows = rec["kernel_table"]["rows"]
        mine = bench[bench["job"] == n]
        assert len(mine) == len(rows) > 0
        first = mine.iloc[0]
        assert first["kernel"] == rows[0]["name"] and first["standalone_ms"] == pytest.approx(rows[0]["standalone_ms"])
        assert first["pct_of_peak_bandwidth"] == pytest.approx(rows[0]["pct_of_peak_bandwidth"])
    # mixnet_l, training, batch 128: the selection covers 80% of the step's Triton time
    mixnet = bench[bench["job"] == 2]
    assert mixnet["share_of_triton_pct"].sum() >= 80.0


def test_roofline_and_headroom_are_drawn_from_the_microbenchmarks(example):
    from sweeper.reporting.sweep_figures import all_figures
    from sweeper.reporting import tables

    sweep, records, _ = example
    recs = [dict(records[n], job=dict(records[n]["job"], id=str(n))) for n in sorted(records)]
    jobs, cats, bench = tables.jobs_table(recs), tables.categories_table(recs), tables.microbench_table(recs)
    figs = {f.name: f for f in all_figures(jobs, cats, bench, sweep / "figures-check")}
    assert figs["roofline"].path is not None
    assert set(figs["roofline"].jobs) == set(jobs["label"])  # every job of the sweep was benchmarked on the GPU
    assert figs["autotune"].jobs == ("resnet18 b32 infer fp16",)
    busy = figs["busy"].jobs  # cudagraphs off and on of each model side by side
    assert busy.index("densenet121 b16 train fp16 cudagraphs") - busy.index("densenet121 b16 train fp16") == 1


def test_report_shows_standalone_figures_and_all_figures(example):
    sweep, records, report = example
    page = report.read_text()
    assert page.count("data:image/png;base64,") == 7  # shares, busy, pairs, categories, autotune, roofline, compile
    shown = [r for rec in records.values() for r in rec["kernel_table"]["rows"]
             if r.get("standalone_ms") and f"<td class='num'>{r['standalone_ms']:.4f}</td>" in page]
    assert shown  # the costliest kernels' table carries their standalone times
    assert "candidate configs" in page  # the headroom column says how it was measured
    assert "+sweep=example" in page


def test_jobs_whose_timed_rounds_varied_are_named(example):
    """On the H200, resnet18 b32 inference (job 4) timed its module in rounds whose IQR was
    52% of their median; mixnet_l with CUDA graphs (job 3) held within 1%. The jobs table
    says so, and the report's note names the jobs at or over the threshold."""
    from sweeper.reporting.notes import UNSTEADY_TIMING_PCT
    from sweeper.sweep.summary import timing_iqr_pct

    sweep, records, report_path = example
    jobs = pd.read_parquet(sweep / "tables" / "jobs.parquet").set_index("job")
    for n, rec in records.items():
        walls = [rec["timings"]["compiled_step_ms"]] + [m["wall_ms"] for m in rec.get("modules") or [] if m.get("wall_ms")]
        expected = max(100 * w["iqr"] / w["median"] for w in walls)
        assert jobs.loc[n, "timing_iqr_pct"] == pytest.approx(expected, abs=0.05) == timing_iqr_pct(rec)
    assert jobs.loc[4, "timing_iqr_pct"] >= UNSTEADY_TIMING_PCT > jobs.loc[3, "timing_iqr_pct"]
    page = report_path.read_text()
    note = next(line for line in page.splitlines() if "timed rounds of these jobs varied" in line)
    assert "#4 (IQR 52% of the median)" in note
    flagged = [n for n in records if f"#{n} (IQR" in note]
    assert flagged == [n for n in records if jobs.loc[n, "timing_iqr_pct"] >= UNSTEADY_TIMING_PCT]
    assert "rounds IQR %" in page


def test_busy_figure_and_nvml_side_by_side_and_the_gaps_named(example):
    """Both busy instruments per job, as the H200 measured them: the jobs table carries
    busy_pct and nvml_util_pct from the records, the busy figure draws both, and the
    report's note names exactly the jobs where they differ by more than 7 points
    (densenet121 b16 without CUDA graphs, resnet18 with max-autotune: docs/method.md)."""
    from sweeper.reporting.notes import BUSY_NVML_GAP_PP

    sweep, records, report_path = example
    jobs = pd.read_parquet(sweep / "tables" / "jobs.parquet").set_index("job")
    gaps = {}
    for n, rec in records.items():
        assert jobs.loc[n, "busy_pct"] == pytest.approx(rec["step"]["busy_pct"])
        assert jobs.loc[n, "nvml_util_pct"] == pytest.approx(rec["timings"]["nvml"]["util_pct"])
        # the busy figure divides by the steady loop's step time, the seconds NVML read
        assert rec["step"]["busy_wall_ms"] == rec["timings"]["steady_loop"]["step_ms"]
        assert 0 < jobs.loc[n, "busy_pct"] <= 100
        gaps[n] = abs(jobs.loc[n, "nvml_util_pct"] - jobs.loc[n, "busy_pct"])
    over = sorted(n for n, gap in gaps.items() if gap > BUSY_NVML_GAP_PP)
    assert over == [0, 5]
    page = report_path.read_text()
    assert "<th>GPU busy %</th><th>NVML util %</th>" in page
    # both gaps are what NVML's count of the launches predicts: named as that
    note = next(line for line in page.splitlines() if "reads more than 7 points above the busy figure" in line)
    assert all(f"#{n} (busy" in note for n in over) and "#2 (busy" not in note
    assert "expected 33.5%" in note and "accounts for the gap" in note
    assert "more than NVML's count of the launches accounts for" not in page


def test_the_example_renders_in_a_browser_with_every_figure_and_gpu_wording(example):
    """The committed GPU example in a real headless browser: all seven figures decoded, a
    kernel table a job, GPU words and columns (the CPU sweep's: tests/test_job_cpu.py)."""
    import subprocess

    from conftest import chromium

    _, records, report = example
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                           "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'data-figures-rendered="7"' in dom
    assert f'data-tables="{3 + len(records)}"' in dom  # environment, jobs, module view, one kernel table a job
    assert "GPU busy %" in dom and "NVML util %" in dom and "L2 flushed" in dom


@pytest.mark.parametrize("width", [1400, 390], ids=["desktop", "phone"])
def test_the_first_screen_answers_and_fits_a_desktop_and_a_phone(example, width):
    """In a real browser at 1400 px and at a phone's width: the findings come first, under
    their own heading and before the jobs table, and state densenet121's launch-bound step
    with the CUDA-graphs effect and its layout-conversion share; the shares and pairwise
    figures are there and decoded; nothing is wider than the window."""
    import re
    import subprocess

    from conftest import chromium

    _, _, report = example
    # A headless window is 500 px wide at least: the page is laid out at the width asked in
    # a frame that wide, and the frame hands over what the page measured of itself.
    frame = report.parent / f"frame{width}.html"
    frame.write_text(f"<html><body><iframe id='f' src='{report.name}' width='{width}' height='2000' "
                     "style='border:0'></iframe><script>document.getElementById('f').onload = function () {"
                     " var d = this.contentDocument; document.body.setAttribute('data-dom', d.body.outerHTML);"
                     " Array.prototype.forEach.call(d.body.attributes, function (a) {"
                     " document.body.setAttribute(a.name, a.value); }); };</script></body></html>")
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--allow-file-access-from-files", "--window-size=1500,2000", "--virtual-time-budget=8000",
                           "--dump-dom", frame.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import html

    dom = html.unescape(proc.stdout)
    assert 'data-figures-rendered="7"' in dom
    page, viewport = (int(re.search(rf'{a}="(\d+)"', dom).group(1)) for a in ("data-page-width", "data-viewport-width"))
    assert viewport == width and page <= viewport, (page, viewport)
    assert int(re.search(r'data-findings="(\d+)"', dom).group(1)) >= 6
    assert dom.index('id="findings"') < dom.index('id="summary"') < dom.index('id="figures"')
    first = dom[dom.index('id="findings"'):dom.index('id="summary"')]
    assert "densenet121 b16 train fp16 is launch-bound: the GPU is busy 27%" in first
    assert "With CUDA graphs (densenet121 b16 train fp16 cudagraphs) the GPU is busy 91% and the step takes 11.8 ms" in first
    assert "18.6% of densenet121 b16 train fp16's GPU time goes to layout conversions" in first
    assert 'id="fig-shares"' in dom and 'id="fig-pairs"' in dom
    assert "densenet121 b16 train fp16 against mixnet_l b128 train fp16 (model pair)" in dom
    assert 'href="#job-0"' in first and 'id="job-0"' in dom  # a finding links to its row
