"""What an element of a pointwise ATen op costs inside a fused kernel, against an add (pure).

A fused kernel's time is shared among the model modules of its nodes by their work: the
elements each node touches times what an element of its op costs. By elements alone, a
kernel fusing lgamma with eight multiply-adds gave lgamma's module 5% of the kernel; timed
apart it is about 68%. The costs: each op compiled alone by Inductor on a CPU, one thread,
on data in cache, its time over an add's (bench/op_costs.py, 2026-12-08: results in
bench/results/model_code/op_costs.md), rounded; an op not listed costs as an add. Not
measured on a GPU, where a fused pointwise kernel is mostly bound by its loads and stores,
so these weights overstate a transcendental there (docs/findings.md)."""

from __future__ import annotations

COST = {"rsqrt": 2, "exp": 2, "log": 3, "sigmoid": 2, "tanh": 12, "erf": 8, "gelu": 3, "silu": 3, "sin": 9,
        "cos": 9, "pow": 13, "log1p": 5, "expm1": 7, "lgamma": 32, "digamma": 80}


def cost(op: str | None) -> float:
    """An element of `op` (its ATen name: "lgamma"), in adds."""
    return float(COST.get(op or "", 1))
