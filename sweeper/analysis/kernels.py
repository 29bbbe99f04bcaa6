"""Per-kernel microbenchmarks: which kernels to benchmark, and the arithmetic of their
rows (pure: records and kernel sources in, rows out).

Selection takes the Triton kernels of the profiled compiled step, costliest first, until
they hold `cover_pct` of the step's Triton time (at most `max_kernels`). On the H200,
mixnet_l training (batch 128) needs 109 of its 509 Triton kernels for 80%, densenet121
(batch 16) 145 of 373 (tests/fixtures/h200/two_gpu_sweeps): the time is spread thin, so the
defaults are 80% and 200 kernels.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from sweeper.analysis.categories import CPP

DEFAULT_COVER_PCT = 80.0
DEFAULT_MAX_KERNELS = 200

_NUM_GB = re.compile(r"['\"]kernel_num_gb['\"]\s*:\s*([0-9.eE+-]+)")
_MAIN_NUM_GB = re.compile(r"^\s*num_gb\s*=\s*([0-9.eE+-]+)\s*$", re.M)


def kernel_num_gb(source: str) -> float | None:
    """Gigabytes a kernel moves per call, as Inductor estimated it when generating the kernel
    (`kernel_num_gb` in inductor_meta, or `num_gb` in its __main__ harness); None if absent."""
    m = _NUM_GB.search(source) or _MAIN_NUM_GB.search(source)
    return float(m.group(1)) if m else None


def module_of_kernels(record: Mapping[str, Any]) -> dict[str, str]:
    """kernel name -> label of the compiled module whose breakdown lists it."""
    out: dict[str, str] = {}
    for m in record.get("modules") or []:
        for k in (m.get("breakdown") or {}).get("kernels") or []:
            out.setdefault(k["name"], m["label"])
    return out


def select_kernels(record: Mapping[str, Any], cover_pct: float = DEFAULT_COVER_PCT,
                   max_kernels: int = DEFAULT_MAX_KERNELS) -> list[dict]:
    """The Triton kernels holding `cover_pct` of the step's Triton time, costliest first."""
    step = record.get("step") or {}
    triton = [k for k in step.get("kernels") or [] if str(k.get("category", "")).startswith("triton_")]
    total = sum(k["device_ms"] for k in triton)
    if not total:
        return []
    modules = module_of_kernels(record)
    rows: list[dict] = []
    covered = 0.0
    for k in sorted(triton, key=lambda k: -k["device_ms"]):
        if covered >= cover_pct or len(rows) >= max_kernels:
            break
        share = k["device_ms"] / total * 100
        covered += share
        rows.append({"name": k["name"], "category": k["category"], "module": modules.get(k["name"]),
                     "model_modules": k.get("model_modules"), "model_source": k.get("model_source"),
                     "step_ms": k["device_ms"], "launches": k.get("count"),
                     "share_of_triton_pct": share, "cumulative_pct": covered})
    return rows


def bandwidth(ms: float | None, num_gb: float | None, peak_gbps: float | None) -> dict:
    """GB/s a kernel achieved, and its share of the measured peak; None where unknown."""
    gbps = num_gb / (ms / 1e3) if ms and num_gb is not None else None
    return {"gb_per_s": gbps, "pct_of_peak_bandwidth": gbps / peak_gbps * 100 if gbps is not None and peak_gbps else None}


def copy_bandwidth_gbps(nbytes: int, ms: float) -> float:
    """Peak bandwidth from a device-to-device copy of `nbytes`: each byte is read once and
    written once, so the copy moves 2 x nbytes."""
    return 2 * nbytes / (ms / 1e3) / 1e9


def headroom_pct(chosen_ms: float | None, best_ms: float | None) -> float | None:
    """How much faster the best candidate config was than the chosen one, % of chosen."""
    if not chosen_ms or not best_ms:
        return None
    return (chosen_ms - best_ms) / chosen_ms * 100


def headroom_estimate_s(spent_s: float, configs_timed: int, next_configs: int | None) -> float:
    """Seconds the next kernel's headroom timing will likely take: the seconds per config
    timed so far, times its candidate configs plus the chosen one. 0 before any (nothing to
    go by). Why: the pass used to check its budget only before each kernel, and on the
    H200 it overran by the last kernel's timing (mixnet_l: 12.7 s against 10.9 s, a kernel
    of 7 candidate configs taking over a second; bench/results/microbench/)."""
    if configs_timed <= 0 or not next_configs:
        return 0.0
    return spent_s / configs_timed * (next_configs + 1)


def cpu_kernel_rows(record: Mapping[str, Any]) -> list[dict]:
    """On a CPU: the C++ kernels' times from the profiled step, costliest first. There is
    no standalone benchmark: kernel files with a benchmark harness are a GPU feature."""
    step = record.get("step") or {}
    cpp = [k for k in step.get("kernels") or [] if k.get("category") == CPP]
    total = sum(k["device_ms"] for k in cpp) or 1.0
    return [{"name": k["name"], "category": k["category"], "model_modules": k.get("model_modules"),
             "model_source": k.get("model_source"), "step_ms": k["device_ms"], "launches": k.get("count"),
             "share_of_cpp_pct": k["device_ms"] / total * 100, "standalone_ms": None,
             "method": "profiled step only: standalone kernel benchmarks need a GPU"}
            for k in sorted(cpp, key=lambda k: -k["device_ms"])]


_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int64": 8, "int32": 4, "int8": 1,
                "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
_ARG = re.compile(r"^\s*(\w+)\s*=\s*rand_strided\(\((.*?)\),\s*\((.*?)\),\s*device='[^']*',\s*dtype=torch\.(\w+)\)", re.M)
_MUTATED = re.compile(r"['\"]mutated_arg_names['\"]\s*:\s*\[(.*?)\]")
_SIGNATURE = re.compile(r"^def (triton_\w+)\((.*?)\):", re.M)


def args_bytes(source: str) -> int | None:
    """Bytes a kernel file's get_args() tensors span, each read once, plus the mutated ones
    (in_out_ptr) written back once: the accounting behind Inductor's kernel_num_gb for a
    kernel that touches each element once. None if the file has no get_args()."""
    args = _ARG.findall(source)
    if not args:
        return None
    sizes = []
    for _, shape, stride, dtype in args:
        dims = [int(x) for x in shape.split(",") if x.strip()]
        strides = [int(x) for x in stride.split(",") if x.strip()]
        span = 1 + sum((d - 1) * s for d, s in zip(dims, strides)) if all(dims) else 0
        sizes.append(span * _DTYPE_BYTES.get(dtype, 4))
    params = []
    sig = _SIGNATURE.search(source)
    if sig:
        params = [p.strip().split(":")[0] for p in sig.group(2).split(",")]
    found = _MUTATED.search(source)
    mutated = set(re.findall(r"'(\w+)'", found[1] or "")) if found else set()
    written = sum(size for name, size in zip(params, sizes) if name in mutated)
    return sum(sizes) + written


def microbench_failures(table: dict) -> list[str] | None:
    """Why each selected kernel of a job's kernel table failed its microbenchmark (the
    rows the budget left out are no failure); None where no microbenchmark ran (a CPU job,
    measure.microbench off)."""
    rows = table.get("rows") or []
    if table.get("error"):  # the whole phase failed: every kernel not timed
        return [table["error"]] * sum(r.get("standalone_ms") is None for r in rows)
    if "peak_bandwidth_gbps" not in table:
        return None
    return [r["error"] for r in rows if r.get("error") and not str(r["error"]).startswith("not measured")]


def microbench_outcome(table: dict) -> str:
    """One log line: how many kernels were timed alone, and why the others were not (a job
    whose every benchmark failed still ends ok: the breakdown stands without them)."""
    rows = table["rows"]
    timed = sum(r.get("standalone_ms") is not None for r in rows)
    failed = microbench_failures(table) or []
    line = f"microbenchmarks: {timed} of {len(rows)} kernels timed alone"
    return line + (f"; {len(failed)} failed, the first: {failed[0]}" if failed else "")
