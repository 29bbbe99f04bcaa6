"""The jobs table's columns that a record's parts give (pure): what the step compiled into
and whether it computes what eager does, the roofline, the GPU's state over the steady
loop, the GPU lease, the compile's split, the microbenchmarks' failures and a job that ran
again (JOB_COLUMNS, sweeper/reporting/columns.py); sweeper/reporting/tables.job_row puts
them together."""

from __future__ import annotations

from typing import Any, Mapping

from sweeper.analysis.attribution import OUTSIDE as OUTSIDE_GRAPHS
from sweeper.analysis.kernels import microbench_failures
from sweeper.record import storage_missed


def microbench_failed_columns(rec: Mapping[str, Any]) -> dict:
    """JOB_COLUMNS["microbench_kernels"], ["microbench_failed"] and ["microbench_error"], from a record."""
    table = rec.get("kernel_table") or {}
    failed = microbench_failures(table)
    return {"microbench_kernels": None if failed is None else len(table.get("rows") or []),
            "microbench_failed": None if failed is None else len(failed),
            "microbench_error": failed[0] if failed else None}


def ran_again(job: Mapping[str, Any]) -> str | None:
    """"attempt N on HOST" where Ray ran the job's task again after its worker or node was lost."""
    again = job.get("retried")
    return f"attempt {again.get('attempt')} on {again.get('host')}" if isinstance(again, dict) else None


def lease_columns(rec: Mapping[str, Any]) -> dict:
    """JOB_COLUMNS["jobs_per_gpu"], ["lease_wait_s"], ["paused_others_s"] and
    ["paused_by_others_s"], from a record's timings.gpu_lease."""
    lease = (rec.get("timings") or {}).get("gpu_lease")
    if not lease or "gpu" not in lease:
        return {"jobs_per_gpu": None, "lease_wait_s": None, "paused_others_s": None, "paused_by_others_s": None}
    waited = (lease.get("wait_s") or 0) + ((lease.get("benchmarks") or {}).get("wait_s") or 0)
    paused = lease.get("paused_others") or {}
    return {"jobs_per_gpu": lease.get("jobs_per_gpu"), "lease_wait_s": round(waited, 3),
            "paused_others_s": paused.get("s"), "paused_by_others_s": lease.get("paused_by_others_s")}


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
            "matmul_tflops": ", ".join(f"{d} {v:.1f}" if v >= 1 else f"{d} {v:.3g}"  # a CPU's read "0.0"
                                       for d, v in peaks.items()) if peaks else None}


def gpu_state_columns(state: dict) -> dict:
    """The jobs table's figures of the GPU's state over the steady loop (analysis/gpu_state.py)."""
    sm = state.get("sm_mhz") or {}
    return {"sm_clock_mhz": sm.get("median"), "sm_clock_min_mhz": sm.get("min"),
            "clocks_moved": state.get("clocks_moved"),
            "slowed_rounds": len(state["slowed_rounds"]) if "slowed_rounds" in state else None,
            "gpu_temp_max_c": (state.get("temp_c") or {}).get("max"),
            "gpu_power_w": (state.get("power_w") or {}).get("median")}
