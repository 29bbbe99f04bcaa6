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
from sweeper.analysis.kernels import microbench_failures
from sweeper.analysis.kernel_diff import source_hash
from sweeper.analysis.regression import step_noise_pct
from sweeper.record import Record, ran_config, storage_missed
# the tables' columns (columns.py) and the jobs' labels (labels.py), read as tables.X too
from sweeper.reporting.columns import (BENCH_COLUMNS, CATEGORY_COLUMNS, DECISION_COLUMNS, JOB_COLUMNS,  # noqa: F401
                                       JOB_SHARE_PREFIX, KERNEL_COLUMNS, MODEL_MODULE_COLUMNS, RECOVERABLE_COLUMNS)
from sweeper.reporting.headline import headline
from sweeper.reporting.labels import (distinct_labels, job_key, job_label, job_num, key_fields,  # noqa: F401
                                      key_without, record_label, unique_labels)
from sweeper.reporting.compile_state import compile_s_before, compile_state, cpp_builds


def _microbench_failed(rec: Mapping[str, Any]) -> dict:
    """JOB_COLUMNS["microbench_kernels"], ["microbench_failed"] and ["microbench_error"], from a record."""
    table = rec.get("kernel_table") or {}
    failed = microbench_failures(table)
    return {"microbench_kernels": None if failed is None else len(table.get("rows") or []),
            "microbench_failed": None if failed is None else len(failed),
            "microbench_error": failed[0] if failed else None}


def _ran_again(job: Mapping[str, Any]) -> str | None:
    """"attempt N on HOST" where Ray ran the job's task again after its worker or node was lost."""
    again = job.get("retried")
    return f"attempt {again.get('attempt')} on {again.get('host')}" if isinstance(again, dict) else None


def _lease(rec: Mapping[str, Any]) -> dict:
    """JOB_COLUMNS["jobs_per_gpu"], ["lease_wait_s"], ["paused_others_s"] and
    ["paused_by_others_s"], from a record's timings.gpu_lease."""
    lease = (rec.get("timings") or {}).get("gpu_lease")
    if not lease or "gpu" not in lease:
        return {"jobs_per_gpu": None, "lease_wait_s": None, "paused_others_s": None, "paused_by_others_s": None}
    waited = (lease.get("wait_s") or 0) + ((lease.get("benchmarks") or {}).get("wait_s") or 0)
    paused = lease.get("paused_others") or {}
    return {"jobs_per_gpu": lease.get("jobs_per_gpu"), "lease_wait_s": round(waited, 3),
            "paused_others_s": paused.get("s"), "paused_by_others_s": lease.get("paused_by_others_s")}


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


def compile_split_columns(split: Mapping[str, Any]) -> dict:
    """The compile's seconds by what max-autotune adds (probes.compile_split): its template
    choices (timing, precompiling, epilogue-fusion benchmarks), coordinate descent, and
    Triton kernels' config choice; None each where the record has no split."""
    if not split:
        return {"template_tuning_s": None, "coordinate_descent_s": None, "kernel_autotuning_s": None}
    templates = sum(float(split.get(k) or 0.0) for k in ("template_autotuning_s", "template_precompiling_s",
                                                          "fusion_benchmarking_s"))
    return {"template_tuning_s": round(templates, 3), "coordinate_descent_s": split.get("coordinate_descent_s"),
            "kernel_autotuning_s": split.get("kernel_autotuning_s")}


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
        **_microbench_failed(rec),
        **_lease(rec),
        "shared_gpu_with": shared,
        "rerun_alone": job.get("rerun_alone"),
        "ran_again": _ran_again(job),
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


def model_code_columns(rec: Mapping[str, Any]) -> dict:
    """The jobs table's columns of what the step compiled into and whether it computes what
    eager does (JOB_COLUMNS), None where not recorded."""
    mc = rec.get("model_code") or {}
    graphs = mc.get("graphs") or {}
    outside = (mc.get("unattributed") or {}).get(OUTSIDE_GRAPHS) if mc else None
    inside = (mc.get("device_ms") or 0.0) - (outside or 0.0)
    acc = rec.get("accuracy") or {}
    verdict = (("passed" if acc["passed"] else "failed") if acc.get("checked")
               else f"not checked: {acc.get('reason')}" if acc else None)
    failed = (f"{acc['failed_count']} of {acc['compared']} (tolerance {acc['tolerance']:g}): " + ", ".join(acc["failed"])
              if acc.get("checked") and not acc["passed"] else None)
    return {"accuracy": verdict, "accuracy_failed": failed,
            "graph_breaks": len(graphs["graph_breaks"]) if "graph_breaks" in graphs else None,
            "recompiles": graphs.get("recompiles"),
            "model_code_pct": mc["attributed_ms"] / inside * 100 if mc and inside > 0 else None,
            "outside_graphs_ms": (outside or 0.0) if mc else None,
            "outside_graphs_what": outside_what(mc) if mc else None,
            "storage_missed": storage_missed(rec)}


def outside_what(mc: Mapping[str, Any]) -> str | None:
    """What most of a step's time outside the compiled graphs is, with its share
    ("autograd's AccumulateGrad (...) 96%"); None where the record does not say."""
    parts = mc.get("outside") or {}
    total = sum(parts.values())
    if not parts or total <= 0:
        return None
    what, ms = max(parts.items(), key=lambda kv: kv[1])
    return what if ms >= total * 0.995 else f"{what} {ms / total * 100:.0f}%"


def roofline_columns(rec: Mapping[str, Any]) -> dict:
    """The jobs table's roofline columns (JOB_COLUMNS); None where not recorded."""
    line = rec.get("roofline") or {}
    roofs = line.get("roofs") or {}
    peaks = roofs.get("matmul_tflops") or {}
    return {"bound_ms": line.get("bound_ms"), "recoverable_ms": line.get("recoverable_ms"),
            "roofline_known_pct": line["known_ms"] / line["device_ms"] * 100 if line.get("device_ms") else None,
            "copy_gbps": roofs.get("copy_gbps"),
            "roofs_loaded": (f"{roofs['load']:g} {roofs.get('load_unit') or ''}".strip()
                             if roofs.get("loaded") and isinstance(roofs.get("load"), (int, float)) else None),
            "matmul_tflops": ", ".join(f"{d} {v:.1f}" for d, v in peaks.items()) if peaks else None}


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


def gpu_state_columns(state: dict) -> dict:
    """The jobs table's figures of the GPU's state over the steady loop (analysis/gpu_state.py)."""
    sm = state.get("sm_mhz") or {}
    return {"sm_clock_mhz": sm.get("median"), "sm_clock_min_mhz": sm.get("min"),
            "clocks_moved": state.get("clocks_moved"),
            "slowed_rounds": len(state["slowed_rounds"]) if "slowed_rounds" in state else None,
            "gpu_temp_max_c": (state.get("temp_c") or {}).get("max"),
            "gpu_power_w": (state.get("power_w") or {}).get("median")}
