"""What an element of each pointwise ATen op costs inside a fused kernel, against an add.

    python bench/op_costs.py [--elements 262144] [--repeats 30] [--out bench/results/model_code/op_costs.md]

A fused kernel's time is shared among the model modules of its nodes by what each node costs
(sweeper/analysis/op_costs.py). Each op is compiled alone by Inductor on this machine's CPU
(one thread), `op(x)` on a float32 tensor small enough to stay in cache, so that the
element's compute, not memory, is timed; its time over the time of `x + 1` is its cost.
Printed as the table sweeper/analysis/op_costs.py holds (rounded), with the raw ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

OPS = {
    "add": lambda x: x + 1.0, "mul": lambda x: x * 1.0001, "relu": torch.relu, "abs": torch.abs,
    "neg": torch.neg, "where": lambda x: torch.where(x > 0.5, x, 0.0), "clamp": lambda x: x.clamp(0.1, 0.9),
    "reciprocal": torch.reciprocal, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "div": lambda x: x / 1.7,
    "exp": torch.exp, "log": torch.log, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "erf": torch.erf, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
    "sin": torch.sin, "cos": torch.cos, "pow": lambda x: torch.pow(x, 2.5), "log1p": torch.log1p,
    "expm1": torch.expm1, "lgamma": torch.lgamma, "digamma": torch.digamma,
}


def timed(fn, x: torch.Tensor, repeats: int) -> float:
    compiled = torch.compile(fn)
    for _ in range(3):
        compiled(x)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(20):
            compiled(x)
        times.append((time.perf_counter() - t0) / 20)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=262144)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    torch.set_num_threads(1)
    x = torch.rand(a.elements) * 0.9 + 0.05  # in (0.05, 0.95): every op defined
    base = timed(OPS["add"], x, a.repeats)
    rows = []
    for name, fn in OPS.items():
        t = timed(fn, x, a.repeats)
        rows.append((name, t / base, t / a.elements * 1e9))
        print(f"{name:12s} {t / base:6.2f}x add  ({t / a.elements * 1e9:.2f} ns an element)", flush=True)
    lines = ["# Pointwise ops' cost inside a fused kernel, against an add", "",
             f"`python bench/op_costs.py --elements {a.elements} --repeats {a.repeats}` "
             f"({time.strftime('%Y-%m-%d')}; torch {torch.__version__}, CPU, one thread, each op compiled alone "
             "by Inductor on a float32 tensor that stays in cache)", "",
             "| op | cost against an add | ns an element |", "|---|---:|---:|"]
    lines += [f"| {n} | {r:.2f} | {ns:.2f} |" for n, r, ns in rows]
    lines += ["", "As sweeper/analysis/op_costs.py holds them (rounded; an op not listed costs 1):", "", "```",
              "COST = {" + ", ".join(f'"{n}": {max(1, round(r))}' for n, r, _ in rows if round(r) > 1) + "}", "```"]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
