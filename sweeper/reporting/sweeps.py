"""Sweeps side by side: which sweep folders count as history, and one sweep compared with
an earlier one, job by job and kernel by kernel (reads folders, writes nothing).

Only complete sweeps count: summary.json says the sweep ended on its own (`complete`)
and no job was cancelled. A running, interrupted or cancelled sweep is skipped with a
one-line note. An earlier sweep is read from the tables its aggregate wrote (tables/*.parquet)
where they are as new as its records, else built in memory from the records
(sweeper/reporting/load.py); comparing never writes into a sweep folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from sweeper.analysis import regression as rg
from sweeper.analysis.kernel_diff import kernel_diff, kernel_diffs
from sweeper.reporting import tables
from sweeper.reporting.compile_state import state_of
from sweeper.reporting.load import AggregateError, LoadedSweep
from sweeper.reporting.sweep_tables import (UNREADABLE, SweepTables, history_tables, loaded_tables, read_summary, started_at,
                                           sweep_tables, with_unreadable)

HISTORY_SWEEPS = 7  # earlier complete sweeps whose spread counts as a job's noise


def sweep_state(sweep: Path) -> tuple[bool, str]:
    """(complete, why not) from a sweep folder's summary.json."""
    summary = read_summary(sweep)
    if isinstance(summary, str):
        return False, summary
    if not summary.get("complete"):
        return False, "it is still running or was interrupted"
    cancelled = (summary.get("counts") or {}).get("cancelled", 0)
    if cancelled:
        return False, f"{cancelled} of its jobs were cancelled"
    return True, ""


def complete_sweeps_under(outputs: Path, depth: int = 2) -> tuple[list[Path], list[str]]:
    """Complete sweep folders under `outputs`, at most `depth` levels down (outputs/DATE/TIME,
    outputs/nightly/DATE), oldest first (by started_at), and a one-line note for each
    sweep folder skipped. Not deeper: a sweep folder's parent may be /tmp."""
    found, notes = [], []
    summaries = [p for d in range(depth + 1) for p in Path(outputs).glob("/".join(["*"] * d + ["summary.json"]))]
    seen: set[Path] = set()
    for s in summaries:
        sweep = s.parent.resolve()
        if sweep in seen:  # a second path to one sweep (a `latest` link, a link to the root): one night
            continue
        seen.add(sweep)
        ok, why = sweep_state(sweep)
        if ok:
            found.append((started_at(sweep), str(sweep), sweep))
        else:
            notes.append(f"skipped {sweep}: {why}")
    return [p for _, _, p in sorted(found)], sorted(notes)


def grid(sweep: Path) -> frozenset:
    """The sweep's jobs as their overrides (summary.json): two sweeps of one grid have the
    same. Read from the summary alone, so that finding the earlier sweep of a grid at the
    end of every sweep does not read every record beside it."""
    summary = read_summary(sweep)
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
    kernels: pd.DataFrame  # kernel_diff.kernel_diff rows
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


def _row_of(t: SweepTables, key: str) -> pd.Series:
    """The job of `key` that stands for it: the first that finished ok, else the first."""
    rows = t.jobs[(t.jobs["key"] == key) & (t.jobs["status"] == "ok")]
    return (rows if len(rows) else t.jobs[t.jobs["key"] == key]).iloc[0]


def job_details(old: SweepTables, new: SweepTables, keys: list[str], threshold_pct: float,
                noise: dict[str, float | None] | None = None) -> dict[str, JobDetail]:
    """job_detail for many jobs, their kernel diffs made together (analysis/kernel_diff.py)."""
    pairs = {k: (int(_row_of(old, k)["job"]), int(_row_of(new, k)["job"])) for k in keys}
    diffs = kernel_diffs(old.kernels, new.kernels, pairs, threshold_pct, noise=noise) if keys else {}
    return {k: job_detail(old, new, k, threshold_pct, kernels=diffs[k]) for k in keys}


def job_detail(old: SweepTables, new: SweepTables, key: str, threshold_pct: float,
               noise_pct: float | None = None, kernels: pd.DataFrame | None = None) -> JobDetail:
    """One job in both sweeps; `kernels`: its kernel diff where made already (job_details)."""
    def one(t: SweepTables) -> tuple[pd.Series, pd.DataFrame]:
        row = _row_of(t, key)
        return row, t.kernels_of(row["job"]) if kernels is None else t.kernels.iloc[0:0]

    def shares(row: pd.Series) -> pd.Series:  # the jobs table's share_<category> columns
        cols = [c for c in row.index if c.startswith(tables.JOB_SHARE_PREFIX)]
        s = pd.Series({c[len(tables.JOB_SHARE_PREFIX):]: row[c] for c in cols}, dtype=float)
        return s[s > 0]

    (r_old, k_old), (r_new, k_new) = one(old), one(new)
    figures = {c: (r_old.get(c), r_new.get(c)) for c in ("compile_s", "peak_memory_mb", "busy_pct", "nvml_util_pct")}
    seeded = [state_of(r) for r in (r_old, r_new)]
    if seeded[0] != seeded[1]:  # a seeded compile skips autotuning, a warm one compiling: not the build's time
        figures[f"compile_s ({seeded[0]} -> {seeded[1]}: not comparable)"] = figures.pop("compile_s")
    diff = kernels if kernels is not None else kernel_diff(k_old, k_new, threshold_pct, noise_pct=noise_pct)
    return JobDetail(r_new["label"], diff, shares(r_old), shares(r_new), figures)


def compare_sweeps(new: Path, old: Path, threshold_pct: float = rg.DEFAULT_THRESHOLD_PCT,
                   kernels: str = "flagged", history_sweeps: int = HISTORY_SWEEPS,
                   new_tables: SweepTables | None = None) -> Comparison:
    """`new` against `old`, each job's noise including the history of complete sweeps under
    old's parent folder up to old (the last `history_sweeps`). kernels: "flagged" (kernel
    diffs of flagged jobs), "all", or "none". new_tables: new's tables where the caller
    has read them already (the aggregate); the earlier sweeps are read from their tables."""
    for s in (new, old):
        ok, why = sweep_state(s)
        if not ok:
            raise AggregateError(f"{s} is not a complete sweep ({why}); compare complete sweeps only")
    t_new, t_old = new_tables or sweep_tables(new), sweep_tables(old)
    t_new, t_old = with_unreadable(t_new, t_old), with_unreadable(t_old, t_new)
    earlier, _ = complete_sweeps_under(Path(old).resolve().parent, depth=1)
    mine = started_at(old)
    hist_paths = [s for s in earlier if started_at(s) <= mine and s != Path(new).resolve()][-history_sweeps:]
    # the history's jobs only (the old sweep is one of them, already read)
    history = [t_old if s == t_old.path.resolve() else history_tables(s) for s in hist_paths]
    gpu_of = dict(zip(t_new.jobs["key"], t_new.jobs["gpu"].where(t_new.jobs["gpu"].notna(), None)))
    enough = len(history) >= rg.HISTORY_MIN
    noise = history_noise(history, gpu_of) if enough else {}
    device_noise = history_noise(history, gpu_of, lambda r: r["device_ms"]) if enough else {}
    table = rg.compare_jobs(t_old.jobs, t_new.jobs, threshold_pct, noise, device_noise)
    table["label"] = table["key"].map(tables.distinct_labels(
        {k: (k, lab) for k, lab in zip(table["key"], table["label"])}))
    unreadable: dict = {}
    for t in (t_new, t_old):  # an unreadable record's why names its file
        bad = t.jobs[t.jobs["status"] == UNREADABLE]
        unreadable.update(dict(zip(bad["key"], bad["reason"])))
    hit = table["key"].isin(list(unreadable)) & table["verdict"].str.startswith("status ")
    table.loc[hit, "why"] = table.loc[hit, "key"].map(unreadable)
    cmp = Comparison(t_old, t_new, threshold_pct, table, len(history))
    both = table[table["status_old"].notna() & table["status_new"].notna()]
    keys = {"all": list(both["key"]), "flagged": list(rg.flagged(both)["key"]), "none": []}[kernels]
    keys = [k for k in keys if k not in unreadable]  # nothing of its kernels to read
    noise = {r["key"]: kernel_noise(r) for _, r in both.iterrows()}
    cmp.details = job_details(t_old, t_new, keys, threshold_pct, noise)
    return cmp


def kernel_noise(row) -> float | None:
    """The noise a job's kernels are held against: what its own verdict was (a CPU job's
    step time, a GPU job's kernel time; None where none is known)."""
    cpu = pd.isna(row.get("gpu_new")) and pd.isna(row.get("gpu_old"))
    value = row["noise_pct"] if cpu else row["device_noise_pct"]
    return None if value is None or pd.isna(value) else float(value)


def earlier_comparison(sweep: LoadedSweep) -> tuple[Comparison | None, list[str]]:
    """For the report: this sweep against the latest earlier complete sweep of the same
    grid beside it, if this one is complete and there is one; and notes on what failed."""
    if not sweep_state(sweep.path)[0]:
        return None, []
    try:
        old, _ = earlier_sweep(sweep.path, same_grid=True)
        return (compare_sweeps(sweep.path, old, new_tables=loaded_tables(sweep)) if old else None), []
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


def compare_builds(sweep: Path | LoadedSweep, threshold_pct: float = rg.DEFAULT_THRESHOLD_PCT,
                   kernels: str = "all") -> list[Comparison]:
    """Within one sweep, the jobs of each later value of `python` against the same jobs of
    the first (in the sweep's order): the nightly compare between builds that ran side by
    side, each pair's noise its two runs' own. Every pair gets a kernel-level diff
    (kernels="flagged": flagged pairs only, as a large sweep's page shows them).
    `sweep`: a folder, or the sweep already read (the aggregate's)."""
    t = loaded_tables(sweep) if isinstance(sweep, LoadedSweep) else sweep_tables(sweep)
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
        keys = both["key"] if kernels == "all" else rg.flagged(both)["key"]
        cmp.details = job_details(base, other, list(keys), threshold_pct)
        out.append(cmp)
    return out
