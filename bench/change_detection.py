"""How well the nightly history's change points are found: synthetic histories with noise
drawn from real repeated nights, regressions injected, A/A histories with none.

    python bench/change_detection.py [--histories 40] [--aa 20] [--nights 30] [--jobs 200]
                                     [--timing-jobs 1000] [--out bench/results/nightly/change_detection.md]

The asv and Otava baselines need asv and Apache Otava (`.venv/bin/pip install asv` and
`.venv/bin/pip install --no-deps apache-otava==0.8.0`: bench dependencies, not the project's;
Otava without its dependencies, whose pins (numpy 2.2.0, scipy <1.17, BigQuery, Postgres and
Slack clients) fight the project's, since its analysis needs only numpy and scipy). About
25 minutes on 2 cores at the defaults.

The noise: the committed H200 nights of one sweep run three times (tests/fixtures/h200/
nightly/night1..3: resnet18, resnet50, convnext_tiny, vit_small inference at batch 32, the
same build): each model's kernel families and their night-to-night spread (median 0.5%,
a tenth above 3.8%), each job's step spread; jobs of a history are those four models at
scaled levels, each (job, family) with the spread of its model's family times a lognormal
factor, and one night in 200 of a family preempted (1.2x to 2x). Injected, at a random
night from the 7th to the 4th last: kernel families 1-5% slower in 5-50 of the jobs that
run them; single jobs' step 3-20% slower (judged where the GPU is busy); compile time
20-50% and peak memory 10-30% larger; an accuracy check that starts failing.

Methods side by side, each on the same histories:
- new: sweeper/analysis/changes.py (`history changes`);
- pairwise: today's `history compare` of each night with the one before (a job flagged when
  its kernel time, or its step time where judged, moves at least 5% and more than its
  spread over the 7 nights before, as the history noise of a compare);
- HUD: PyTorch's dashboard rule, each metric against the median of the 6 nights before,
  flagged when two nights in a row violate (kernel and step time 5%, compile 15%, memory 5%);
- asv: asv's step fit (asv.step_detect: an L1 Potts model with its own penalty) of each
  job's kernel and step time, a step of 5% or more flagged at its first night;
- Otava per job: Apache Otava's analysis (otava.analysis.compute_change_points, its
  defaults) of each job's kernel and step time, compile time and peak memory;
- Otava pooled: the same analysis of each kernel family's and category's pooled series (the
  median over its jobs of each job's log time against its own median) and each job's step,
  compile and memory series.
A detection is right when it names an injected change (its family, or a job it touched, and
the series) at its night, a night early or two late; "exact" counts those at its very night.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import math
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sweeper.analysis import changes as ch  # noqa: E402

NIGHTS_DIR = ROOT / "tests" / "fixtures" / "h200" / "nightly"


# --- the noise of real repeated nights ----------------------------------------------------


@dataclass
class Model:
    name: str
    families: dict[str, tuple[str, float, float]]  # family -> (category, ms a step, log sd between nights)
    step_ms: float
    step_sd: float
    busy: bool  # its GPU at least changes.STEP_BUSY_PCT busy: its step time is judged
    kernels: list = field(default_factory=list)  # the record's step kernels as they are: (name, category, ms)


# Single records of more models (training ones, whose kernels include many reductions),
# their families' spread drawn from the repeated nights' spread
OTHER_RECORDS = ["busy/resnet50_0", "busy/small_0", "busy/small_1", "example/0", "example/2"]


def _families(rec: dict) -> tuple[dict[str, float], dict[str, str]]:
    fams: dict[str, float] = defaultdict(float)
    cats: dict[str, str] = {}
    for k in rec["step"]["kernels"]:
        fam = ch.family_of(k["name"])
        fams[fam] += k["device_ms"]
        cats[fam] = k["category"]
    return fams, cats


def real_models(rng: np.random.Generator | None = None) -> list[Model]:
    rng = rng or np.random.default_rng(0)
    by_model: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    cats: dict[str, str] = {}
    steps: dict[str, list[float]] = defaultdict(list)
    busy: dict[str, float] = {}
    raw: dict[str, list] = {}
    for night in ("night1", "night2", "night3"):
        for f in sorted((NIGHTS_DIR / night).glob("*.result.json.gz")):
            rec = json.loads(gzip.decompress(f.read_bytes()))
            model = rec["config"]["model"]
            steps[model].append((rec["timings"].get("steady_loop") or {}).get("step_ms") or 0)
            busy[model] = rec["step"].get("busy_pct") or 0
            raw.setdefault(model, [(k["name"], k["category"], k["device_ms"]) for k in rec["step"]["kernels"]])
            fams, c = _families(rec)
            cats.update(c)
            for fam, ms in fams.items():
                by_model[model][fam][night] = ms
    out, sds, step_sds = [], [], []
    for model, fams in by_model.items():
        fam_info = {}
        for fam, by in fams.items():
            if len(by) == 3 and all(v > 0 for v in by.values()):
                sd = max(float(np.std([math.log(v) for v in by.values()])), 0.002)
                sds.append(sd)
                fam_info[fam] = (cats[fam], float(np.median(list(by.values()))), sd)
        s = [math.log(v) for v in steps[model] if v]
        step_sds.append(max(float(np.std(s)), 0.005))
        out.append(Model(f"{model} infer", fam_info, float(np.median(steps[model])), step_sds[-1],
                         busy[model] >= ch.STEP_BUSY_PCT, raw[model]))
    for name in OTHER_RECORDS:
        rec = json.loads(gzip.decompress((NIGHTS_DIR.parent / f"{name}.result.json.gz").read_bytes()))
        fams, c = _families(rec)
        fam_info = {fam: (c[fam], ms, float(rng.choice(sds))) for fam, ms in fams.items() if ms > 0}
        step = (rec["timings"].get("steady_loop") or {}).get("step_ms") or rec["timings"]["compiled_step_ms"]["median"]
        out.append(Model(f"{rec['config']['model']} {rec['config']['mode'][:5]}", fam_info, float(step),
                         float(rng.uniform(0.01, 0.03)), (rec["step"].get("busy_pct") or 0) >= ch.STEP_BUSY_PCT,
                         [(k["name"], k["category"], k["device_ms"]) for k in rec["step"]["kernels"]]))
    return out


# --- a synthetic history ------------------------------------------------------------------


@dataclass
class Injection:
    kind: str  # family | step | compile | memory | accuracy
    night: int
    size: float
    family: str | None = None
    jobs: tuple[str, ...] = ()
    spread: float = 0.0  # the median night-to-night spread of the jobs it hit, before it (log units)

    @property
    def clear(self) -> bool:
        """At least twice the spread of the kernels it hit: a change that 30 nights can show."""
        return self.kind != "family" or abs(self.size) >= 2 * self.spread


@dataclass
class Synthetic:
    history: ch.History
    injections: list[Injection] = field(default_factory=list)
    # per job, per series, values (for the baselines): job -> series -> nights
    series: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    busy: dict[str, bool] = field(default_factory=dict)


@dataclass
class RealNoise:
    """The noise real nights have beyond the committed nights' jitter (the issue on the
    detector under real noise; docs/findings.md): each (job, family) jitters JITTER a night;
    a night in NEIGHBOUR_EVERY is a neighbour's, every job's memory-bound kernels about
    NEIGHBOUR slower (library kernels LIBRARY_PART of that, the step as much); a share
    TWO_CONFIG of the Triton families of a job has two configs GAP apart, the slower picked
    on a night with SLOW_P."""

    jitter: tuple[float, float] = (0.01, 0.03)
    neighbour_every: int = 10
    neighbour: tuple[float, float] = (0.08, 0.01)  # log shift: mean, sd
    library_part: float = 0.6
    two_config: float = 0.03
    gap: tuple[float, float] = (0.17, 0.37)
    slow_p: float = 0.3


TRITON_CATEGORIES = ("triton_pointwise", "triton_reduction", "triton_persistent_reduction")


def synthetic(models: list[Model], n_jobs: int, nights: int, rng: np.random.Generator,
              injections: list[str], real: RealNoise | None = None) -> Synthetic:
    jobs = [f"job{j:04d}" for j in range(n_jobs)]
    model_of = {j: models[i % len(models)] for i, j in enumerate(jobs)}
    scale = {j: float(rng.choice([0.25, 0.5, 1.0, 2.0])) for j in jobs}  # batch sizes
    busy = {j: model_of[j].busy for j in jobs}
    # per (job, family): nights of ms
    fam_values: dict[tuple[str, str], np.ndarray] = {}
    for j in jobs:
        m = model_of[j]
        for fam, (cat, ms, sd) in m.families.items():
            sd_j = min(0.08, sd * float(rng.lognormal(0, 0.4)))
            if real is not None:
                sd_j = max(sd_j, float(rng.uniform(*real.jitter)))
            x = ms * scale[j] * np.exp(rng.normal(0, sd_j, nights))
            if real is not None and cat in TRITON_CATEGORIES and rng.random() < real.two_config:
                x[rng.random(nights) < real.slow_p] *= 1 + float(rng.uniform(*real.gap))
            pre = rng.random(nights) < 0.005  # a preempted night of a family
            x[pre] *= rng.uniform(1.2, 2.0, pre.sum())
            fam_values[(j, fam)] = x
    steps = {j: model_of[j].step_ms * scale[j] * np.exp(rng.normal(0, model_of[j].step_sd, nights)) for j in jobs}
    compile_s = {j: 60 * np.exp(rng.normal(0, 0.05, nights)) for j in jobs}
    memory = {j: 1000 * scale[j] * np.exp(rng.normal(0, 0.005, nights)) for j in jobs}
    accuracy = {j: ["passed"] * nights for j in jobs}
    if real is not None:  # the neighbour's nights: every job at once
        for t in np.flatnonzero(rng.random(nights) < 1 / real.neighbour_every):
            shift = float(rng.normal(*real.neighbour))
            for (j, fam), x in fam_values.items():
                part = 1.0 if model_of[j].families[fam][0] in TRITON_CATEGORIES else real.library_part
                x[t] *= math.exp(shift * part * float(rng.normal(1, 0.1)))
            for j in jobs:
                steps[j][t] *= math.exp(shift * float(rng.normal(1, 0.1)))
    injected: list[Injection] = []
    for kind in injections:
        t = int(rng.integers(6, nights - ch.PERSIST))
        if kind == "family":
            size = float(rng.uniform(0.01, 0.05))
            runners: dict[str, list[str]] = defaultdict(list)
            for (j, fam) in fam_values:
                runners[fam].append(j)
            choices = [f for f, js in runners.items() if len(js) >= 5]
            fam = str(rng.choice(choices))
            k = int(min(len(runners[fam]), rng.integers(5, 51)))
            hit = tuple(sorted(rng.choice(runners[fam], k, replace=False)))
            spread = float(np.median([ch.noise_of(np.log(fam_values[(j, fam)][:t])) for j in hit]))
            for j in hit:
                fam_values[(j, fam)][t:] *= 1 + size
            injected.append(Injection("family", t, size, fam, hit, spread))
        elif kind.startswith("family:"):  # a fixed size and number of jobs: family:0.03:5
            _, size_s, k_s = kind.split(":")
            size, k = float(size_s), int(k_s)
            runners = defaultdict(list)
            for (j, fam) in fam_values:
                runners[fam].append(j)
            choices = [f for f, js in runners.items() if len(js) >= k]
            fam = str(rng.choice(choices))
            hit = tuple(sorted(rng.choice(runners[fam], k, replace=False)))
            spread = float(np.median([ch.noise_of(np.log(fam_values[(j, fam)][:t])) for j in hit]))
            for j in hit:
                fam_values[(j, fam)][t:] *= 1 + size
            injected.append(Injection("family", t, size, fam, hit, spread))
        else:
            j = str(rng.choice([x for x in jobs if busy[x]] if kind == "step" else jobs))
            if kind == "step":
                size = float(rng.uniform(0.03, 0.20))
                steps[j][t:] *= 1 + size
            elif kind == "compile":
                size = float(rng.uniform(0.2, 0.5))
                compile_s[j][t:] *= 1 + size
            elif kind == "memory":
                size = float(rng.uniform(0.1, 0.3))
                memory[j][t:] *= 1 + size
            else:
                size = float("nan")
                accuracy[j][t:] = ["failed"] * (nights - t)
            injected.append(Injection(kind, t, size, None, (j,)))
    h = ch.History([f"n{t:02d}" for t in range(nights)], jobs, {j: f"{model_of[j].name} {j}" for j in jobs})
    h.family_category = {fam: c for m in models for fam, (c, _, _) in m.families.items()}
    by_fam: dict[str, list[str]] = defaultdict(list)
    for (j, fam) in fam_values:
        by_fam[fam].append(j)
    for fam, js in by_fam.items():
        h.pooled[("family", fam)] = (js, np.vstack([fam_values[(j, fam)] for j in js]))
    by_cat: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
    for (j, fam), x in fam_values.items():
        cat = model_of[j].families[fam][0]
        by_cat[cat][j] = by_cat[cat].get(j, 0) + x
    for cat, per in by_cat.items():
        js = sorted(per)
        h.pooled[("category", cat)] = (js, np.vstack([per[j] for j in js]))
    series: dict[str, dict[str, np.ndarray]] = {}
    kernels_of: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(nights))
    for (j, _), x in fam_values.items():
        kernels_of[j] = kernels_of[j] + x
    for j in jobs:
        h.per_job[("kernels", j)] = kernels_of[j]
        if busy[j]:  # as `history changes` reads them: the step where the GPU follows it
            h.per_job[("step", j)] = steps[j]
        h.per_job[("compile", j)] = compile_s[j]
        h.per_job[("memory", j)] = memory[j]
        h.accuracy[j] = accuracy[j]
        series[j] = {"kernels": kernels_of[j], "step": steps[j], "compile": compile_s[j], "memory": memory[j]}
    return Synthetic(h, injected, series, busy)


# --- the baselines ------------------------------------------------------------------------

Detection = tuple[str, str, int]  # (series: family name, or "<series>:<job>"), the jobs-or-family key, night


def pairwise(s: Synthetic) -> list[tuple[str, tuple[str, ...], int]]:
    """Today's `history compare`, night against night: a GPU job by its kernel time (at least
    5% and beyond twice its spread over up to 7 nights before), and its accuracy verdict."""
    out = []
    for j, by in s.series.items():
        x = by["kernels"]
        for t in range(1, len(x)):
            hist = x[max(0, t - 8):t]
            spread = (hist.max() - hist.min()) / 2 / np.median(hist) if len(hist) >= 3 else 0.0
            change = x[t] / x[t - 1] - 1
            if abs(change) >= 0.05 and abs(change) > 2 * spread:
                out.append(("kernels", (j,), t))
        acc = s.history.accuracy[j]
        out += [("accuracy", (j,), t) for t in range(1, len(acc)) if acc[t - 1] == "passed" and acc[t] == "failed"]
    return out


def hud(s: Synthetic) -> list[tuple[str, tuple[str, ...], int]]:
    """PyTorch's dashboard rule: each metric against the median of the 6 nights before, a
    regression when two nights in a row violate (the step's speed 5%, compile latency 15%,
    memory 5%, the pass rate)."""
    limit = {"step": 0.05, "compile": 0.15, "memory": 0.05}
    out = []
    for j, by in s.series.items():
        for name, lim in limit.items():
            x = by[name]
            for t in range(6, len(x) - 1):
                base = np.median(x[t - 6:t])
                if x[t] / base - 1 >= lim and x[t + 1] / base - 1 >= lim and (t == 6 or x[t - 1] / np.median(
                        x[max(0, t - 7):t - 1]) - 1 < lim):
                    out.append((name, (j,), t))
        acc = s.history.accuracy[j]
        for t in range(1, len(acc)):
            if acc[t - 1] == "passed" and acc[t] == "failed":
                out.append(("accuracy", (j,), t))
    return out


def asv_steps(s: Synthetic) -> list[tuple[str, tuple[str, ...], int]]:
    from asv.step_detect import detect_steps

    out = []
    for j, by in s.series.items():
        for name in ("kernels", "step"):
            x = by[name]
            steps = detect_steps(list(x))
            for a, b in zip(steps, steps[1:]):
                if abs(b[2] / a[2] - 1) >= 0.05:
                    out.append((name, (j,), int(b[0])))
    return out


def _otava(x) -> list[int]:
    """The nights where Apache Otava's change-point analysis (otava.analysis: e-divisive
    means split in windows, then merged by a t-test) cuts a series, at Otava's own defaults
    (window 50, max p 0.001, no magnitude floor)."""
    from otava.analysis import compute_change_points

    x = np.asarray(x, dtype=float)
    if np.isnan(x).any():
        x = np.where(np.isnan(x), np.nanmedian(x), x)
    points, _ = compute_change_points(list(map(float, x)))
    return [int(p.index) for p in points]


def otava_per_job(s: Synthetic) -> list[tuple[str, tuple[str, ...], int]]:
    """Otava as a project runs it: one series a job and metric (kernel and step time,
    compile time, peak memory), each change point flagged."""
    return [(name, (j,), t) for j, by in s.series.items() for name in ("kernels", "step", "compile", "memory")
            for t in _otava(by[name])]


def otava_pooled(s: Synthetic) -> list[tuple[str, tuple[str, ...], int]]:
    """Otava on sweeper's pooling: each kernel family's and category's series the median over
    the jobs that run it of the job's log time against its own median (one series a
    family, not one a job), and each job's step, compile and memory series as they are."""
    out = []
    for (level, name), (jobs, matrix) in s.history.pooled.items():
        logs = np.log(np.where(matrix > 0, matrix, np.nan))
        pooled = np.nanmedian(logs - np.nanmedian(logs, axis=1, keepdims=True), axis=0)
        out += [(f"{level}:{name}", tuple(jobs), t) for t in _otava(pooled)]
    return out + [(name, (j,), t) for j, by in s.series.items() for name in ("step", "compile", "memory")
                  for t in _otava(by[name])]


def new(s: Synthetic) -> list[list[tuple[str, tuple[str, ...], int]]]:
    """`history changes`' analysis: one group a cause (sweeper/analysis/causes.py), its
    changes the group's detections."""
    from sweeper.analysis.causes import group

    out = []
    for cause in group(ch.find_changes(s.history)):
        dets = []
        for c in cause.changes:
            if c.level in ("family", "category"):
                dets.append((f"{c.level}:{c.name}", c.jobs, c.night))
            else:
                dets.append((c.level, (c.name,), c.night))
        out.append(dets)
    return out


# --- scoring ------------------------------------------------------------------------------


@dataclass
class Score:
    found: int = 0
    exact: int = 0
    injected: int = 0
    false: int = 0
    detections: int = 0  # causes said (a baseline's: each detection its own)
    by_kind: dict = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # kind -> [found, injected]
    clear: list = field(default_factory=lambda: [0, 0])  # [found, injected] of the changes twice their noise
    named: list = field(default_factory=lambda: [0, 0, 0])  # family changes found: [right jobs named, moved, named]


def _matches(det, inj: Injection, categories: dict[str, str]) -> bool:
    series, jobs, night = det
    if not (inj.night - 1 <= night <= inj.night + 2):
        return False
    if inj.kind == "family":
        if series == f"family:{inj.family}" or series == f"category:{categories.get(inj.family)}":
            return True
        return series == "kernels" and bool(set(jobs) & set(inj.jobs))
    return series == inj.kind and bool(set(jobs) & set(inj.jobs))


def _grouped(dets) -> list[list]:
    """A method's detections as groups: `new`'s causes as they are; a baseline's one
    detection a group, each distinct (series, jobs, night) once."""
    if dets and isinstance(dets[0], list):
        return dets
    events = {}
    for d in dets:
        events.setdefault((d[0], d[1] if not d[0].startswith(("family:", "category:")) else (), d[2]), d)
    return [[d] for d in events.values()]


def score(dets, s: Synthetic, categories: dict[str, str], sc: Score) -> None:
    groups = _grouped(dets)
    sc.injected += len(s.injections)
    for inj in s.injections:
        hits = [d for g in groups for d in g if _matches(d, inj, categories)]
        sc.by_kind[inj.kind][1] += 1
        sc.clear[1] += inj.clear
        if hits:
            sc.clear[0] += inj.clear
            sc.found += 1
            sc.by_kind[inj.kind][0] += 1
            sc.exact += any(h[2] == inj.night for h in hits)
            if inj.kind == "family":  # the jobs it names: the family's own lines where there are some
                own = [h for h in hits if h[0] == f"family:{inj.family}"] or hits
                named = set().union(*[set(h[1]) for h in own])
                sc.named[0] += len(named & set(inj.jobs))
                sc.named[1] += len(inj.jobs)
                sc.named[2] += len(named)
    sc.detections += len(groups)
    sc.false += sum(1 for g in groups if not any(_matches(d, inj, categories) for d in g for inj in s.injections))


def f1(sc: Score) -> tuple[float, float, float]:
    recall = sc.found / sc.injected if sc.injected else float("nan")
    precision = (sc.detections - sc.false) / sc.detections if sc.detections else float("nan")
    f = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return recall, precision, f


METHODS = {"new": new, "Otava per job": otava_per_job, "Otava pooled": otava_pooled, "pairwise": pairwise, "HUD": hud,
           "asv": asv_steps}


def run_scenario(models, n, nights, jobs, rng, injections, real: RealNoise | None = None) -> dict[str, Score]:
    cats = {fam: c for m in models for fam, (c, _, _) in m.families.items()}
    scores = {name: Score() for name in METHODS}
    for _ in range(n):
        s = synthetic(models, jobs, nights, rng, injections, real)
        for name, fn in METHODS.items():
            score(fn(s), s, cats, scores[name])
    return scores


# --- the tables' timing, and the 40-job case ------------------------------------------------


MODULE_ROWS = 208  # module-scope kernel rows a job, as real records give (the issue on what changes says)


def write_tables(root: Path, models: list[Model], n_jobs: int, nights: int, rng: np.random.Generator,
                 slower_category: tuple[str, float, int, int] | None = None,
                 slow_night: tuple[int, float] | None = None, two_config: float = 0.0,
                 real_shaped: bool = False, broken: tuple[int, int, str] | None = None) -> list[Path]:
    """`nights` sweep folders of `n_jobs` jobs' tables as the aggregate writes them (jobs and
    kernels, with the records they name), from the real models' kernels; `slower_category`:
    (category, factor, from night, jobs) made slower; `slow_night`: (night, factor) every
    job's kernels and step slower that night, the GPU's SM clock 10% lower (a neighbour);
    `two_config`: every fourth job's costliest Triton reduction family runs that much slower
    on a random third of the nights (Triton picking its other config); `broken`: (from night, job,
    "failed" or "missing") that job failed, or was not in the sweep, from that night on; `real_shaped`: each
    job's kernel rows as its record has them (every kernel, Inductor's numbers kept, about 270
    a training job) and MODULE_ROWS rows of module scope beside them, as real tables have."""
    import pandas as pd

    from sweeper.reporting import tables
    from sweeper.reporting.sweep_tables import records_manifest, write_table

    kernels_of = {m.name: (m.kernels if real_shaped and m.kernels else
                           [(fam, cat, ms) for fam, (cat, ms, _) in m.families.items()]) for m in models}
    out = []
    for t in range(nights):
        d = root / f"night{t:02d}"
        d.mkdir(parents=True, exist_ok=True)
        jobs_rows, k_rows = [], []
        for j in range(n_jobs):
            m = models[j % len(models)]
            total = 0.0
            gone = broken is not None and j == broken[1] and t >= broken[0]
            if gone and broken[2] == "missing":
                continue
            red = [k for k in kernels_of[m.name] if k[1] == "triton_reduction"]
            flip = max(red, key=lambda k: k[2])[0] if red and two_config and j % 4 == 1 else None
            neighbour = slow_night[1] if slow_night and t == slow_night[0] else 1.0
            for name, cat, ms in kernels_of[m.name]:
                v = ms * math.exp(rng.normal(0, 0.01)) * neighbour
                if slower_category and cat == slower_category[0] and t >= slower_category[2] and j % 2 == 0:
                    v *= slower_category[1]
                if name == flip and (t * 7 + j) % 3 == 0:
                    v *= 1 + two_config
                total += v
                k_rows.append({"job": j, "label": f"{m.name} #{j}", "scope": "step", "kernel": name, "category": cat,
                               "device_ms": v, "count": 1.0, "share_pct": None, "pct_of_wall": None, "source": None,
                               "model_modules": None})
            for i in range(MODULE_ROWS if real_shaped else 0):
                name, cat, ms = kernels_of[m.name][i % len(kernels_of[m.name])]
                k_rows.append({"job": j, "label": f"{m.name} #{j}", "scope": f"module:layer{i % 12}", "kernel": name,
                               "category": cat, "device_ms": ms, "count": 1.0, "share_pct": None, "pct_of_wall": None,
                               "source": None, "model_modules": None})
            row = {c: None for c in tables.JOB_COLUMNS}
            row.update({"job": j, "key": f"model={m.name},n={j}", "label": f"{m.name} #{j}",
                        "status": "failed" if gone else "ok",
                        "model": m.name.split()[0], "device_ms": total,
                        "compiled_step_ms": m.step_ms * math.exp(rng.normal(0, 0.02)) * neighbour,
                        "sm_clock_mhz": 1980.0 / (1.1 if neighbour != 1.0 else 1.0),
                        "steady_step_ms": None, "busy_pct": 40.0, "gpu": "NVIDIA H200", "torch": "2.11.0",
                        "compile_s": 60.0, "peak_memory_mb": 1000.0, "kernel_launches": 100.0, "accuracy": "passed"})
            jobs_rows.append(row)
        summary = {"sweep_dir": str(d), "command": [], "started_at": f"2026-11-{1 + t:02d}T02:00:00" if t < 30 else
                   f"2026-12-{t - 29:02d}T02:00:00", "elapsed_s": 1.0, "complete": True,
                   "counts": {"ok": n_jobs, "failed": 0, "skipped": 0, "cancelled": 0},
                   "jobs": [{"num": j, "overrides": [f"n={j}"], "status": "ok", "dir": str(d / str(j))}
                            for j in range(n_jobs)
                            if not (broken and broken[2] == "missing" and j == broken[1] and t >= broken[0])]}
        (d / "summary.json").write_text(json.dumps(summary))
        (d / "tables").mkdir(exist_ok=True)
        jobs = pd.DataFrame(jobs_rows, columns=list(tables.JOB_COLUMNS))
        kernels = pd.DataFrame(k_rows, columns=list(tables.KERNEL_COLUMNS))
        manifest = records_manifest(d)
        write_table(jobs, d / "tables" / "jobs.parquet", manifest)
        write_table(kernels, d / "tables" / "kernels.parquet", manifest)
        out.append(d)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--histories", type=int, default=40)
    ap.add_argument("--aa", type=int, default=20)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--timing-jobs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    models = real_models(np.random.default_rng(a.seed))
    real = RealNoise()
    lines = [f"# Change points over nightly histories: the new method against its peers",
             "", f"`python bench/change_detection.py --histories {a.histories} --aa {a.aa} --nights {a.nights} "
                 f"--jobs {a.jobs} --timing-jobs {a.timing_jobs} --seed {a.seed}` "
                 f"({time.strftime('%Y-%m-%d')}; thresholds PENALTY={ch.PENALTY}, FDR_Q={ch.FDR_Q})", "",
             "Kernel families and their spread from the committed H200 nights run three times: "
             + ", ".join(f"{m.name} ({len(m.families)} kernel families, median spread "
                         f"{100 * float(np.median([sd for _, _, sd in m.families.values()])):.2f}%, step spread "
                         f"{100 * m.step_sd:.1f}%)" for m in models) + ".", "",
             f"**Real nights' noise** on top (RealNoise): each (job, family) jitters at least "
             f"{100 * real.jitter[0]:.0f}-{100 * real.jitter[1]:.0f}% a night; one night in {real.neighbour_every} a "
             f"neighbour's, every job's Triton kernels and step about {100 * real.neighbour[0]:.0f}% slower (library "
             f"kernels {real.library_part:.0%} of that); {100 * real.two_config:.0f}% of a job's Triton families with "
             f"two configs {100 * real.gap[0]:.0f}-{100 * real.gap[1]:.0f}% apart, the slower picked on "
             f"{100 * real.slow_p:.0f}% of the nights. Every scenario below has it but the last A/A line.", "",
             "\"Clear\": a family change at least twice the night-to-night spread of the kernels it hit before "
             "it (a 3% change of a family that spreads 6% a night is under its noise in 30 nights); every other "
             "kind counts as clear. "
             "A detection is right when it names an injected change (its family or category, or a job it touched, "
             "and the series) at its night, a night early or two late. The new method is scored by cause "
             "(sweeper/analysis/causes.py): one injected change found as one change; a cause that matches no "
             "injection is one false flag, however many series it groups. A baseline's detections count one by one.",
             ""]
    t0 = time.time()

    def table(got: dict[str, Score], head: str) -> None:
        nonlocal lines
        lines += [head, "", "| method | recall | of the clear ones | precision | false flags | exact night | jobs named: "
                  "recall, precision | recall by kind |", "|---|---|---|---|---|---|---|---|"]
        for name, sc in got.items():
            r, p, _ = f1(sc)
            kinds = ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(sc.by_kind.items()))
            named = (f"{100 * sc.named[0] / sc.named[1]:.0f}%, {100 * sc.named[0] / max(sc.named[2], 1):.0f}%"
                     if sc.named[1] else "-")
            clear = f"{sc.clear[0]}/{sc.clear[1]}" if sc.clear[1] else "-"
            lines.append(f"| {name} | {100 * r:.1f}% | {clear} | {100 * p:.1f}% | {sc.false} | "
                         f"{100 * sc.exact / sc.found if sc.found else float('nan'):.0f}% | {named} | {kinds} |")
        lines.append("")

    table(run_scenario(models, a.histories, a.nights, a.jobs, rng,
                       ["family", "family", "step", "compile", "memory", "accuracy"], real),
          f"## Mixed regressions\n\n{a.histories} histories of {a.nights} nights x {a.jobs} jobs, each with two "
          "kernel-family changes (1-5% in 5-50 jobs), a step change (3-20%), a compile-time (20-50%), a memory "
          "(10-30%) and an accuracy change.")
    for label, kinds in (("a 3% family change in 20 jobs, and compile, memory and accuracy changes",
                          ["family:0.03:20", "compile", "memory", "accuracy"]),
                         ("a 3% family change in 5 jobs", ["family:0.03:5"]),
                         ("a 1% family change in 20 jobs", ["family:0.01:20"])):
        table(run_scenario(models, a.histories, a.nights, a.jobs, rng, kinds, real),
              f"## Recall of {label}\n\n{a.histories} histories of {a.nights} nights x {a.jobs} jobs.")
    rates = {}
    lines += ["## A/A histories (no change)", "",
              f"{a.aa} histories of {a.nights} nights x {a.jobs} jobs: every flag is false.", "",
              "| noise | method | false flags | per 100 nights |", "|---|---|---|---|"]
    for noise_name, noise in (("real nights' noise", real), ("the committed nights' jitter only", None)):
        for name, sc in run_scenario(models, a.aa, a.nights, a.jobs, rng, [], noise).items():
            rate = 100 * sc.false / (a.aa * a.nights)
            if noise is real:
                rates[name] = rate
            lines.append(f"| {noise_name} | {name} | {sc.false} | {rate:.2f} |")
    lines += ["", f"(the quality runs took {time.time() - t0:.0f} s)"]
    # history changes over the timing size, reading tables
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        import resource

        t1 = time.time()
        write_tables(Path(tmp) / "big", models, a.timing_jobs, a.nights, rng, real_shaped=True)
        wrote = time.time() - t1
        rows = sum(len(m.kernels) for m in models) / len(models) + MODULE_ROWS
        t2 = time.time()
        proc = subprocess.run([sys.executable, "-m", "sweeper.history", "changes", str(Path(tmp) / "big"),
                               "--last", str(a.nights)], cwd=ROOT, capture_output=True, text=True)
        took = time.time() - t2
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        lines += ["", "## `history changes` at a cluster's size", "",
                  f"{a.nights} nights x {a.timing_jobs} real-shaped jobs (each job's kernel rows as its record has "
                  f"them and {MODULE_ROWS} module rows: about {rows:.0f} kernel rows a job), from their tables "
                  f"(written in {wrote:.0f} s): `python -m sweeper.history changes ROOT --last {a.nights}` took "
                  f"**{took:.1f} s** and at most **{peak_mb:.0f} MB** (the largest child's peak resident memory; "
                  f"exit {proc.returncode}); its first lines:", "", "```", *proc.stdout.splitlines()[:4], "```"]
        # the 40-job case: Triton reductions 4% slower in 20 of 40 jobs from one night on
        for label, slower in (("with the change", ("triton_reduction", 1.04, 8, 20)), ("without it", None)):
            rng40 = np.random.default_rng(a.seed + 40)
            folder = Path(tmp) / ("forty_with" if slower else "forty_without")
            write_tables(folder, models, 40, 12, rng40, slower)
            proc = subprocess.run([sys.executable, "-m", "sweeper.history", "changes", str(folder), "--top", "3"],
                                  cwd=ROOT, capture_output=True, text=True)
            lines += ["", f"### 40 jobs a night, 12 nights, Triton reductions 4% slower in every other job from night08: {label}",
                      "", "```", *proc.stdout.splitlines()[:4], "```"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
        (a.out.with_suffix(".json")).write_text(json.dumps({"aa_false_flags_per_100_nights": rates,
                                                            "nights": a.nights, "jobs": a.jobs, "histories": a.aa,
                                                            "noise": dataclasses.asdict(real),
                                                            "penalty": ch.PENALTY, "fdr_q": ch.FDR_Q}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
