"""Aggregate a sweep folder: tables (Parquet and CSV), figures and report.html.

    python -m sweeper.aggregate SWEEP_DIR

Runs at the end of every sweep, and alone over an existing sweep folder (after a resume,
or with a newer sweeper). Reads only the folder: summary.json when present, else every
<job>/result.json. A record that cannot be read is left out with a note, never a
traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sweeper import figures as fg
from sweeper import report, tables
from sweeper.record import RecordError, atomic_write_text, read_record, relocate

TABLES_DIR, FIGURES_DIR, REPORT_FILE = "tables", "figures", "report.html"


class AggregateError(ValueError):
    """The folder is not a sweep folder that can be aggregated."""


def load_sweep(sweep_dir: Path) -> tuple[dict, dict[int, dict], list[str]]:
    """(summary, records by job number, notes about what was left out)."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise AggregateError(f"no sweep folder at {sweep_dir}: give the folder a sweep wrote "
                             "(the one with summary.json and numbered job folders)")
    notes: list[str] = []
    summary_path = sweep_dir / "summary.json"
    summary: dict = {}
    if summary_path.exists():
        try:
            summary = json.loads(summary_path.read_text())
        except (OSError, ValueError) as e:
            notes.append(f"{summary_path} could not be read ({e}); jobs were found from their folders")
    if summary.get("jobs"):
        dirs = {j["num"]: Path(j["dir"]) for j in summary["jobs"]}
        # The job folder inside this sweep folder wins: a copied or moved sweep folder's
        # records name where they were written, which may now hold another sweep.
        dirs = {n: sweep_dir / d.name if (sweep_dir / d.name).is_dir() else d for n, d in dirs.items()}
    else:
        dirs = {int(p.parent.name): p.parent for p in sweep_dir.glob("*/result.json") if p.parent.name.isdigit()}
        summary.setdefault("jobs", [])
    if not dirs:
        raise AggregateError(f"{sweep_dir} has no job results (no summary.json jobs, no <job>/result.json)")
    records = {}
    for num, d in sorted(dirs.items()):
        try:
            record = read_record(d)
            written_in = (record.get("job") or {}).get("dir")
            if written_in and Path(written_in) != d.resolve():  # artifact paths into this folder
                record = relocate(record, written_in.rstrip("/"), str(d.resolve()))
            record.setdefault("job", {})["id"] = str(num)  # the number in this sweep names the job
            records[num] = record
        except RecordError as e:
            notes.append(f"job #{num} left out: {e}")
    return summary, records, notes


def _note_naming(jobs, column: str, threshold: float, describe, text: str) -> list[str]:
    """[text with {named}: '#1 (...), #4 (...)', the jobs whose `column` reaches
    `threshold`, each with describe(its row)], or [] when there are none (or no column)."""
    if column not in jobs:
        return []
    hit = jobs[jobs[column].fillna(0) >= threshold]
    if hit.empty:
        return []
    # the job number from its own column: a row of an all-number frame holds it as a float
    named = ", ".join(f"#{job} ({describe(row)})" for job, (_, row) in zip(hit["job"], hit.iterrows()))
    return [text.format(named=named)]


# Other work on this many cores while a job measured is worth a warning: on two H200s a
# launch-bound module read 1.5x slower in a job that measured beside another's compile.
BUSY_HOST_CORES = 1.0


def busy_host_notes(jobs) -> list[str]:
    """A note naming the jobs whose timings ran while other work kept the host busy."""
    return _note_naming(
        jobs, "host_busy_cores", BUSY_HOST_CORES, lambda r: f"{r['host_busy_cores']:.1f} cores",
        "other work kept the host's CPUs busy while these jobs measured: {named}. Their "
        "launch-bound figures (step and module times of small kernels, busy percentages) "
        "can read slower than on an idle host; the 'other cores busy' column gives each job's figure")


# Timed rounds whose interquartile range is this share of their median or more: the
# busy percentages built on them move by as much between runs (densenet121 on the H200
# in session 5: 17-29%, and two jobs' busy figures 6 points apart). Small-batch launch-bound
# jobs often reach 10% on that machine; 15% flags the ones that moved most.
UNSTEADY_TIMING_PCT = 15.0


def unsteady_timing_notes(jobs) -> list[str]:
    """A note naming the jobs whose timed rounds varied, whatever the cause."""
    return _note_naming(
        jobs, "timing_iqr_pct", UNSTEADY_TIMING_PCT, lambda r: f"IQR {r['timing_iqr_pct']:.0f}% of the median",
        "the timed rounds of these jobs varied: {named}. Their step times and busy percentages "
        "can differ by as much in a repeat; the host's launch speed can drift with no other work "
        "running (docs/gpu.md). Compare such figures only within one run, or repeat the job")


# A job whose launch probe read this far from the sweep's median measured on a host at
# another launch speed: on the H200 in session 6 the probe read about 10.2 us a launch with
# stretches at about 7.4, and resnet18's modules ran about 30% faster in those.
LAUNCH_OFF_PCT = 15.0


def launch_speed_notes(jobs) -> list[str]:
    """A note naming the jobs whose host launched at another speed than the sweep's median
    (summary.launch_us); needs two jobs with a reading."""
    if "launch_us" not in jobs or jobs["launch_us"].notna().sum() < 2:
        return []
    median = jobs["launch_us"].median()
    return _note_naming(
        jobs.assign(launch_off_pct=(jobs["launch_us"] / median - 1).abs() * 100), "launch_off_pct",
        LAUNCH_OFF_PCT,
        lambda r: f"{r['launch_us']:.2f} µs, {'faster' if r['launch_us'] < median else 'slower'}",
        "these jobs measured while the host launched work at another speed than in the rest of "
        f"the sweep (median {median:.2f} µs a launch; the 'launch µs' column gives each job's): "
        "{named}. Launch-bound figures (small-batch step and module times, busy percentages) "
        "follow that speed: on a faster host they read faster and busier (docs/method.md)")


# The two instruments of the busy figure (the profiler's kernel intervals over the
# unprofiled step, NVML's utilization counter) differ by more than this: worth a look.
BUSY_NVML_GAP_PP = 7.0


def busy_nvml_notes(jobs) -> list[str]:
    """A note naming the jobs whose busy figure and NVML utilization differ by more than
    BUSY_NVML_GAP_PP points (docs/method.md says what each counts)."""
    if "nvml_util_pct" not in jobs:
        return []
    gap = jobs.assign(busy_nvml_gap=(jobs["nvml_util_pct"] - jobs["busy_pct"]).abs())
    return _note_naming(
        gap[gap["busy_nvml_gap"] > BUSY_NVML_GAP_PP], "busy_nvml_gap", 0.0,
        lambda r: f"busy {r['busy_pct']:.1f}%, NVML {r['nvml_util_pct']:.1f}%",
        f"the busy figure and NVML's utilization differ by more than {BUSY_NVML_GAP_PP:g} points "
        "for these jobs: {named}. NVML counts a sample period as busy while any kernel runs, "
        "at a grain of 1/6 s or more; a gap that large means the step did not run steadily "
        "(docs/method.md)")


def aggregate(sweep_dir: Path) -> Path:
    """Write tables/, figures/ and report.html into the sweep folder; returns the report."""
    sweep_dir = Path(sweep_dir).resolve()
    summary, records, notes = load_sweep(sweep_dir)
    recs = [records[n] for n in sorted(records)]
    jobs, cats, kernels = tables.jobs_table(recs), tables.categories_table(recs), tables.kernels_table(recs)
    bench = tables.microbench_table(recs)
    tdir = sweep_dir / TABLES_DIR
    tdir.mkdir(exist_ok=True)
    for name, df in (("jobs", jobs), ("categories", cats), ("kernels", kernels), ("microbench", bench)):
        df.to_parquet(tdir / f"{name}.parquet", index=False)
        df.to_csv(tdir / f"{name}.csv", index=False)
    figs = fg.all_figures(jobs, cats, bench, sweep_dir / FIGURES_DIR)
    notes = (notes + busy_nvml_notes(jobs) + busy_host_notes(jobs) + unsteady_timing_notes(jobs)
             + launch_speed_notes(jobs))
    page = report.render(sweep_dir, summary, records, jobs, kernels, figs, notes)
    path = sweep_dir / REPORT_FILE
    atomic_write_text(path, page)
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    try:
        path = aggregate(Path(argv[0]))
    except AggregateError as e:
        print(f"sweeper.aggregate: {e}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
