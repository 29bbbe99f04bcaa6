"""The device's roofs, measured once per device model and build and kept on the node for
every later job: copy bandwidth (a device-to-device copy, bytes read plus written a
second) and the dense matmul peak per dtype (a large square torch.mm, as cuBLAS or oneDNN
runs it: float32 under the job's own TF32 setting for matmuls, `tf32` with TF32 allowed, as
cuDNN runs float32 convolutions by default). sweeper/analysis/roofline.py
bounds each kernel by them.

Measured, not read from a datasheet: a datasheet's peak is a clock and a count of units,
which no library kernel reaches (an H200's bf16 dense 989 TFLOP/s; an 8192-cube bf16
product measures about 790), so a bound from it would call every GEMM a fifth slow.
Kept in $SWEEPER_ROOFS (default <tmp>/sweeper-roofs), one JSON file per key; a file that
cannot be read is measured again and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from sweeper.analysis.kernels import copy_bandwidth_gbps
from sweeper.record import atomic_write_text
from tasks.timing import time_calls

ROOFS = Path(os.environ.get("SWEEPER_ROOFS") or Path(tempfile.gettempdir()) / "sweeper-roofs")
VERSION = 1  # bump when the method changes: earlier files are then measured again

# The matmul sizes: large enough that the product is bound by arithmetic, small enough to
# take well under a second (a CPU's oneDNN fp32 product of 2048^3 takes ~0.1 to 1 s).
GPU_N, CPU_N = 8192, 2048
GPU_DTYPES = ("bfloat16", "float16", "float32", "tf32")  # tf32: float32 with TF32 allowed (cuDNN's default for convolutions)
CPU_DTYPES = ("float32", "bfloat16")


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
    return ROOFS / (hashlib.sha1(json.dumps(k, sort_keys=True).encode()).hexdigest()[:16] + ".json")


def roofs(device: str) -> dict:
    """The device's roofs: kept ones where this node measured them before for the same key,
    else measured now (on a GPU the caller holds the lease) and kept. `reused` says which."""
    k = key(device)
    path = _file(k)
    try:
        kept = json.loads(path.read_text())
        if kept.get("key") == k:
            return {**kept, "reused": True}
    except (OSError, ValueError):
        pass
    got = {"key": k, **measure(device), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(got, indent=1))
    except OSError:
        pass  # a read-only temp folder: measured again by the next job, no worse than that
    return {**got, "reused": False}


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
