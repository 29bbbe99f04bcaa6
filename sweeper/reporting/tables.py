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
Each table's columns are documented here, once; sweeper/aggregate.py writes them as
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
from sweeper.analysis.regression import source_hash, step_noise_pct
from sweeper.record import Record, compiled_warm, ran_config
from sweeper.command_line import flatten
from sweeper.identity import configuration
from sweeper.reporting.headline import headline

JOB_COLUMNS: dict[str, str] = {
    "job": "Hydra job number in the sweep",
    "label": "model, batch, mode and variant, as figures name the job",
    "key": "the job's configuration as one string (same in every sweep): joins sweeps in history",
    "model": "timm model name",
    "mode": "training or inference",
    "batch_size": "batch size the job ran",
    "image_size": "input height and width",
    "amp": "autocast on or off",
    "amp_dtype": "autocast dtype (float16, bfloat16) or none",
    "cudagraphs": "CUDA graphs on",
    "autotune": "Inductor max-autotune on",
    "device": "cuda or cpu",
    "python": "the job's Python environment (config key python: a name or an interpreter path); none: the driver's",
    "compile_mode": "torch.compile mode the variant maps to",
    "status": "ok, failed, skipped or cancelled",
    "reason": "why the job failed or was skipped",
    "phase": "the phase the job was in when it stopped",
    "compile_s": "first compiled step, compile included, seconds",
    "autotune_seeded": "max-autotune choices already timed in the autotune store when the job compiled (0: it autotuned from cold; none: no store or autotune off); compare compile times of seeded jobs with seeded ones",
    "compile_state": "cold (compiled from nothing), seeded (max-autotune timings from the autotune store) or warm (an earlier run's compile of the same job loaded from the compile store: compile_s is a load, not a compile); compare compile times within one state",
    "cpp_builds": "C++ files Inductor built during the compile (torch's compile_file timer): on a CPU a warm compile whose kernel libraries the compile store could not put back (built on another host) builds every C++ kernel again, so its compile_s is close to a cold one's; none: the record has no compile timers",
    "compile_s_before": "seconds of compile in this job's earlier runs that were stopped while compiling (a cancelled or timed-out sweep run again into the same folder went on from them: timings.autotune_store.earlier_attempts); the job's whole compile is compile_s plus this; none: no such run",
    "compile_bytes": "size of the job's compile as the compile store keeps it (PyTorch's cache artifacts), bytes; none: store off",
    "eager_step_ms": "median eager step, ms",
    "compiled_step_ms": "median compiled step, ms",
    "speedup": "eager / compiled step time",
    "compiled_graphs": "graphs the step compiled into (its forward or inference modules captured); more than one: graph breaks",
    "graph_breaks": "distinct graph breaks dynamo reported while the step compiled (the report lists each with its reason and source line); none: not recorded",
    "recompiles": "frames compiled again after a guard failed; none: not recorded",
    "model_code_pct": "share of the step's kernel time inside compiled graphs placed on a model module and source line, % (sweeper/analysis/attribution.py); none: not recorded",
    "outside_graphs_ms": "kernel time a step outside compiled graphs (eager code between them), ms",
    "bound_ms": "the step's kernel time at the device's roofs, where its work is known, ms (sweeper/analysis/roofline.py)",
    "recoverable_ms": "the step's kernel time above the roofs, where its work is known, ms: what is left to win",
    "roofline_known_pct": "share of the step's kernel time whose work is known (a bound), %",
    "copy_gbps": "the device's measured copy bandwidth, GB/s (bytes read plus written)",
    "matmul_tflops": "the device's measured dense matmul peak per dtype, TFLOP/s",
    "accuracy": "the compiled step against eager, PyTorch's benchmark runner's --accuracy check (tasks/accuracy.py): passed, failed, or not checked (why); none: not recorded",
    "accuracy_failed": "the tensors outside the tolerance: how many of how many, the first ones",
    "peak_memory_mb": "peak allocated device memory, MiB (none on a CPU)",
    "busy_pct": "step: union of kernel intervals per step over the unprofiled step time, % (capped at 100)",
    "nvml_util_pct": "step: NVML's GPU utilization while the unprofiled step ran in a loop, % (GPU jobs only)",
    "nvml_expected_pct": "step: what NVML should read from the busy figure: busy_pct plus about 1 µs of GPU time per kernel launch, at most 100 (sweeper/analysis/breakdown.nvml_expected_pct; GPU jobs only)",
    "busy_pct_reference_style": "step: summed kernel time over unprofiled step time, % (as `-p` prints)",
    "busy_pct_profiled_span": "step: union of kernel intervals over the profiled span, % (a lower bound: the profiler slows launches)",
    "busy_capped": "busy_pct was above 100 (noise between the profiled and the unprofiled steps) and was capped",
    "device_ms": "step: summed kernel time per step, ms",
    "kernel_launches": "step: kernel launches per step (profile)",
    "host_busy_cores": "most CPU cores busy with other work on the host while the job measured (tasks/host_load.py)",
    "steady_step_ms": "the compiled step's mean over the steady loop (measure.steady_loop_s seconds back to back), ms",
    "step_noise_pct": "the compared step time's noise in this run: half the interquartile range of the steady loop's stretches, % of its mean (older records: of the timed steps, or their gap to the loop) (sweeper/analysis/regression.py)",
    "timing_iqr_pct": "largest interquartile range of the job's timed rounds (step, modules), % of their median",
    "microbench_kernels": "Triton kernels selected for microbenchmarks (sweeper/analysis/kernels.select_kernels); none: no microbenchmarks ran",
    "microbench_failed": "selected Triton kernels whose microbenchmark failed (tables/microbench.csv's `error` says why; those the budget left out are not counted); none: no microbenchmarks ran (a CPU job, measure.microbench off)",
    "microbench_error": "the first such failure",
    "jobs_per_gpu": "jobs the job's GPU took at once (hydra.launcher.jobs_per_gpu); none: no GPU lease (a CPU job, an older record)",
    "lease_wait_s": "seconds the job waited for its GPU's lease, its timed phases and Inductor's benchmarks together (tasks/gpu_lease.py)",
    "paused_others_s": "seconds this job kept the other jobs of its GPU paused while it timed its steps and modules alone (hydra.launcher.pause_while_timing; sweeper/host_pause.py); none: not packed, or not paused",
    "paused_by_others_s": "seconds this job stood paused while other jobs of its GPU timed (its compile_s includes them); none: never paused",
    "shared_gpu_with": "the jobs that ran on the same GPU at the same time as this one (space-separated numbers)",
    "rerun_alone": "why the job ran again alone on its GPU (it ran out of GPU memory beside others); none: it did not",
    "launch_us": "the host's launch speed while the job measured: median microseconds per launch of a tiny op (tasks/timing.launch_probe_us)",
    "gpu": "GPU name (none on a CPU)",
    "torch": "torch version",
    "duration_s": "the job's own run time, seconds",
    "dir": "the job's folder",
    "log": "the job's log",
}
# plus one column per category: share_<category>, the step's share of device time, %
JOB_SHARE_PREFIX = "share_"

CATEGORY_COLUMNS: dict[str, str] = {
    "job": "Hydra job number",
    "label": "as in the job table",
    "scope": "step, or the module's label (forward_0, backward_1, inference_0)",
    "role": "step, forward, backward or inference",
    "category": "kernel category (sweeper/analysis/categories.py)",
    "device_ms": "device time per run (step or module call), ms",
    "share_pct": "share of the scope's device time, %",
    "pct_of_wall": "device time over the scope's wall time, %",
    "launches": "kernel launches per run",
}

KERNEL_COLUMNS: dict[str, str] = {
    "job": "Hydra job number",
    "label": "as in the job table",
    "scope": "step or module label",
    "kernel": "kernel name as the profiler saw it",
    "category": "kernel category",
    "device_ms": "device time per run, ms",
    "count": "launches per run",
    "share_pct": "share of the scope's device time, %",
    "pct_of_wall": "device time over the scope's wall time, %",
    "source": "hash of the kernel's Inductor source (its file's name), for the Triton kernels the job's kernel table holds",
    "model_modules": "the model modules its time goes to, costliest first (path, class, pass; at most 3 and how many more)",
    "model_source": "the model source line of its costliest launch site (file:line)",
    "model_aten": "the ATen ops its launch site computes, as the compiled module's comment says",
    "model_how": "how it was placed on the model's code (sweeper/analysis/attribution.py)",
}

MODEL_MODULE_COLUMNS: dict[str, str] = {
    "job": "Hydra job number",
    "label": "as in the job table",
    "module": "the model module as named_modules() names it (a leaf of the attribution: the innermost module of the code a kernel computes); blocks add up their layers' rows; `(outside compiled graphs)`: the kernel time of eager code between the graphs (pass `step`)",
    "class": "the module's class",
    "pass": "forward, or backward (the forward module a backward kernel differentiates)",
    "category": "kernel category",
    "device_ms": "device time per step, ms (a kernel fusing several modules' code: split evenly among them)",
    "launches": "launches per step (shared the same way)",
    "source": "the model source line that calls the module (file:line, the innermost frame of its code's stack)",
}

RECOVERABLE_COLUMNS: dict[str, str] = {
    "job": "Hydra job number",
    "label": "as in the job table",
    "kernel": "the launch site's costliest kernel (a library call may launch several: `kernels`)",
    "kernels": "kernels launched from the site in the profiled step",
    "category": "the costliest kernel's category",
    "site": "the launch in the compiled module's code, <kernel or extern call>:<its provenance debug handle> (the wrapper's `# [Provenance debug handles]` comment above it)",
    "module": "the model modules it computes (path, class, pass), as in the modules table",
    "source": "the model source line (file:line)",
    "launches": "kernel launches per step",
    "device_ms": "its kernels' device time per step, ms",
    "flops": "floating-point operations per step (PyTorch's FLOP formula on the op's shapes, or Inductor's kernel_flop)",
    "bytes": "bytes its tensors span per step (the op's inputs and outputs, or Inductor's kernel_num_gb)",
    "dtype": "the op's input dtype, as the matmul peak that bounds it is named (tf32: a float32 op that TF32 may run)",
    "work_from": "where flops and bytes come from",
    "bound_ms": "the time at the device's roofs, max(bytes / copy bandwidth, FLOPs / matmul peak of its dtype), ms",
    "bound_by": "which roof binds: compute or memory",
    "efficiency_pct": "bound_ms over device_ms, %",
    "tflops_per_s": "achieved TFLOP/s",
    "gb_per_s": "achieved GB/s (bytes over time)",
    "recoverable_ms": "device_ms - bound_ms: what is left to win a step, ms",
}


DECISION_COLUMNS: dict[str, str] = {
    "job": "Hydra job number (an autotune=on job)",
    "label": "as in the job table",
    "op": "the op max-autotune tuned: mm, addmm, convolution, ...",
    "inputs": "its inputs as Inductor keys them: device, dtype, sizes, strides and offset of each",
    "precision": "the float32 matmul precision it was timed under",
    "choices": "choices timed (template configs and library calls)",
    "winner": "the fastest choice, which the compile took",
    "winner_kind": "template (Inductor generated it) or library (cuBLAS, cuDNN, oneDNN)",
    "winner_ms": "its time in the autotuning benchmark, ms",
    "runner_up": "the second fastest",
    "runner_up_ms": "its time, ms",
    "margin_pct": "runner_up_ms over winner_ms, less 1, %",
    "noise_pct": "how far one choice's timings move between runs: the 90th percentile of the relative gaps, % (none: no repeated timings)",
    "mark": "within noise (margin under the noise: the next run may choose the runner-up), beyond noise, or noise unknown",
    "library_ms": "the best library call's time: what autotune off runs, ms",
    "template_ms": "the best template's time, ms",
    "library_margin_pct": "the gap between the best template and the best library call, % of the faster",
    "library_mark": "that gap against the noise: whether template against library was a real decision",
    "gain_ms": "library_ms - winner_ms: what the decision bought against autotune off, one call, ms",
}

BENCH_COLUMNS: dict[str, str] = {
    "job": "Hydra job number",
    "label": "as in the job table",
    "kernel": "Triton kernel name",
    "category": "kernel category",
    "module": "the compiled module that launches it",
    "model_modules": "the model modules its time goes to (as in the kernels table)",
    "model_source": "the model source line of its costliest launch site",
    "step_ms": "device time per compiled step, ms (profile)",
    "share_of_triton_pct": "share of the step's Triton kernel time, %",
    "standalone_ms": "one launch alone: the job's kernel on its file's get_args(), L2 flushed, ms",
    "profiled_ms_per_launch": "the same launch in the profiled step, ms (cross-check)",
    "num_gb": "bytes the kernel moves per launch, GB (its kernel_num_gb)",
    "gb_per_s": "num_gb over standalone_ms",
    "pct_of_peak_bandwidth": "gb_per_s over the job's measured device-to-device copy bandwidth, %",
    "regs": "registers per thread of the chosen config",
    "spills": "register spills of the chosen config",
    "shared_bytes": "shared memory of the chosen config, bytes",
    "configs_tried": "candidate configs timed for the headroom",
    "headroom_pct": "how much faster the best candidate config was than the chosen one, % (negative: chosen faster)",
    "headroom_method": "what produced headroom_pct",
    "error": "why a figure is missing",
}


def seeded(autotune_seeded) -> bool:
    """Whether a job's max-autotune compile started from the autotune store (its
    `autotune_seeded` column: choices found there), so compiled cold or not."""
    return autotune_seeded is not None and bool(pd.notna(autotune_seeded)) and autotune_seeded > 0


def compile_state(timings: dict) -> str:
    """cold, seeded or warm (JOB_COLUMNS["compile_state"]), from a record's timings."""
    if compiled_warm(timings):
        return "warm"
    return "seeded" if seeded((timings.get("autotune_store") or {}).get("seeded_entries")) else "cold"


def cpp_builds(timings: dict) -> int | None:
    """JOB_COLUMNS["cpp_builds"], from a record's timings."""
    timers = timings.get("compile_timers")
    if not isinstance(timers, dict):
        return None
    built = timers.get("compile_file")
    return int(built[0]) if isinstance(built, list) and built else 0


def compile_s_before(timings: dict) -> float | None:
    """JOB_COLUMNS["compile_s_before"], from a record's timings."""
    earlier = [a for a in (timings.get("autotune_store") or {}).get("earlier_attempts") or []
               if a.get("stopped_in") == "compile"]
    return round(sum(a.get("phase_s_at_stop") or 0 for a in earlier), 1) if earlier else None


def state_of(row) -> str:
    """A jobs-table row's compile_state; tables written before that column existed: cold or
    seeded, from autotune_seeded."""
    state = row.get("compile_state")
    if isinstance(state, str):
        return state
    return "seeded" if seeded(row.get("autotune_seeded")) else "cold"


def _microbench_failed(rec: Mapping[str, Any]) -> dict:
    """JOB_COLUMNS["microbench_kernels"], ["microbench_failed"] and ["microbench_error"], from a record."""
    table = rec.get("kernel_table") or {}
    failed = microbench_failures(table)
    return {"microbench_kernels": None if failed is None else len(table.get("rows") or []),
            "microbench_failed": None if failed is None else len(failed),
            "microbench_error": failed[0] if failed else None}


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


def job_label(cfg: dict) -> str:
    """'mixnet_l b128 train fp16' plus the variant: the name figures use for a job. A job
    that never started has its batch size unresolved (the model's default, resolved where
    it runs): 'default batch'."""
    batch = cfg.get("batch_size")
    parts = [str(cfg.get("model")), f"b{batch}" if batch is not None else "default batch",
             "train" if cfg.get("mode") == "training" else "infer"]
    if cfg.get("amp"):
        parts.append({"float16": "fp16", "bfloat16": "bf16"}.get(str(cfg.get("amp_dtype")), "amp"))
    if cfg.get("cudagraphs"):
        parts.append("cudagraphs")
    if cfg.get("autotune"):
        parts.append("autotune")
    parts += [f"{k}={v}" for k, v in flatten(cfg.get("inductor")).items()]
    if cfg.get("python"):
        parts.append(f"python={cfg['python']}")
    return " ".join(parts)


def record_label(rec: Mapping[str, Any]) -> str:
    """job_label() of what a record's job ran (sweeper.record.ran_config)."""
    return job_label(ran_config(rec))


# the keys every job key names, in this order (older sweeps' keys read the same)
_KEY_ORDER = ("model", "mode", "batch_size", "image_size", "amp", "amp_dtype", "cudagraphs", "autotune", "device")


def job_key(cfg: dict) -> str:
    """The job across sweeps, its seeds its repeats (sweeper/identity.configuration), as
    "model=...,mode=...,...": the keys of _KEY_ORDER always, then any other key only when
    set (python; inductor options as inductor.<name>), so that a key added to the
    configuration later leaves the keys of sweeps before it unchanged."""
    conf = configuration(cfg)
    parts = [f"{k}={conf.get(k)}" for k in _KEY_ORDER]
    for k in sorted(set(conf) - set(_KEY_ORDER)):
        value = conf[k]
        if isinstance(value, dict):
            parts += [f"{k}.{name}={v}" for name, v in sorted(flatten(value).items())]
        elif value not in (None, "", [], {}):
            parts.append(f"{k}={value}")
    return ",".join(parts)


def key_fields(key: str) -> dict[str, str]:
    """A job key's fields, as job_key() wrote them: {"model": "resnet18", ...,
    "inductor.<name>": ...}."""
    return dict(p.split("=", 1) for p in key.split(",") if "=" in p)


def key_without(key: str, field: str) -> str:
    """The job key less one field (the builds' compare keys jobs without their `python`)."""
    return ",".join(p for p in key.split(",") if p.split("=", 1)[0] != field)


def job_num(rec: Mapping[str, Any]) -> int:
    value = str((rec.get("job") or {}).get("id"))
    return int(value) if value.isdigit() else -1


def distinct_labels(jobs: dict) -> dict:
    """id -> label, from id -> (job key, base label): jobs whose base labels are the same
    but whose configurations differ get the keys that tell them apart added
    ("resnet18 b8 infer image_size=160"); jobs of one configuration (seeds) get their id."""
    groups: dict[str, list] = {}
    for ident, (_, label) in jobs.items():
        groups.setdefault(label, []).append(ident)
    out = {}
    for label, idents in groups.items():
        parts = {i: jobs[i][0].split(",") for i in idents}
        common = set.intersection(*(set(p) for p in parts.values()))
        for i in idents:
            extra = [p for p in parts[i] if p not in common]
            same = sum(1 for j in idents if parts[j] == parts[i])
            out[i] = " ".join([label, *extra] + ([f"#{i}"] if same > 1 else []))
    return out


def unique_labels(records: list[Record]) -> dict[int, str]:
    """job number -> label, told apart where two jobs would share one (distinct_labels)."""
    return distinct_labels({job_num(r): (job_key(ran_config(r)), record_label(r)) for r in records})


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
        "autotune_seeded": ((rec.get("timings") or {}).get("autotune_store") or {}).get("seeded_entries"),
        "compile_state": compile_state(rec.get("timings") or {}),
        "compile_s_before": compile_s_before(rec.get("timings") or {}),
        "cpp_builds": cpp_builds(rec.get("timings") or {}),
        "compile_bytes": ((rec.get("timings") or {}).get("compile_store") or {}).get("job_bytes"),
        "step_noise_pct": step_noise_pct(rec.get("timings") or {}),
        **_microbench_failed(rec),
        **_lease(rec),
        "shared_gpu_with": shared,
        "rerun_alone": job.get("rerun_alone"),
        "gpu": env.get("gpu"),
        "torch": env.get("torch"),
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
             "device_ms": k.get("device_ms"), "count": k.get("count"), "share_pct": k.get("share_of_device_pct"),
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
            "outside_graphs_ms": (outside or 0.0) if mc else None}


def roofline_columns(rec: Mapping[str, Any]) -> dict:
    """The jobs table's roofline columns (JOB_COLUMNS); None where not recorded."""
    line = rec.get("roofline") or {}
    roofs = line.get("roofs") or {}
    peaks = roofs.get("matmul_tflops") or {}
    return {"bound_ms": line.get("bound_ms"), "recoverable_ms": line.get("recoverable_ms"),
            "roofline_known_pct": line["known_ms"] / line["device_ms"] * 100 if line.get("device_ms") else None,
            "copy_gbps": roofs.get("copy_gbps"),
            "matmul_tflops": ", ".join(f"{d} {v:.1f}" for d, v in peaks.items()) if peaks else None}


def recoverable_rows(rec: Mapping[str, Any], job: int) -> list[dict]:
    """A job's launch sites with the most to win (RECOVERABLE_COLUMNS), as its record keeps them."""
    return [{"job": job, "label": None, **{c: r.get(c) for c in RECOVERABLE_COLUMNS if c not in ("job", "label")}}
            for r in (rec.get("roofline") or {}).get("rows") or []]


def decision_rows(rec: Mapping[str, Any], job: int) -> list[dict]:
    """An autotune=on job's own decisions (DECISION_COLUMNS), as its record keeps them."""
    return [{"job": job, "label": None, **{c: r.get(c) for c in DECISION_COLUMNS if c not in ("job", "label")}}
            for r in (rec.get("autotune_decisions") or {}).get("rows") or []]


OUTSIDE_ROW = "(outside compiled graphs)"  # the modules table's row of eager code between the graphs


def model_module_rows(rec: Record, label: str | None) -> list[dict]:
    """The step's time by model module, pass and category (MODEL_MODULE_COLUMNS), and a
    row OUTSIDE_ROW for the kernel time outside compiled graphs."""
    job = job_num(rec)
    mc = rec.get("model_code") or {}
    rows = [{"job": job, "label": label, "module": _interned(r["module"]), "class": _interned(r["class"]),
             "pass": _interned(r["pass"]), "category": _interned(r["category"]), "device_ms": r["device_ms"],
             "launches": r.get("launches"), "source": _interned(r.get("source"))}
            for r in mc.get("rows") or []]
    outside = (mc.get("unattributed") or {}).get(OUTSIDE_GRAPHS)
    if outside:
        rows.append({"job": job, "label": label, "module": OUTSIDE_ROW, "class": None, "pass": "step",
                     "category": "other", "device_ms": outside, "launches": None, "source": None})
    return rows


def microbench_table(records: list[Record]) -> pd.DataFrame:
    """The Triton kernels each GPU job selected and benchmarked (sweeper/analysis/kernels.py
    select_kernels, tasks/kernel_bench.py); CPU jobs have no such rows."""
    names = unique_labels(records)
    rows = [row for rec in records for row in bench_rows(rec, names[job_num(rec)])]
    return pd.DataFrame(rows, columns=list(BENCH_COLUMNS))
