"""Sweeps side by side: which sweep folders count as history, and one sweep compared with
an earlier one, job by job and kernel by kernel (reads folders, writes nothing).

Only complete sweeps count: summary.json says the sweep ended on its own (`complete`)
and no job was cancelled. A running, interrupted or cancelled sweep is skipped with a
one-line note. Tables are built in memory from the records (sweeper/reporting/load.py),
so comparing never writes into a sweep folder."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from sweeper.analysis import regression as rg
from sweeper.reporting import tables
from sweeper.reporting.load import AggregateError, load_sweep, summary_problem

HISTORY_SWEEPS = 7  # earlier complete sweeps whose spread counts as a job's noise


def _summary(sweep: Path) -> dict | str:
    """A sweep folder's summary.json, or why it cannot be read."""
    try:
        summary = json.loads((Path(sweep) / "summary.json").read_text())
    except (OSError, ValueError) as e:
        return f"its summary.json cannot be read ({e})"
    problem = summary_problem(summary)
    return f"its summary.json {problem}" if problem else summary


def sweep_state(sweep: Path) -> tuple[bool, str]:
    """(complete, why not) from a sweep folder's summary.json."""
    summary = _summary(sweep)
    if isinstance(summary, str):
        return False, summary
    if not summary.get("complete"):
        return False, "it is still running or was interrupted"
    cancelled = (summary.get("counts") or {}).get("cancelled", 0)
    if cancelled:
        return False, f"{cancelled} of its jobs were cancelled"
    return True, ""


def started_at(sweep: Path) -> str:
    summary = _summary(sweep)
    return "" if isinstance(summary, str) else summary.get("started_at") or ""


def complete_sweeps_under(outputs: Path, depth: int = 2) -> tuple[list[Path], list[str]]:
    """Complete sweep folders under `outputs`, at most `depth` levels down (outputs/DATE/TIME,
    outputs/nightly/DATE), oldest first (by started_at), and a one-line note for each
    sweep folder skipped. Not deeper: a sweep folder's parent may be /tmp."""
    found, notes = [], []
    summaries = [p for d in range(depth + 1) for p in Path(outputs).glob("/".join(["*"] * d + ["summary.json"]))]
    for s in summaries:
        sweep = s.parent.resolve()
        ok, why = sweep_state(sweep)
        if ok:
            found.append((started_at(sweep), str(sweep), sweep))
        else:
            notes.append(f"skipped {sweep}: {why}")
    return [p for _, _, p in sorted(found)], sorted(notes)


@dataclass
class SweepTables:
    path: Path
    jobs: pd.DataFrame
    kernels: pd.DataFrame
    started_at: str = ""


def sweep_tables(sweep: Path) -> SweepTables:
    _, records, _ = load_sweep(Path(sweep))
    recs = [records[n] for n in sorted(records)]
    return SweepTables(Path(sweep), tables.jobs_table(recs), tables.kernels_table(recs), started_at(sweep))


def grid(sweep: Path) -> frozenset:
    """The sweep's jobs as their overrides (summary.json): two sweeps of one grid have the
    same. Read from the summary alone, so that finding the earlier sweep of a grid at the
    end of every sweep does not read every record beside it."""
    summary = _summary(sweep)
    jobs = [] if isinstance(summary, str) else summary.get("jobs") or []
    return frozenset(tuple(sorted(j.get("overrides") or [])) for j in jobs)


def earlier_sweep(new: Path, same_grid: bool = False) -> tuple[Path | None, list[str]]:
    """The latest complete sweep beside `new` (under its parent folder) that started before
    it and shares at least one job with it (the same overrides); with same_grid, only one of
    the same job configurations. And the notes: sweeps skipped, and those looked at that
    share no job (a sweep of another grid compares nothing: "0 of 0 jobs flagged")."""
    new = Path(new).resolve()
    sweeps, notes = complete_sweeps_under(new.parent, depth=1)
    mine, jobs = started_at(new), grid(new)
    before = [s for s in sweeps if s != new and started_at(s) <= mine]
    if same_grid:
        before = [s for s in before if grid(s) == jobs]
    unrelated = [s for s in before if not grid(s) & jobs]
    notes += [f"looked at {s}: it shares no job with {new}" for s in unrelated]
    before = [s for s in before if s not in unrelated]
    return (before[-1] if before else None), [n for n in notes if f"{new}:" not in n]


def history_noise(history: list[SweepTables], gpu_of: dict[str, str | None],
                  value: Callable[[pd.Series], float] = rg.wall_ms) -> dict[str, float | None]:
    """key -> the spread of a figure of the job (`value` of its jobs-table row; default:
    the wall time compared) over `history` (ok runs on the same GPU model only), as
    regression.history_noise_pct."""
    values: dict[str, list[float]] = {}
    for t in history:
        for _, r in t.jobs[t.jobs["status"] == "ok"].iterrows():
            if r["gpu"] == gpu_of.get(r["key"]) or (pd.isna(r["gpu"]) and gpu_of.get(r["key"]) is None):
                values.setdefault(r["key"], []).append(value(r))
    return {k: rg.history_noise_pct(v) for k, v in values.items()}


@dataclass
class JobDetail:
    """One job in both sweeps: what a kernel-level look needs."""
    label: str
    kernels: pd.DataFrame  # regression.kernel_diff rows
    shares_old: pd.Series
    shares_new: pd.Series
    figures: dict = field(default_factory=dict)  # name -> (old, new)


@dataclass
class Comparison:
    old: SweepTables
    new: SweepTables
    threshold_pct: float
    jobs: pd.DataFrame  # regression.compare_jobs
    history_sweeps: int
    details: dict[str, JobDetail] = field(default_factory=dict)  # key -> detail
    # builds in one sweep (compare_builds): ("python", old value, new value); None: two sweeps
    between: tuple | None = None

    @property
    def flagged(self) -> pd.DataFrame:
        return rg.flagged(self.jobs)


def job_detail(old: SweepTables, new: SweepTables, key: str, threshold_pct: float,
               noise_pct: float | None = None) -> JobDetail:
    def one(t: SweepTables) -> tuple[pd.Series, pd.DataFrame]:
        rows = t.jobs[(t.jobs["key"] == key) & (t.jobs["status"] == "ok")]
        if rows.empty:
            rows = t.jobs[t.jobs["key"] == key]
        row = rows.iloc[0]
        return row, t.kernels[t.kernels["job"] == row["job"]]

    def shares(row: pd.Series) -> pd.Series:  # the jobs table's share_<category> columns
        cols = [c for c in row.index if c.startswith(tables.JOB_SHARE_PREFIX)]
        s = pd.Series({c[len(tables.JOB_SHARE_PREFIX):]: row[c] for c in cols}, dtype=float)
        return s[s > 0]

    (r_old, k_old), (r_new, k_new) = one(old), one(new)
    figures = {c: (r_old.get(c), r_new.get(c)) for c in ("compile_s", "peak_memory_mb", "busy_pct", "nvml_util_pct")}
    seeded = [tables.state_of(r) for r in (r_old, r_new)]
    if seeded[0] != seeded[1]:  # a seeded compile skips autotuning, a warm one compiling: not the build's time
        figures[f"compile_s ({seeded[0]} -> {seeded[1]}: not comparable)"] = figures.pop("compile_s")
    return JobDetail(r_new["label"], rg.kernel_diff(k_old, k_new, threshold_pct, noise_pct=noise_pct),
                     shares(r_old), shares(r_new), figures)


def compare_sweeps(new: Path, old: Path, threshold_pct: float = rg.DEFAULT_THRESHOLD_PCT,
                   kernels: str = "flagged", history_sweeps: int = HISTORY_SWEEPS) -> Comparison:
    """`new` against `old`, each job's noise including the history of complete sweeps under
    old's parent folder up to old (the last `history_sweeps`). kernels: "flagged" (kernel
    diffs of flagged jobs), "all", or "none"."""
    for s in (new, old):
        ok, why = sweep_state(s)
        if not ok:
            raise AggregateError(f"{s} is not a complete sweep ({why}); compare complete sweeps only")
    t_new, t_old = sweep_tables(new), sweep_tables(old)
    earlier, _ = complete_sweeps_under(Path(old).resolve().parent, depth=1)
    mine = started_at(old)
    hist_paths = [s for s in earlier if started_at(s) <= mine and s != Path(new).resolve()][-history_sweeps:]
    history = [sweep_tables(s) for s in hist_paths]
    gpu_of = dict(zip(t_new.jobs["key"], t_new.jobs["gpu"].where(t_new.jobs["gpu"].notna(), None)))
    enough = len(history) >= rg.HISTORY_MIN
    noise = history_noise(history, gpu_of) if enough else {}
    device_noise = history_noise(history, gpu_of, lambda r: r["device_ms"]) if enough else {}
    table = rg.compare_jobs(t_old.jobs, t_new.jobs, threshold_pct, noise, device_noise)
    table["label"] = table["key"].map(tables.distinct_labels(
        {k: (k, lab) for k, lab in zip(table["key"], table["label"])}))
    cmp = Comparison(t_old, t_new, threshold_pct, table, len(history))
    both = table[table["status_old"].notna() & table["status_new"].notna()]
    keys = {"all": list(both["key"]), "flagged": list(rg.flagged(both)["key"]), "none": []}[kernels]
    noise = {r["key"]: kernel_noise(r) for _, r in both.iterrows()}
    cmp.details = {k: job_detail(t_old, t_new, k, threshold_pct, noise[k]) for k in keys}
    return cmp


def kernel_noise(row) -> float | None:
    """The noise a job's kernels are held against: what its own verdict was (a CPU job's
    step time, a GPU job's kernel time; None where none is known)."""
    cpu = pd.isna(row.get("gpu_new")) and pd.isna(row.get("gpu_old"))
    value = row["noise_pct"] if cpu else row["device_noise_pct"]
    return None if value is None or pd.isna(value) else float(value)


def earlier_comparison(sweep: Path) -> tuple[Comparison | None, list[str]]:
    """For the report: this sweep against the latest earlier complete sweep of the same
    grid beside it, if this one is complete and there is one; and notes on what failed."""
    if not sweep_state(sweep)[0]:
        return None, []
    try:
        old, _ = earlier_sweep(sweep, same_grid=True)
        return (compare_sweeps(sweep, old) if old else None), []
    except AggregateError as e:
        return None, [f"no comparison with an earlier sweep: {e}"]


BUILD_KEY = "python"  # the config key whose values are builds compared within one sweep


def _one_build(t: SweepTables, value: str) -> SweepTables:
    """The jobs of one build, keyed and labelled without it, so that the builds pair up."""
    part = f"{BUILD_KEY}={value}"
    jobs = t.jobs[t.jobs[BUILD_KEY] == value].copy()
    jobs["key"] = [tables.key_without(k, BUILD_KEY) for k in jobs["key"]]
    jobs["label"] = [" ".join(w for w in lab.split(" ") if w != part) for lab in jobs["label"]]
    return SweepTables(t.path, jobs, t.kernels[t.kernels["job"].isin(jobs["job"])], t.started_at)


def compare_builds(sweep: Path, threshold_pct: float = rg.DEFAULT_THRESHOLD_PCT) -> list[Comparison]:
    """Within one sweep, the jobs of each later value of `python` against the same jobs of
    the first (in the sweep's order): the nightly compare between builds that ran side by
    side, each pair's noise its two runs' own. Every pair gets a kernel-level diff."""
    t = sweep_tables(sweep)
    values = [v for v in dict.fromkeys(t.jobs[BUILD_KEY]) if isinstance(v, str) and v]
    if len(values) < 2:
        return []
    base = _one_build(t, values[0])
    out = []
    for value in values[1:]:
        other = _one_build(t, value)
        table = rg.compare_jobs(base.jobs, other.jobs, threshold_pct)
        cmp = Comparison(base, other, threshold_pct, table, 0, between=(BUILD_KEY, values[0], value))
        both = table[table["status_old"].notna() & table["status_new"].notna()]
        cmp.details = {k: job_detail(base, other, k, threshold_pct) for k in both["key"]}
        out.append(cmp)
    return out
