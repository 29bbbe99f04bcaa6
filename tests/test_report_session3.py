"""The aggregator on a whole real GPU sweep: issue 5's example grid as it ran on two H200s
(`python -m sweeper +sweep=example`, bench/results/h200_session3.md), its six records and
summary committed under tests/fixtures/h200/session3. Re-aggregated here, as
`python -m sweeper.aggregate` does over an existing sweep folder."""

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from sweeper.aggregate import aggregate

FIX = Path(__file__).parent / "fixtures" / "h200" / "session3"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    sweep = tmp_path_factory.mktemp("s3") / "example"
    summary = json.loads(gzip.decompress((FIX / "example.summary.json.gz").read_bytes()))
    records = {}
    for n in range(6):
        rec = json.loads(gzip.decompress((FIX / f"example_{n}.result.json.gz").read_bytes()))
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
    from sweeper import figures as fg
    from sweeper import tables

    sweep, records, _ = example
    recs = [dict(records[n], job=dict(records[n]["job"], id=str(n))) for n in sorted(records)]
    jobs, cats, bench = tables.jobs_table(recs), tables.categories_table(recs), tables.microbench_table(recs)
    figs = {f.name: f for f in fg.all_figures(jobs, cats, bench, sweep / "figures-check")}
    assert figs["roofline"].path is not None
    assert set(figs["roofline"].jobs) == set(jobs["label"])  # every job of the sweep was benchmarked on the GPU
    assert figs["autotune"].jobs == ("resnet18 b32 infer fp16",)
    busy = figs["busy"].jobs  # cudagraphs off and on of each model side by side
    assert busy.index("densenet121 b16 train fp16 cudagraphs") - busy.index("densenet121 b16 train fp16") == 1


def test_report_shows_standalone_figures_and_all_figures(example):
    sweep, records, report = example
    page = report.read_text()
    assert page.count("data:image/png;base64,") == 5  # roofline included now
    shown = [r for rec in records.values() for r in rec["kernel_table"]["rows"]
             if r.get("standalone_ms") and f"<td class='num'>{r['standalone_ms']:.4f}</td>" in page]
    assert shown  # the costliest kernels' table carries their standalone times
    assert "benchmark_all_configs over" in page
    assert "+sweep=example" in page


def test_jobs_whose_timed_rounds_varied_are_named(example):
    """On the H200, densenet121 b16 (job 0) timed its compiled step in rounds whose IQR was
    25% of their median (its backward module 23%); mixnet_l (job 2) held within 5%. The
    jobs table says so, and the report's note names the jobs at or over the threshold."""
    from sweeper.aggregate import UNSTEADY_TIMING_PCT
    from sweeper.summary import timing_iqr_pct

    sweep, records, report_path = example
    jobs = pd.read_parquet(sweep / "tables" / "jobs.parquet").set_index("job")
    for n, rec in records.items():
        walls = [rec["timings"]["compiled_step_ms"]] + [m["wall_ms"] for m in rec.get("modules") or [] if m.get("wall_ms")]
        expected = max(100 * w["iqr"] / w["median"] for w in walls)
        assert jobs.loc[n, "timing_iqr_pct"] == pytest.approx(expected, abs=0.05) == timing_iqr_pct(rec)
    assert jobs.loc[0, "timing_iqr_pct"] >= UNSTEADY_TIMING_PCT > jobs.loc[2, "timing_iqr_pct"]
    page = report_path.read_text()
    note = next(line for line in page.splitlines() if "timed rounds of these jobs varied" in line)
    assert "#0 (IQR 25% of the median)" in note
    flagged = [n for n in records if f"#{n} (IQR" in note]
    assert flagged == [n for n in records if jobs.loc[n, "timing_iqr_pct"] >= UNSTEADY_TIMING_PCT]
    assert "rounds IQR %" in page
