"""Kernel categories: which kind of work a kernel name stands for (pure).

Triton kernels are told apart by the prefixes Inductor gives them with
triton.unique_kernel_names (triton_poi_, triton_red_, ...): the same rule as
torch/_inductor/wrapper_benchmark.py, extended to templates and foreach kernels. Library
kernels (cuBLAS, cuDNN, CUTLASS, nvjet) have vendor names; ATen's own CUDA kernels are
`at::native::...`. On a CPU, Inductor's C++ kernels stand against ATen/oneDNN ops.
"""

from __future__ import annotations

import re

from sweeper.analysis.trace import CPP_KERNEL_RE

TRITON_POINTWISE = "triton_pointwise"
TRITON_REDUCTION = "triton_reduction"
TRITON_PERSISTENT = "triton_persistent_reduction"
TRITON_TEMPLATE = "triton_template"
TRITON_FOREACH = "triton_foreach"
TRITON_OTHER = "triton_other"
LIBRARY = "library_mm_conv"
ATEN = "aten_native"
MEMORY = "memcpy_memset"
CPP = "cpp_kernel"
OTHER = "other"

# Display order and labels: Triton first (what Inductor generated), then libraries.
CATEGORIES: dict[str, str] = {
    TRITON_POINTWISE: "Triton pointwise",
    TRITON_REDUCTION: "Triton reduction",
    TRITON_PERSISTENT: "Triton persistent reduction",
    TRITON_TEMPLATE: "Triton template (max-autotune)",
    TRITON_FOREACH: "Triton foreach",
    TRITON_OTHER: "Triton other",
    CPP: "Inductor C++ kernel",
    LIBRARY: "Library mm/conv (cuBLAS, cuDNN, CUTLASS, nvjet; oneDNN, BLAS on a CPU)",
    ATEN: "ATen native kernel",
    MEMORY: "memcpy/memset",
    OTHER: "other",
}

# The libraries that run on each device, for labels of one device's figures.
_LIBRARY_ON = {"GPU": "Library mm/conv (cuBLAS, cuDNN, CUTLASS, nvjet)", "CPU": "Library mm/conv (oneDNN, BLAS)"}


def category_label(category: str, device: str = "device") -> str:
    """A category's label in a figure of `device`'s time ("GPU", "CPU", or "device" for a
    sweep of both): a CPU run's legend names no GPU library."""
    return _LIBRARY_ON.get(device, CATEGORIES[category]) if category == LIBRARY else CATEGORIES.get(category, category)


_TRITON_PREFIXES = (
    ("triton_poi", TRITON_POINTWISE),
    ("triton_red", TRITON_REDUCTION),
    ("triton_per", TRITON_PERSISTENT),
    ("triton_tem", TRITON_TEMPLATE),
    ("triton_for", TRITON_FOREACH),
)

# Vendor-library kernel names seen on Hopper and Ampere: cuDNN convolutions
# (sm90_xmma_fprop_..., cudnn::...), cuBLAS/cuBLASLt GEMMs (nvjet_..., sm90_xmma_gemm_...,
# cutlass...), flash attention.
_LIBRARY_RE = re.compile(
    r"cudnn|cublas|cutlass|nvjet|xmma|gemm|gemv|conv|wgrad|dgrad|fprop|winograd"
    r"|^sm\d+_|^ampere_|^hopper_|flash|fmha|cutensor",
    re.IGNORECASE,
)
# ATen ops that a CPU build hands to oneDNN (mkldnn) or BLAS.
_CPU_LIBRARY_RE = re.compile(
    r"conv|mm$|mm_|addmm|bmm|matmul|linear|mkldnn|onednn|_scaled_dot_product|baddbmm",
    re.IGNORECASE,
)


def categorize(name: str, trace_cat: str = "kernel") -> str:
    """The category of one profiler event by its name and its trace category."""
    if trace_cat in ("gpu_memcpy", "gpu_memset") or name.startswith(("Memcpy", "Memset")):
        return MEMORY
    if name.startswith("triton_"):
        for prefix, category in _TRITON_PREFIXES:
            if name.startswith(prefix):
                return category
        return TRITON_OTHER
    if trace_cat == "cpu_op":
        if CPP_KERNEL_RE.search(name):
            return CPP
        if _CPU_LIBRARY_RE.search(name):
            return LIBRARY
        return ATEN if "::" in name else OTHER
    if "at::native" in name or "at::cuda" in name or name.startswith("void at::"):
        return ATEN
    if _LIBRARY_RE.search(name):
        return LIBRARY
    return OTHER


# The `-p` harness's categories (wrapper_benchmark.parse_profile_event_list), for
# comparing with it: every non-Triton device event is "unknown" there.
REFERENCE_CATEGORIES = (
    "triton_pointwise",
    "triton_reduction",
    "triton_persistent_reduction",
    "triton_unknown",
    "unknown",
)


def reference_category(category: str) -> str:
    if category in (TRITON_POINTWISE, TRITON_REDUCTION, TRITON_PERSISTENT):
        return category
    if category.startswith("triton_"):
        return "triton_unknown"
    return "unknown"
