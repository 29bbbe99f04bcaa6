"""How far each launch of the step is from the hardware, and the milliseconds a step that
could still be won there (pure: no torch).

Work: a launch site's FLOPs and bytes. A library matmul or convolution (cuBLAS, cuDNN,
oneDNN, through an extern call) and a Triton template carry the work of the op they compute,
by PyTorch's FLOP formulas on the shapes its compile saw (the tag pass:
tasks/node_work.py); a Triton kernel carries Inductor's own estimate, ``kernel_num_gb`` and
``kernel_flop`` in its inductor_meta. A C++ kernel, an ATen kernel outside those ops, a
memcpy or memset, and what was not placed on a launch site have no work known: they are
counted as such, never given a bound.

Roofs: the device's copy bandwidth (bytes read and written a second) and its dense matmul
peak per dtype, measured on the device (tasks/roofs.py). A launch's bound is the time it
would take at the roofs, max(bytes / bandwidth, FLOPs / peak of its dtype); its efficiency
is bound / time; what is left to win is time - bound, a step. The time is a launch's typical
one: the median of its profiled calls where the placement says which call each kernel ran
in (one call preempted on a loaded host does not rank a launch first); the mean beside it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Mapping, Sequence

from sweeper.analysis.attribution import Placed
from sweeper.analysis.launch_sites import Site
from sweeper.analysis.categories import categorize
from sweeper.analysis.trace import Interval

COMPUTE, MEMORY = "compute", "memory"
BY_FORMULA = "FLOP formula on the op's shapes"
BY_INDUCTOR = "Inductor's estimate (kernel_num_gb, kernel_flop)"

_TRITON_DEF = re.compile(r"^(\w+) = async_compile\.triton\('(\w+)'", re.M)
_META_NUM = r"['\"]{}['\"]\s*:\s*([0-9.eE+-]+)"


def kernel_work(wrapper_source: str) -> dict[str, tuple[float | None, float | None]]:
    """Each Triton kernel of a compiled module -> (bytes, FLOPs) a launch, as Inductor
    estimated them when it generated the kernel (its inductor_meta in the wrapper's embedded
    source); None for what the kernel's meta lacks."""
    out: dict[str, tuple[float | None, float | None]] = {}
    starts = [(m.start(), m.group(2)) for m in _TRITON_DEF.finditer(wrapper_source)]
    for i, (at, name) in enumerate(starts):
        body = wrapper_source[at: starts[i + 1][0] if i + 1 < len(starts) else len(wrapper_source)]
        gb = re.search(_META_NUM.format("kernel_num_gb"), body)
        flop = re.search(_META_NUM.format("kernel_flop"), body)
        out[name] = (float(gb.group(1)) * 1e9 if gb else None, float(flop.group(1)) if flop else None)
    return out


def peak_dtype(dtype: str | None, site: str, roofs: Mapping) -> str | None:
    """Which matmul peak bounds an op of `dtype` launched at `site`: a float32 convolution
    runs as TF32 where cuDNN may use it (torch.backends.cudnn.allow_tf32, on by default),
    a float32 matmul where torch.backends.cuda.matmul.allow_tf32 is on (off by default)."""
    key = roofs.get("key") or {}
    if dtype == "float32" and "tf32" in (roofs.get("matmul_tflops") or {}):
        if ("conv" in site and key.get("cudnn_tf32")) or ("conv" not in site and key.get("tf32")):
            return "tf32"
    return dtype


def bound_ms(flops: float | None, nbytes: float | None, dtype: str | None, roofs: Mapping) -> tuple[float | None, str | None]:
    """(milliseconds at the roofs, which roof binds) for one launch's work; (None, None)
    where neither its bytes nor its FLOPs at a measured peak are known. `dtype` names the
    peak (peak_dtype())."""
    peaks = roofs.get("matmul_tflops") or {}
    compute = flops / (peaks[dtype] * 1e12) * 1e3 if flops and dtype in peaks and peaks[dtype] else None
    bandwidth = roofs.get("copy_gbps")
    memory = nbytes / (bandwidth * 1e9) * 1e3 if nbytes and bandwidth else None
    if compute is None and memory is None:
        return None, None
    if memory is None or (compute is not None and compute >= memory):
        return compute, COMPUTE
    return memory, MEMORY


def _site_label(site: Site) -> str:
    return "; ".join(layer.label() for layer in site.layers[:3]) + (f"; +{len(site.layers) - 3} more"
                                                                    if len(site.layers) > 3 else "")


def launch_rows(kernels: Sequence[Interval], placed: Placed, work_by_kernel: Mapping[str, tuple[float | None, float | None]],
                roofs: Mapping) -> list[dict]:
    """One row a launch site of the profiled runs (`kernels`, placed by attribute_events()),
    costliest to win first: its kernels' time a run (scaled as the placement's), its work
    a run, its bound and what is left to win. A library call that launches several kernels
    (a cuDNN convolution's layout transforms, a backward's two gradients) is one site: its
    kernels' times add up against its op's work. Events not placed on a site are left to
    summary()."""
    from sweeper.analysis.trace import typical

    by_site: dict[int, dict] = {}
    for i, (e, sites) in enumerate(zip(kernels, placed.event_sites)):
        ms = e.dur_us / 1000 / placed.runs * placed.scale
        for placed_on, weight in sites:
            row = by_site.setdefault(id(placed_on), {"site": placed_on, "ms": 0.0, "events": 0.0,
                                                     "kernels": defaultdict(float), "calls": [0.0] * placed.runs})
            row["ms"] += ms * weight
            row["events"] += weight / placed.runs
            row["kernels"][(e.name, categorize(e.name, e.cat))] += ms * weight
            if placed.run_of is not None:
                row["calls"][placed.run_of[i]] += ms * placed.runs * weight
    rows = []
    for got in by_site.values():
        site: Site = got["site"]
        (top, category), _ = max(got["kernels"].items(), key=lambda kv: kv[1])
        meta_bytes, meta_flops = work_by_kernel.get(site.kernel, (None, None))
        launches = got["events"] if not site.extern else 1.0  # an extern call computes its op once a run
        flops = site.work.flops if site.work else (meta_flops * launches if meta_flops is not None else None)
        nbytes = (meta_bytes * launches if meta_bytes is not None
                  else site.work.bytes if site.work and site.work.bytes is not None else None)
        dtype = peak_dtype(site.work.dtype, site.kernel, roofs) if site.work else None
        bound, by = bound_ms(flops, nbytes, dtype, roofs)
        # the typical call's time (its median), so that one preempted call does not rank a
        # launch first; the mean stays in device_ms, with the outlier calls counted
        ms, outliers = typical(got["calls"]) if placed.run_of is not None else (got["ms"], None)
        rows.append({
            "kernel": top, "kernels": len(got["kernels"]), "category": category, "site": site.key,
            "module": _site_label(site) or None, "source": site.sources[0] if site.sources else None,
            "launches": round(got["events"], 3), "device_ms": got["ms"], "typical_ms": ms, "outlier_runs": outliers,
            "flops": flops, "bytes": nbytes, "dtype": dtype,
            "work_from": BY_FORMULA if site.work else BY_INDUCTOR if meta_bytes is not None or meta_flops else None,
            "bound_ms": bound, "bound_by": by,
            "efficiency_pct": bound / ms * 100 if bound is not None and ms else None,
            "tflops_per_s": flops / (ms / 1e3) / 1e12 if flops and ms else None,
            "gb_per_s": nbytes / (ms / 1e3) / 1e9 if nbytes and ms else None,
            "recoverable_ms": max(ms - bound, 0.0) if bound is not None else None,
        })
    rows.sort(key=lambda r: (r["recoverable_ms"] is None, -(r["recoverable_ms"] or 0.0), -r["device_ms"]))
    return rows


def summary(rows: Sequence[Mapping], device_ms: float, roofs: Mapping, top: int = 100) -> dict:
    """The record's `roofline` part: the roofs, the step's time with a bound and without,
    the bound and what is left to win, by category, and the `top` rows most to win."""
    known = [r for r in rows if r["bound_ms"] is not None]
    by_category: dict[str, dict[str, float]] = defaultdict(lambda: {"device_ms": 0.0, "bound_ms": 0.0,
                                                                   "recoverable_ms": 0.0, "unknown_ms": 0.0})
    for r in rows:
        c = by_category[r["category"]]
        if r["bound_ms"] is None:
            c["unknown_ms"] += r["device_ms"]
        else:
            c["device_ms"] += r["device_ms"]
            c["bound_ms"] += r["bound_ms"]
            c["recoverable_ms"] += r["recoverable_ms"]
    known_ms = sum(r["device_ms"] for r in known)
    return {
        "roofs": dict(roofs),
        "device_ms": device_ms,
        "known_ms": known_ms,
        "unknown_ms": max(device_ms - known_ms, 0.0),  # no work known, or not placed on a launch site
        "bound_ms": sum(r["bound_ms"] for r in known),
        "recoverable_ms": sum(r["recoverable_ms"] for r in known),
        "sites": len(rows),
        # faster than its bound: an estimate of bytes above what the kernel fetched (data still
        # in L2, a broadcast operand), or a compute roof below what the kernel reaches
        "over_roof_sites": sum(1 for r in known if r["bound_ms"] > r.get("typical_ms", r["device_ms"])),
        "by_category": {k: {n: round(v, 6) for n, v in c.items()} for k, c in sorted(by_category.items())},
        "rows": [dict(r) for r in rows[:top]],
    }
