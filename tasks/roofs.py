"""The device's roofs, measured on the node and kept there for every later job: copy
bandwidth (a device-to-device copy, bytes read plus written a second) and the dense matmul
peak per dtype (a large square torch.mm, as cuBLAS or oneDNN runs it: float32 under the
job's own TF32 setting for matmuls, `tf32` with TF32 allowed, as cuDNN runs float32
convolutions by default). sweeper/analysis/roofline.py bounds each kernel by them.

Measured, not read from a datasheet: a datasheet's peak is a clock and a count of units,
which no library kernel reaches (an H200's bf16 dense 989 TFLOP/s; an 8192-cube bf16
product measures about 790), so a bound from it would call every GEMM a fifth slow.

A roof is a ceiling, so a measurement on a busy device is no roof: each one says how busy
the device was with other work while it was taken (`load`, in `load_unit`: on a CPU the
cores busy with other work than this job's, tasks/host_load.py; on a GPU NVML's busy
percentage just before, with this job idle under the GPU's lease: another packed job's
first step, another user's process), and a later job that finds the device idler than that
measures again; the kept roofs are then the best of both, figure by figure, with the idler
load. A job on a device as busy or busier reuses them, never replacing a ceiling by a
lower one. Kept per
user (two users' jobs on one machine measure their own) in $SWEEPER_ROOFS, by default
~/.cache/sweeper/roofs ($XDG_CACHE_HOME/sweeper/roofs), one JSON file per key; a file that
cannot be read (or holds no roofs of the right shape) is measured again and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import time
from pathlib import Path

import torch

from sweeper.analysis.kernels import copy_bandwidth_gbps
from sweeper.record import atomic_write_text
from tasks.timing import time_calls

VERSION = 2  # bump when the method changes: earlier files are then measured again (2: with the host's load)

# The matmul sizes: large enough that the product is bound by arithmetic, small enough to
# take well under a second (a CPU's oneDNN fp32 product of 2048^3 takes ~0.1 to 1 s).
GPU_N, CPU_N = 8192, 2048
GPU_DTYPES = ("bfloat16", "float16", "float32", "tf32")  # tf32: float32 with TF32 allowed (cuDNN's default for convolutions)
CPU_DTYPES = ("float32", "bfloat16")

# A device less busy with other work than this is idle: its roofs are ceilings. A kept
# measurement is taken again where the device is idler by at least this much. On a CPU,
# cores busy with other work; on a GPU, NVML's busy percentage.
IDLE = {"cpu": (0.25, "cores"), "cuda": (5.0, "% GPU busy")}
IDLE_CORES = IDLE["cpu"][0]


def roofs_dir() -> Path:
    """Where this user's roofs are kept: $SWEEPER_ROOFS, else the user's cache folder (read
    when a job asks, so that HOME and the variable as the job sees them decide)."""
    if os.environ.get("SWEEPER_ROOFS"):
        return Path(os.environ["SWEEPER_ROOFS"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "sweeper" / "roofs"


def key(device: str) -> dict:
    """What a roof depends on: the device model, the torch build (its CUDA and cuDNN), the
    method, and for float32 on a GPU whether matmuls may use TF32."""
    if device == "cuda":
        model = torch.cuda.get_device_name()
        build = f"torch {torch.__version__} cuda {torch.version.cuda}"
        tf32, cudnn_tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    else:
        from tasks.cpu_libraries import host_id

        model, build, tf32, cudnn_tf32 = host_id()["cpu"] or "cpu", f"torch {torch.__version__}", False, False
    return {"device": model, "build": build, "tf32": tf32, "cudnn_tf32": cudnn_tf32,
            "threads": torch.get_num_threads() if device != "cuda" else None, "version": VERSION}


def _file(k: dict) -> Path:
    return roofs_dir() / (hashlib.sha1(json.dumps(k, sort_keys=True).encode()).hexdigest()[:16] + ".json")


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def valid(kept: object, k: dict) -> bool:
    """Whether a kept file holds roofs of this key, of the right shape: a positive copy
    bandwidth and positive matmul peaks (a hand-edited "x", a 0, a NaN or a negative figure
    is no roof: measured again), and the load they were measured under."""
    if not isinstance(kept, dict) or kept.get("key") != k or not _positive(kept.get("copy_gbps")):
        return False
    peaks = kept.get("matmul_tflops")
    load = kept.get("load")
    return isinstance(peaks, dict) and bool(peaks) and all(_positive(v) for v in peaks.values()) and \
        isinstance(load, (int, float)) and not isinstance(load, bool) and math.isfinite(load) and load >= 0


def best(kept: dict, new: dict) -> dict:
    """The ceiling of two measurements of one key: each figure the higher, the load the
    idler's, both times said."""
    peaks = dict(kept["matmul_tflops"])
    for d, v in new["matmul_tflops"].items():
        peaks[d] = max(v, peaks.get(d, 0.0))
    return {**new, "copy_gbps": max(kept["copy_gbps"], new["copy_gbps"]), "matmul_tflops": peaks,
            "load": min(kept["load"], new["load"]),
            "measurements": (kept.get("measurements") or [_summary(kept)]) + [_summary(new)]}


def _summary(m: dict) -> dict:
    return {k: m.get(k) for k in ("measured_at", "load", "copy_gbps", "matmul_tflops")}


def _read(path: Path) -> object:
    """A kept file's JSON, or None; a FIFO or any other non-file in its place is not read
    (opening one would wait for a writer)."""
    import stat

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def roofs(device: str, load: float | None = None) -> dict:
    """The device's roofs: kept ones where this user measured them before for the same key
    on a device at least as idle as now, else measured now (on a GPU the caller holds the
    lease) and kept, the best of the old and the new. `reused` says which; `load` (in
    `load_unit`; `loaded` where that was not idle) says how far they are ceilings. `load`:
    how busy the device is now with other work (read here if not given)."""
    k = key(device)
    path = _file(k)
    idle, unit = IDLE["cuda" if device == "cuda" else "cpu"]
    now = load_now(device) if load is None else load
    kept = _read(path)
    if isinstance(kept, dict) and valid(kept, k):
        if kept["load"] < idle or now > kept["load"] - idle:
            return {**kept, "reused": True, "loaded": kept["load"] >= idle, "load_unit": unit}
    else:
        kept = None
    got = {"key": k, **measure(device), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "load": round(max(now, load_now(device) if load is None else now), 2), "load_unit": unit}
    # every measurement said, the first too (the record's roofs always carry `measurements`)
    got = best(kept, got) if kept is not None else {**got, "measurements": [_summary(got)]}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and not path.is_file():
            path.unlink()  # not a file of ours (a FIFO): replaced, not waited on
        atomic_write_text(path, json.dumps(got, indent=1))
    except OSError:
        pass  # a read-only cache folder: measured again by the next job, no worse than that
    return {**got, "reused": False, "loaded": got["load"] >= idle}


def load_now(device: str) -> float:
    """How busy the device is with other work now: on a GPU NVML's busy percentage over
    half a second (0 where NVML cannot say), on a CPU the cores busy with other work."""
    if device == "cuda":
        from tasks.nvml_util import gpu_busy_pct

        return gpu_busy_pct() or 0.0
    return host_load_cores()


def host_load_cores(seconds: float = 0.3) -> float:
    """Cores busy with work other than this process's (and its children's) over the next
    `seconds`: tasks/host_load.py's reading; 0 where /proc cannot say."""
    from tasks.host_load import HostLoad

    load = HostLoad()
    if not load.available:
        return 0.0
    load.enter("roofs")
    time.sleep(seconds)
    load.enter("done")
    return float(load.report().get("roofs") or 0.0)


def measure(device: str) -> dict:
    """{"copy_gbps", "matmul_tflops": {dtype: TFLOP/s}, "seconds"}: the median of timed
    calls after warm-up."""
    t0 = time.time()
    copy = copy_gbps(device)
    n = GPU_N if device == "cuda" else CPU_N
    peaks = {}
    for dtype in GPU_DTYPES if device == "cuda" else CPU_DTYPES:
        try:
            peaks[dtype] = matmul_tflops(device, dtype, n)
        except RuntimeError:  # a dtype this device or build cannot multiply: no roof for it
            continue
    return {"copy_gbps": copy, "matmul_tflops": peaks, "matmul_n": n, "seconds": round(time.time() - t0, 3)}


def copy_gbps(device: str, nbytes: int | None = None) -> float:
    """Memory bandwidth from a copy of `nbytes` (1 GiB on a GPU, 256 MiB on a CPU): each byte
    read once and written once (also the microbenchmarks' peak: tasks/kernel_bench.py)."""
    nbytes = nbytes or ((1 << 30) if device == "cuda" else (1 << 28))
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    ms = statistics.median(time_calls(lambda: dst.copy_(src), 20 if device == "cuda" else 5, device))
    del src, dst
    if device == "cuda":
        torch.cuda.empty_cache()
    return copy_bandwidth_gbps(nbytes, ms)


def matmul_tflops(device: str, dtype: str, n: int) -> float:
    """TFLOP/s of a square torch.mm of `n` in `dtype` ("tf32": float32 with TF32 allowed for
    this product only)."""
    if dtype != "tf32":
        return _mm_tflops(device, getattr(torch, dtype), n)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return _mm_tflops(device, torch.float32, n)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _mm_tflops(device: str, dtype, n: int) -> float:
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        torch.mm(a, b)
    ms = statistics.median(time_calls(lambda: torch.mm(a, b), 10 if device == "cuda" else 3, device))
    del a, b
    if device == "cuda":
        torch.cuda.empty_cache()
    return 2 * n ** 3 / (ms / 1e3) / 1e12
