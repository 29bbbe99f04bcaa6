"""Tidy tables of a sweep, built from its result records (pure: records in, DataFrames out).

Three tables, one row per:
- job (JOB_COLUMNS): configuration, status, timings, busy percentages, category shares;
- job x scope x category (CATEGORY_COLUMNS): the step and each module;
- job x scope x kernel (KERNEL_COLUMNS);
- job x selected kernel, with its microbenchmarks (BENCH_COLUMNS);
- job x model module x pass x category (MODEL_MODULE_COLUMNS): the step's time by model code;
- job x launch site (RECOVERABLE_COLUMNS): the step's launches against the device's roofs,
  most to win first (sweeper/analysis/roofline.py);
- job x tuned op (DECISION_COLUMNS): max-autotune's decisions an autotune=on job made, against
  their noise (sweeper/analysis/autotune_decisions.py).
Each table's columns are documented once, in sweeper/reporting/columns.py; sweeper/aggregate.py writes them as
Parquet and CSV into <sweep>/tables/.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any, Mapping

import pandas as pd

from sweeper.analysis.attribution import OUTSIDE as OUTSIDE_GRAPHS
from sweeper.analysis.breakdown import nvml_expected_pct
from sweeper.analysis.categories import CATEGORIES
from sweeper.analysis.kernel_diff import source_hash
from sweeper.analysis.regression import step_noise_pct
from sweeper.record import Record, ran_config
# the tables' columns (columns.py) and the jobs' labels (labels.py), read as tables.X too
from sweeper.reporting.columns import (BENCH_COLUMNS, CATEGORY_COLUMNS, DECISION_COLUMNS, JOB_COLUMNS,  # noqa: F401
                                       JOB_SHARE_PREFIX, KERNEL_COLUMNS, MODEL_MODULE_COLUMNS, RECOVERABLE_COLUMNS)
from sweeper.reporting.headline import headline
from sweeper.reporting.job_columns import (compile_split_columns, gpu_state_columns, lease_columns,  # noqa: F401
                                           microbench_failed_columns, model_code_columns, outside_what, ran_again,
                                           roofline_columns)
from sweeper.reporting.labels import (distinct_labels, job_key, job_label, job_num, key_fields,  # noqa: F401
                                      key_without, record_label, unique_labels)
from sweeper.reporting.compile_state import compile_s_before, compile_state, cpp_builds


def shared_gpu(records: list[Record]) -> dict[int, str | None]:
    """Job -> the other jobs that held the same GPU (its lease's key) while it ran, as
    space-separated numbers (None: it ran alone there, or had no lease)."""
    spans = {}
    for rec in records:
        job, lease = rec.get("job") or {}, (rec.get("timings") or {}).get("gpu_lease") or {}
        try:
            start, end = (datetime.fromisoformat(job[k]).timestamp() for k in ("started_at", "finished_at"))
        except (KeyError, TypeError, ValueError):
            continue
        if lease.get("gpu"):
            spans[job_num(rec)] = (f"{job.get('host')}/{lease['gpu']}", start, end)
    out: dict[int, str | None] = {}
    for num, (gpu, start, end) in spans.items():
        others = sorted(o for o, (g, s, e) in spans.items() if o != num and g == gpu and s < end and start < e)
        out[num] = " ".join(str(o) for o in others) or None
    return out


def job_row(rec: Record, label: str | None, shared: str | None) -> dict:
    """One job's row of the jobs table (JOB_COLUMNS, then the share_<category> columns);
    label and shared_gpu_with as unique_labels and shared_gpu give them over the sweep."""
    cfg, step = ran_config(rec), rec.get("step") or {}
    env, job = rec.get("environment") or {}, rec.get("job") or {}
    row = {
        "job": job_num(rec),
        "label": label,
        "key": job_key(cfg),
        **{k: cfg.get(k) for k in ("model", "mode", "batch_size", "image_size", "amp", "amp_dtype",
                                   "cudagraphs", "autotune", "device", "python", "compile_mode")},
        "status": rec.get("status"),
        "reason": rec.get("reason"),
        "phase": rec.get("phase"),
        **headline(rec),  # the figures summary.json shows, under the same names
        "device_ms": step.get("device_ms"),
        "kernel_launches": step.get("kernel_launches"),
        "compiled_graphs": sum(1 for m in rec.get("modules") or [] if m.get("role") in ("forward", "inference"))
        if rec.get("modules") else None,
        **model_code_columns(rec),
        **roofline_columns(rec),
        "nvml_expected_pct": nvml_expected_pct(step.get("busy_pct"), step.get("kernel_launches"),
                                               step.get("busy_wall_ms")) if env.get("gpu") else None,
        "steady_step_ms": ((rec.get("timings") or {}).get("steady_loop") or {}).get("step_ms"),
        **gpu_state_columns(((rec.get("timings") or {}).get("steady_loop") or {}).get("gpu_state") or {}),
        "autotune_seeded": ((rec.get("timings") or {}).get("autotune_store") or {}).get("seeded_entries"),
        "compile_state": compile_state(rec.get("timings") or {}),
        "compile_s_before": compile_s_before(rec.get("timings") or {}),
        "cpp_builds": cpp_builds(rec.get("timings") or {}),
        **compile_split_columns((rec.get("timings") or {}).get("compile_split_s") or {}),
        "compile_bytes": ((rec.get("timings") or {}).get("compile_store") or {}).get("job_bytes"),
        "step_noise_pct": step_noise_pct(rec.get("timings") or {}),
        **microbench_failed_columns(rec),
        **lease_columns(rec),
        "shared_gpu_with": shared,
        "rerun_alone": job.get("rerun_alone"),
        "ran_again": ran_again(job),
        "gpu": env.get("gpu"),
        "torch": env.get("torch"),
        "triton": env.get("triton"),
        "cuda": env.get("cuda"),
        "gpu_driver": env.get("driver"),
        "sweeper_version": job.get("sweeper_version"),
        "duration_s": job.get("duration_s"),
        "dir": job.get("dir"),
        "log": (rec.get("artifacts") or {}).get("log"),
    }
    cats = step.get("categories") or {}
    for cat in CATEGORIES:
        row[JOB_SHARE_PREFIX + cat] = (cats.get(cat) or {}).get("share_of_device_pct", 0.0) if cats else None
    return row


def jobs_frame(rows: list[dict]) -> pd.DataFrame:
    """The jobs table from job_row()s, in job order."""
    columns = list(JOB_COLUMNS) + [JOB_SHARE_PREFIX + c for c in CATEGORIES]
    df = pd.DataFrame(rows, columns=columns)
    if df["speedup"].isna().any():  # older records: derive it where both times exist
        derived = df["eager_step_ms"] / df["compiled_step_ms"]
        df["speedup"] = df["speedup"].fillna(derived)
    return df.sort_values("job", kind="stable").reset_index(drop=True)


def jobs_table(records: list[Record]) -> pd.DataFrame:
    names, shared = unique_labels(records), shared_gpu(records)
    return jobs_frame([job_row(rec, names[job_num(rec)], shared.get(job_num(rec))) for rec in records])


def _scopes_of(rec: Record, label: str | None):
    """(job, label, scope, role, breakdown) for a job's step and each module that has a
    breakdown."""
    job = job_num(rec)
    if rec.get("step"):
        yield job, label, "step", "step", rec["step"]
    for m in rec.get("modules") or []:
        if m.get("breakdown"):
            yield job, label, m["label"], m.get("role"), m["breakdown"]


def category_rows(rec: Record, label: str | None) -> list[dict]:
    return [{"job": job, "label": lab, "scope": scope, "role": role, "category": cat,
             "device_ms": c.get("device_ms"), "share_pct": c.get("share_of_device_pct"),
             "pct_of_wall": c.get("pct_of_wall"), "launches": c.get("launches")}
            for job, lab, scope, role, b in _scopes_of(rec, label)
            for cat, c in (b.get("categories") or {}).items()]


def categories_table(records: list[Record]) -> pd.DataFrame:
    names = unique_labels(records)
    rows = [row for rec in records for row in category_rows(rec, names[job_num(rec)])]
    return pd.DataFrame(rows, columns=list(CATEGORY_COLUMNS))


def kernel_rows(rec: Record, label: str | None) -> list[dict]:
    sources = {k.get("name"): source_hash(k.get("kernel_path"))
               for k in ((rec.get("kernel_table") or {}).get("rows") or [])}
    # kernel names repeat (a job's step and its modules, jobs of one model, library kernels in
    # every job): one string object each, not one a row (a 1,000-job table holds 800,000 rows)
    return [{"job": job, "label": lab, "scope": scope, "kernel": _interned(k.get("name")),
             "category": _interned(k.get("category")),
             "device_ms": k.get("device_ms"), "typical_ms": k.get("typical_ms"), "outlier_runs": k.get("outlier_runs"),
             "count": k.get("count"), "share_pct": k.get("share_of_device_pct"),
             "pct_of_wall": k.get("pct_of_wall"), "source": sources.get(k.get("name")),
             "model_modules": _interned("; ".join(k["model_modules"])) if k.get("model_modules") else None,
             "model_source": _interned(k.get("model_source")),
             "model_aten": _interned(", ".join(k["model_aten"])) if k.get("model_aten") else None,
             "model_how": _interned(k.get("model_how"))}
            for job, lab, scope, _, b in _scopes_of(rec, label)
            for k in b.get("kernels") or []]


def kernels_table(records: list[Record]) -> pd.DataFrame:
    names = unique_labels(records)
    rows = [row for rec in records for row in kernel_rows(rec, names[job_num(rec)])]
    return pd.DataFrame(rows, columns=list(KERNEL_COLUMNS))


def _interned(value):
    return sys.intern(value) if isinstance(value, str) else value


def bench_rows(rec: Record, label: str | None) -> list[dict]:
    if rec.get("status") != "ok":
        return []
    return [{"job": job_num(rec), "label": label, "kernel": k.get("name"),
             **{c: k.get(c) for c in BENCH_COLUMNS if c not in ("job", "label", "kernel", "model_modules")},
             "model_modules": "; ".join(k["model_modules"]) if k.get("model_modules") else None}
            for k in ((rec.get("kernel_table") or {}).get("rows") or []) if "share_of_triton_pct" in k]


def recoverable_rows(rec: Mapping[str, Any], job: int) -> list[dict]:
    """A job's launch sites with the most to win (RECOVERABLE_COLUMNS), as its record keeps them."""
    return [{"job": job, "label": None, **{c: r.get(c) for c in RECOVERABLE_COLUMNS if c not in ("job", "label")}}
            for r in (rec.get("roofline") or {}).get("rows") or []]


def decision_rows(rec: Mapping[str, Any], job: int) -> list[dict]:
    """An autotune=on job's own decisions (DECISION_COLUMNS), as its record keeps them."""
    return [{"job": job, "label": None, **{c: r.get(c) for c in DECISION_COLUMNS if c not in ("job", "label", "sites")},
             "sites": "; ".join(r.get("sites") or []) or None}
            for r in (rec.get("autotune_decisions") or {}).get("rows") or []]


OUTSIDE_ROW = "(outside compiled graphs)"  # the modules table's row of eager code between the graphs


def model_module_rows(rec: Record, label: str | None) -> list[dict]:
    """The step's time by model module, pass and category (MODEL_MODULE_COLUMNS), and a
    row OUTSIDE_ROW for the kernel time outside compiled graphs."""
    job = job_num(rec)
    mc = rec.get("model_code") or {}
    rows = [{"job": job, "label": label, "module": _interned(r["module"]), "class": _interned(r["class"]),
             "pass": _interned(r["pass"]), "category": _interned(r["category"]), "device_ms": r["device_ms"],
             "typical_ms": r.get("typical_ms"), "launches": r.get("launches"), "source": _interned(r.get("source"))}
            for r in mc.get("rows") or []]
    outside = (mc.get("unattributed") or {}).get(OUTSIDE_GRAPHS)
    if outside:
        what = outside_what(mc)  # autograd's AccumulateGrad copies: said, not left to guess
        rows.append({"job": job, "label": label, "module": f"(outside compiled graphs: {what})" if what else OUTSIDE_ROW,
                     "class": None, "pass": "step",
                     "category": "other", "device_ms": outside, "typical_ms": None, "launches": None, "source": None})
    return rows


def microbench_table(records: list[Record]) -> pd.DataFrame:
    """The Triton kernels each GPU job selected and benchmarked (sweeper/analysis/kernels.py
    select_kernels, tasks/kernel_bench.py); CPU jobs have no such rows."""
    names = unique_labels(records)
    rows = [row for rec in records for row in bench_rows(rec, names[job_num(rec)])]
    return pd.DataFrame(rows, columns=list(BENCH_COLUMNS))


