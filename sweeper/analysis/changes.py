"""Change points over a nightly history (pure: numbers in, changes out; `python -m
sweeper.history changes`, docs/method.md "Change points over the nightly history").

What is judged, where the noise is lowest:
- a **kernel family** in every job that runs it: its kernel time a step (the kernels whose
  names differ only by Inductor's number, `triton_red_fused_native_batch_norm_backward_*`,
  or one library kernel), and a **category** (every Triton reduction of a job), pooled over
  the jobs: a 1-4% change of a family shared by many jobs, which no single job shows beyond
  its noise, moves them all the same way;
- each **job**'s kernel time a step, its step time where the GPU is busy enough for the step
  to follow its kernels (busy_pct >= STEP_BUSY_PCT), its compile time and peak memory, each
  with a floor of its own (HUD's: compile latency 15%, memory 5%), and its check against
  eager (passed -> failed is a change by itself).

How a change is found (a locator proposes a night, a test judges it, and it must hold):
1. *Where*: two locators. KernelCPD from ruptures (PELT over a linear kernel: a
   least-squares step fit) cuts the series (a job's, or for a family the mean over its jobs
   of each job's nights in units of its own noise) with a BIC-like penalty (PENALTY x log
   of the nights). For a family, also the jobs' scan (job_scan): nights where at least
   MIN_TOUCHED of its jobs step the same way, which a mean over 100 jobs hides when 5 moved.
   ruptures was chosen over Apache Otava (a wheel, but pinning old versions of its needs
   and bringing heavy ones), signal-processing-algorithms (E-divisive, a source
   distribution with a build step) and asv's step detector (inside asv, not a library of
   its own): a maintained wheel with several detectors, whose KernelCPD runs in
   C (6 us a 30-night series: a 1,000-job history of 30 nights is thousands of series).
2. *Whether*: at a proposed night, the nights before it (at least BASELINE, up to
   TEST_NIGHTS or the cut before) against those after (up to TEST_NIGHTS or the next cut).
   For a family, each job's one-sided Welch test of its nights in noise widths, each night
   clipped at SCAN_CLIP (a preempted night is one night, not a change), combined over the
   jobs by Fisher's method, with at least MIN_TOUCHED jobs moved (p < MOVED_P each); the
   change's size where it happened from a two-group mixture of the jobs' shifts (unmoved
   and moved: the moved jobs alone overstate a small change), its interval by resampling
   the jobs; the shift over all the jobs by a random-effects model (DerSimonian-Laird) in
   the evidence. For a job, a t-test of the nights themselves (Welch's; Student's for compile
   time and peak memory, ONE_SPREAD_LEVELS) and its shift against its noise, the larger p
   counting. A p-value is multiplied by the positions a cut could
   have taken (choosing one makes any look significant); every proposed night of every
   series is one test, and the false discoveries over all of them are held at FDR_Q by
   Benjamini-Hochberg. A change needs at least PERSIST nights after its first; one in the
   first BASELINE nights read is not judged (too short a baseline).

The noise of a series is its own: the median absolute difference of successive nights
(robust to the step it may hold), so a family with noisy kernels needs a larger change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

# the detector's constants and one series' test; what other modules read as changes.X too
from sweeper.analysis.change_points import (FDR_Q, FLOOR, MIN_NOISE, MIN_TOUCHED, PENALTY, PERSIST,  # noqa: F401
                                            STEP_BUSY_PCT, VERDICTS, WINDOW, Candidate, Change, benjamini_hochberg,
                                            family_of, job_candidates, noise_of)
from sweeper.analysis.drift import episodes
from sweeper.analysis.family_changes import mixture_shift, pooled_candidates  # noqa: F401


def decide(candidates: Sequence[Candidate], q: float = FDR_Q) -> list[Change]:
    """The candidates that stand: q-value under `q` and a change at least its level's floor."""
    qs = benjamini_hochberg([c.p for c in candidates])
    out = []
    for c, qv in zip(candidates, qs):
        size = math.expm1(c.size)
        if qv > q or abs(size) < FLOOR.get(c.level, 0.0):
            continue
        share, significant = float("nan"), c.extra.get("significant", len(c.jobs))
        if "shifts" in c.extra:  # a family's interval: the jobs resampled, for those that stand only
            c.size, c.ci, share = mixture_shift(*c.extra["shifts"])
            size = math.expm1(c.size)
            significant = c.extra["significant"]
        out.append(Change(c.level, c.name, c.night, 100 * size, (100 * math.expm1(c.ci[0]), 100 * math.expm1(c.ci[1])),
                          c.p, c.jobs, c.running, c.evidence, q_value=float(qv), moved_share=share,
                          significant=significant,
                          drift_pct=c.extra["drift"].per_night_pct if "drift" in c.extra else float("nan")))
    return out


@dataclass
class History:
    """A nightly history in arrays: the nights' names in order, and per series its values a
    night (NaN where missing)."""

    nights: list[str]
    jobs: list[str]  # job keys
    labels: dict[str, str]  # job key -> label
    # (level, name) -> jobs x nights, for pooled levels (category, family)
    pooled: dict[tuple[str, str], tuple[list[str], np.ndarray]] = field(default_factory=dict)
    # (level, job key) -> nights, for per-job levels (kernels, step, compile, memory)
    per_job: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    accuracy: dict[str, list[str | None]] = field(default_factory=dict)  # job key -> passed/failed a night
    versions: list[dict[str, str]] = field(default_factory=list)  # a night's versions (torch, triton, ...)
    modules: dict[str, tuple[str, ...]] = field(default_factory=dict)  # family -> model modules it computes
    family_category: dict[str, str] = field(default_factory=dict)  # family -> its kernels' category
    status: dict[str, list[str | None]] = field(default_factory=dict)  # job key -> its status a night (None: not run)
    # per night, what the jobs' records say of the machine (median over the jobs): sm_clock_mhz,
    # host_busy_cores, slowed_rounds (sweeper/analysis/night_noise.explain)
    machine: dict[str, np.ndarray] = field(default_factory=dict)
    cleaned: Any = None  # night_noise.Cleaned: what find_changes took out before its tests


def find_changes(history: History, penalty: float = PENALTY, q: float = FDR_Q) -> list[Change]:
    """Every change of the history, families and categories first, then jobs, each list by
    size; accuracy changes (passed -> failed) are not tested, they stand."""
    from sweeper.analysis import night_noise

    judged, history.cleaned = night_noise.clean(history)  # machine nights and two-config kernels out first
    candidates: list[Candidate] = []
    for (level, name), (jobs, matrix) in judged.pooled.items():
        candidates += pooled_candidates(level, name, matrix, jobs, penalty)
    for (level, job), values in judged.per_job.items():
        candidates += job_candidates(level, job, values, penalty)
    changes, history.cleaned.episodes = episodes(
        decide(candidates, q), lambda key: noise_of(np.log(judged.per_job[key])) if key in judged.per_job else 0.0)
    changes += status_changes(history)
    for job, verdicts in history.accuracy.items():
        for t in range(1, len(verdicts)):
            if verdicts[t - 1] == "passed" and verdicts[t] == "failed":
                changes.append(Change("accuracy", job, t, float("nan"), (float("nan"), float("nan")), 0.0, (job,), 1,
                                      "its check against eager passed the night before and fails from this one"))
    for c in changes:
        if c.level == "family":
            c.modules = history.modules.get(c.name, ())
    order = {"status": 0, "accuracy": 0, "category": 1, "family": 2, "kernels": 3, "step": 4, "compile": 5, "memory": 6}
    return sorted(changes, key=lambda c: (order.get(c.level, 9), -abs(c.size_pct) if c.size_pct == c.size_pct else 0))


def status_changes(history: History) -> list[Change]:
    """A job that ran ok one night and failed, or was not in the next night's sweep: a change
    by itself (not tested), as a check against eager that starts failing."""
    out = []
    for job, seq in history.status.items():
        for t in range(1, len(seq)):
            if seq[t - 1] == "ok" and seq[t] != "ok":
                what = seq[t] or "missing"
                out.append(Change("status", job, t, float("nan"), (float("nan"), float("nan")), 0.0, (job,), 1, what))
    return out


def versions_between(history: History, night: int) -> dict[str, tuple[str, str]]:
    """What changed between the last night before `night` and `night`: name -> (before, after)."""
    if night <= 0 or night >= len(history.versions):
        return {}
    a, b = history.versions[night - 1], history.versions[night]
    return {k: (a.get(k, "?"), b.get(k, "?")) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def build_history(nights: Sequence[tuple[str, Any, Any]], modules_of: Mapping[str, Iterable[str]] | None = None
                  ) -> History:
    """A History from each night's (name, jobs table, step kernels table), oldest first (the
    tables as the aggregate writes them: tables.JOB_COLUMNS and the step's rows of
    KERNEL_COLUMNS)."""
    import pandas as pd

    names = [n for n, _, _ in nights]
    n = len(names)
    job_rows, fam_rows = [], []
    ids: dict[str, dict[str, int]] = {"key": {}, "family": {}, "category": {}}
    versions = []
    status: dict[str, list[str | None]] = {}
    all_labels: dict[str, str] = {}
    for t, (_, night_jobs, kernels) in enumerate(nights):
        for key, st, label in zip(night_jobs["key"], night_jobs["status"], night_jobs.get("label", night_jobs["key"])):
            row = status.setdefault(str(key), [None] * n)
            if row[t] != "ok":  # a repeat that ran ok makes the job ok that night
                row[t] = str(st)
            all_labels.setdefault(str(key), str(label))
        jobs = night_jobs[night_jobs["status"] == "ok"].drop_duplicates("key")
        key_of = dict(zip(jobs["job"], jobs["key"]))
        job_rows.append(jobs.assign(night=t))
        versions.append({col: str(jobs[col].dropna().mode().iloc[0])
                         for col in ("torch", "triton", "cuda", "gpu_driver", "sweeper_version", "python")
                         if col in jobs and jobs[col].notna().any()})
        k = kernels[kernels["job"].isin(key_of)]
        if len(k):
            fam_rows.append(_coded_rows(k, key_of, t, ids))
    jobs_all = pd.concat(job_rows, ignore_index=True) if job_rows else pd.DataFrame()
    labels = dict(zip(jobs_all.get("key", []), jobs_all.get("label", [])))
    history = History(names, sorted(labels), {**all_labels, **labels}, versions=versions, status=status)
    _pooled_series(history, fam_rows, ids, n)
    if len(jobs_all):
        _job_series(history, jobs_all, n)
    history.modules = {f: tuple(m) for f, m in (modules_of or {}).items()}
    return history


def _coded_rows(k, key_of: Mapping, night: int, ids: dict[str, dict[str, int]]):
    """A night's kernel rows as integer codes of names numbered once over the nights, a
    name's family told once (a 1,000-job night has 200,000 rows of 2,000 names; 30 of them
    are held at once)."""
    import pandas as pd

    def codes(values, name, of=lambda u: str(u)):
        got, uniq = pd.factorize(values)
        table = np.array([ids[name].setdefault(of(u), len(ids[name])) for u in uniq], dtype=np.int32)
        return table[got]

    return pd.DataFrame({"night": np.full(len(k), night, dtype=np.int32),
                         "key": codes(k["job"], "key", lambda u: str(key_of[u])),
                         "family": codes(k["kernel"].astype(str), "family", family_of),
                         "category": codes(k["category"].astype(str), "category"),
                         "ms": k["device_ms"].to_numpy(dtype=float)})


def _pooled_series(history: History, fam_rows: list, ids: dict[str, dict[str, int]], n: int) -> None:
    """Each category's and family's jobs x nights, from one wide table (name, job) x night:
    no Python loop over cells."""
    import pandas as pd

    if not fam_rows:
        return
    fams = pd.concat(fam_rows, ignore_index=True)
    name_of = {col: np.array(list(ids[col]), dtype=object) for col in ids}
    firsts = fams.drop_duplicates("family")
    history.family_category = dict(zip(name_of["family"][firsts["family"]], name_of["category"][firsts["category"]]))
    for col in ("category", "family"):
        wide = fams.groupby([col, "key", "night"], sort=True)["ms"].sum().unstack("night").reindex(columns=range(n))
        names_idx = wide.index.get_level_values(0).to_numpy()
        values = wide.to_numpy(dtype=float)
        keys_idx = name_of["key"][wide.index.get_level_values(1).to_numpy()]
        bounds = np.flatnonzero(np.r_[True, names_idx[1:] != names_idx[:-1], True])
        for a, b in zip(bounds[:-1], bounds[1:]):
            history.pooled[(col, str(name_of[col][names_idx[a]]))] = (list(keys_idx[a:b]), values[a:b])


def _job_series(history: History, jobs_all, n: int) -> None:
    """Each job's kernel time, step (where judged), cold compile, peak memory and accuracy a
    night, and what the records say of the machine a night."""
    import pandas as pd

    def series(col, where=None):
        rows = jobs_all if where is None else jobs_all[where]
        for key, part in rows.groupby("key", sort=False):
            v = np.full(n, np.nan)
            v[part["night"].to_numpy()] = pd.to_numeric(part[col], errors="coerce").to_numpy()
            yield key, v

    wanted = [("kernels", "device_ms", None)]
    if "gpu" in jobs_all:
        busy = pd.to_numeric(jobs_all.get("busy_pct"), errors="coerce").fillna(0) >= STEP_BUSY_PCT
        step_col = "steady_step_ms" if "steady_step_ms" in jobs_all else "compiled_step_ms"
        wanted.append(("step", step_col, busy & jobs_all["gpu"].notna()))
    if "compile_s" in jobs_all:
        cold = jobs_all.get("compile_state", pd.Series("cold", index=jobs_all.index)).fillna("cold") != "warm"
        wanted.append(("compile", "compile_s", cold))
    if "peak_memory_mb" in jobs_all:
        wanted.append(("memory", "peak_memory_mb", None))
    for level, col, where in wanted:
        for key, v in series(col, where):
            history.per_job[(level, key)] = v
    for col in ("sm_clock_mhz", "host_busy_cores", "slowed_rounds"):
        if col in jobs_all:
            by_night = pd.to_numeric(jobs_all[col], errors="coerce").groupby(jobs_all["night"]).median()
            history.machine[col] = by_night.reindex(range(n)).to_numpy(dtype=float)
    if "accuracy" in jobs_all:
        for key, part in jobs_all.groupby("key", sort=False):
            verdicts: list[str | None] = [None] * n
            for night, acc in zip(part["night"], part["accuracy"]):
                verdicts[int(night)] = acc if acc in ("passed", "failed") else None
            history.accuracy[key] = verdicts
