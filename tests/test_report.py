"""The aggregator on real GPU records (committed from the H200, tests/fixtures/h200/two_gpu_sweeps)
and the report in a real headless browser."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sweeper.sweep import summary as sm
from sweeper.record import read_record
from sweeper.aggregate import aggregate
from sweeper.reporting.load import load_sweep
from sweeper.analysis.categories import CATEGORIES
from conftest import chromium as _chromium

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = Path(__file__).parent / "fixtures" / "h200" / "two_gpu_sweeps"
# job number -> fixture: cudagraphs off/on, autotune on/off pairs, an OOM, two big models
FIXTURES = ["mixnet_l", "densenet121", "resnet18_0", "resnet18_1", "scaling_gpu2_0", "scaling_gpu2_1",
            "scaling_gpu2_2", "scaling_gpu2_3", "oom_0", "oom_1"]


def make_sweep(root: Path, name: str = "gpu-sweep") -> tuple[Path, dict[int, dict]]:
    """A sweep folder as the launcher writes it, from the committed GPU records."""
    sweep = root / name
    entries, records = [], {}
    for num, name in enumerate(FIXTURES):
        rec = read_record(SWEEPS / f"{name}.result.json.gz")  # as every reader does: version 1 read as 2
        job_dir = sweep / str(num)
        job_dir.mkdir(parents=True)
        (job_dir / "result.json").write_text(json.dumps(rec))
        entries.append(sm.job_entry(num, rec["job"]["overrides"], job_dir, rec))
        records[num] = rec
    sm.write_summary(sweep, entries, 0.0, ["model=mixnet_l,densenet121,resnet18", "..."], done=True)
    return sweep, records


@pytest.fixture(scope="module")
def gpu_sweep(tmp_path_factory):
    sweep, records = make_sweep(tmp_path_factory.mktemp("agg"))
    report = aggregate(sweep)
    return sweep, records, report


def test_tables_hold_the_records_values(gpu_sweep):
    sweep, records, _ = gpu_sweep
    jobs = pd.read_parquet(sweep / "tables" / "jobs.parquet")
    assert list(jobs["job"]) == list(range(len(FIXTURES)))
    assert len(pd.read_csv(sweep / "tables" / "jobs.csv")) == len(FIXTURES)
    for _, row in jobs.iterrows():
        rec = records[row["job"]]
        assert row["status"] == rec["status"] and row["model"] == rec["config"]["model"]
        if rec["status"] != "ok":
            assert pd.isna(row["compiled_step_ms"]) and "out of GPU memory at batch size 100000" in row["reason"]
            continue
        assert row["compiled_step_ms"] == rec["timings"]["compiled_step_ms"]["median"]
        assert row["busy_pct"] == rec["step"]["busy_pct"]
        assert row["busy_pct_reference_style"] == rec["step"]["busy_pct_reference_style"]
        for cat in CATEGORIES:
            want = (rec["step"]["categories"].get(cat) or {}).get("share_of_device_pct", 0.0)
            assert row[f"share_{cat}"] == pytest.approx(want)
    cats = pd.read_parquet(sweep / "tables" / "categories.parquet")
    mixnet_bwd = cats[(cats["job"] == 0) & (cats["scope"] == "backward_1")].set_index("category")["device_ms"]
    want = {c: v["device_ms"] for c, v in records[0]["modules"][1]["breakdown"]["categories"].items()}
    assert mixnet_bwd.to_dict() == pytest.approx(want)
    kernels = pd.read_parquet(sweep / "tables" / "kernels.parquet")
    step_kernels = kernels[(kernels["job"] == 1) & (kernels["scope"] == "step")]
    assert len(step_kernels) == len(records[1]["step"]["kernels"])
    assert step_kernels["device_ms"].sum() == pytest.approx(records[1]["step"]["device_ms"], rel=1e-6)


def test_figures_have_the_jobs_they_should(gpu_sweep):
    from sweeper.reporting.sweep_figures import all_figures
    from sweeper.reporting import tables

    sweep, records, _ = gpu_sweep
    recs = [dict(records[n], job=dict(records[n]["job"], id=str(n))) for n in sorted(records)]
    jobs, cats, bench = tables.jobs_table(recs), tables.categories_table(recs), tables.microbench_table(recs)
    assert bench.empty  # these records predate the microbenchmarks
    figs = {f.name: f for f in all_figures(jobs, cats, bench, sweep / "figures-check")}
    # forward and backward apart for modules; the CUDA-graphs job (no module view) by its step
    assert "mixnet_l b128 train fp16  ·  forward_0" in figs["categories"].jobs
    assert "mixnet_l b128 train fp16  ·  backward_1" in figs["categories"].jobs
    assert "resnet18 b32 train fp16 cudagraphs  ·  step" in figs["categories"].jobs
    assert not any("b100000" in j for j in figs["categories"].jobs)  # the OOM job has no data
    busy = figs["busy"].jobs
    # two jobs of one configuration get their numbers; cudagraphs off and on sit side by side
    assert "resnet18 b32 train fp16 #2" in busy and "resnet18 b32 train fp16 #8" in busy
    assert busy.index("resnet18 b32 train fp16 cudagraphs") - busy.index("resnet18 b32 train fp16 #2") in (1, 2)
    assert figs["autotune"].jobs == ("resnet18 b32 infer fp16", "resnet34 b32 infer fp16")
    assert figs["roofline"].path is None and "microbenchmarks" in figs["roofline"].note
    assert len(figs["compile"].jobs) == 9 and all(Path(f.path).stat().st_size > 10_000
                                                for f in figs.values() if f.path)


def test_report_names_failed_jobs_and_how_to_rerun(gpu_sweep):
    sweep, _, report = gpu_sweep
    page = report.read_text()
    assert "out of GPU memory at batch size 100000" in page
    assert "python -m sweeper model=resnet18 batch_size=100000" in page
    assert page.count("data:image/png;base64,") == 6  # every drawn figure is embedded
    assert "kernels against the bandwidth roofline: not drawn" in page
    assert 'href="0/traces/step.json.gz"' in page  # links into the job folders, relative
    assert "NVIDIA H200" in page


def test_report_renders_in_a_headless_browser(gpu_sweep):
    sweep, _, report = gpu_sweep
    proc = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                           "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'data-figures-rendered="6"' in dom  # the browser decoded all six embedded PNGs
    kernels = pd.read_parquet(sweep / "tables" / "kernels.parquet")
    with_kernels = kernels[kernels["scope"] == "step"]["job"].nunique()
    # environment, jobs, module view, failed jobs, a kernel table a job
    assert f'data-tables="{4 + with_kernels}"' in dom
    assert 'id="failed-jobs"' in dom and "out of GPU memory" in dom


def test_corrupt_record_is_left_out_with_a_note(tmp_path):
    sweep, _ = make_sweep(tmp_path)
    broken = sweep / "3" / "result.json"
    broken.write_text(broken.read_text()[:100])
    proc = subprocess.run([sys.executable, "-m", "sweeper.aggregate", str(sweep)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _, records, notes = load_sweep(sweep)
    assert 3 not in records and len(records) == len(FIXTURES) - 1
    assert any(str(broken) in n and "left out" in n for n in notes)
    page = (sweep / "report.html").read_text()
    assert "job #3 left out" in page and str(broken) in page
    assert len(pd.read_parquet(sweep / "tables" / "jobs.parquet")) == len(FIXTURES) - 1


def test_missing_sweep_folder_is_a_clear_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sweeper.aggregate", str(tmp_path / "nope")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"no sweep folder at {tmp_path / 'nope'}" in proc.stderr and "summary.json" in proc.stderr


def test_nightly_preset_names_a_grid_and_a_stable_folder(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sweeper", "+sweep=nightly", "dry_run=true"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "dry run: 12 jobs into" in proc.stdout and "/outputs/nightly/" in proc.stdout
    assert "#11 model=resnet50 cudagraphs=on autotune=off" in proc.stdout and "expected duration:" in proc.stdout


def test_figures_show_every_bar_with_headroom_keys_inside_and_titles_that_match(tmp_path, monkeypatch):
    """The figures' layout, read off the matplotlib figures before they are saved."""
    import sweeper.reporting.figures as fg

    drawn = {}
    real_save = fg.save

    def keep(fig, path):
        ax = fig.axes[0]
        drawn[path.stem] = {"ylim": ax.get_ylim(), "xlim": ax.get_xlim(), "texts": [t.get_text() for t in ax.texts],
                            "hlines": [list(line.get_ydata()) for line in ax.lines],
                            "legend": [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else [],
                            "xlabel": ax.get_xlabel()}
        return real_save(fig, path)

    monkeypatch.setattr(fg, "save", keep)
    jobs = pd.DataFrame({"job": [0, 1], "label": ["a b2 train", "b b2 train"], "status": "ok", "model": ["a", "b"],
                         "batch_size": 2, "busy_pct": [376.0, 40.0], "nvml_util_pct": None,
                         "busy_pct_reference_style": [300.0, 35.0], "gpu": None, "compile_s": [20.0, 80.0],
                         "autotune": [False, True]})
    busy = fg.busy_figure(jobs, tmp_path)
    assert busy.title == "CPU busy during the compiled step"
    b = drawn["busy"]
    assert b["ylim"][1] >= 120 and "376%" in b["texts"] and "300%" in b["texts"]  # clipped bars say their value
    assert [100, 100] in b["hlines"] and "100%" in b["texts"]  # the 100% line, labelled
    cats = pd.DataFrame({"job": [0, 0, 1], "label": ["a b2 train", "a b2 train", "b b2 train"], "scope": "step",
                         "category": ["triton_pointwise", "library_mm_conv", "triton_pointwise"],
                         "device_ms": [1.0, 2.0, 1.5], "share_pct": [33.3, 66.7, 100.0]})
    fg.categories_figure(jobs, cats, tmp_path)
    assert drawn["categories"]["xlim"][1] > 3.0  # headroom after the longest bar (3.0 ms)
    fg.compile_figure(jobs, tmp_path)
    assert drawn["compile"]["legend"] == ["default", "max-autotune"]  # the colour key, in the figure
    assert "orange" not in drawn["compile"]["xlabel"]
    pair = jobs.assign(key=["model=a,autotune=False", "model=a,autotune=True"], compiled_step_ms=[2.0, 1.5],
                       model="a")
    from sweeper.reporting.pair_figures import autotune_figure

    tuned = autotune_figure(pair, cats, pd.DataFrame(columns=["job", "headroom_pct"]), tmp_path)
    assert tuned.path is not None and "headroom" not in tuned.title  # no headroom panel drawn, none named
