"""The pure analysis: no torch, no GPU, no subprocess, no Ray.

Layers, each reading only the ones above it: trace (profiler Chrome traces -> kernel
intervals), categories (a kernel's category from its name), breakdown (per-category
device time, kernel tables, busy figures), kernels (which kernels are worth a
microbenchmark), module_source (what a compiled module's source says about its kernels),
reference (what PyTorch's `-p` harness printed, and the comparison with it). The CPU tests
exercise them hardest, on traces and records captured on a GPU (tests/fixtures).
"""
