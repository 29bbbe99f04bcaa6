"""Max-autotune's decisions and whether they mean anything (pure: autotune-store documents in,
rows out).

For every op it tunes (an mm, addmm or convolution of given input shapes, strides and dtype),
max-autotune times each choice (Triton templates of several configs, and the library call:
cuBLAS, cuDNN) once and keeps the fastest; Inductor's autotune cache, which the autotune
store keeps (sweeper/stores/autotune_store.py, `cache`), holds every choice's time. A
decision is the winner against the runner-up: its margin. Whether the margin means anything
depends on how much one choice's time moves between two timings of it: the noise, read from
the same op timed in two or more runs (two stores, or exports of them), each choice's times
compared. A margin inside the noise is marked "within noise": the next run may well choose
the other, and the gain it reports against the library call is as likely a coin flip.

Measured on an H200 (bench/results/autotune_decisions/): the same autotune=on job run twice,
one job a GPU, chose another template for 9 of 12 ops, and one choice's two timings were
8.2% apart at the median.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

# The templates among the choices: code Inductor generated ("triton_mm", "triton_convolution2d",
# a CPU's C++ GEMM "CppMicroGemmFP32Vec", CUTLASS and CK kernels, decompose-k subgraphs); every
# other choice is a library call (an ExternKernelChoice: cuBLAS "addmm", cuDNN "convolution",
# MKL "_mkl_linear", oneDNN).
TEMPLATE_PREFIXES = ("triton_", "cpp", "cutlass", "ck", "rocm", "decompose_k")

# A decision is within noise when its margin is under this quantile of the relative
# difference between two timings of one choice: at the 90th, one in ten repeat timings of a
# choice moves by more than the margin, enough for the runner-up to overtake.
NOISE_QUANTILE = 0.9
WITHIN, REAL, UNKNOWN = "within noise", "beyond noise", "noise unknown"


@dataclass(frozen=True)
class Key:
    """One tuned op: the op, its inputs as Inductor keys them (device, dtype, sizes,
    strides, offset of each), the matmul precision it was timed under."""

    op: str
    inputs: str
    precision: str


def timings(doc: Mapping) -> dict[Key, dict[str, float]]:
    """Every tuned op of an autotune-store document -> {choice: ms}, the choices that timed
    (Inductor writes inf for a choice that failed to compile or run: left out)."""
    out = {}
    for op, inputs in (doc.get("cache") or {}).items():
        for key, by_precision in inputs.items():
            for precision, times in by_precision.items():
                ok = {c: float(t) for c, t in times.items() if isinstance(t, (int, float)) and t != float("inf") and t > 0}
                if ok:
                    out[Key(op, key, precision)] = ok
    return out


def repeat_runs(doc: Mapping) -> list[dict[Key, dict[str, float]]]:
    """A store document's earlier timings (`repeats`: a choice timed again keeps its earlier
    times there) as runs beside its `cache`: run i holds each choice's i-th latest earlier time."""
    runs: list[dict[Key, dict[str, float]]] = []
    for op, inputs in (doc.get("repeats") or {}).items():
        for key, by_precision in inputs.items():
            for precision, choices in by_precision.items():
                for choice, times in choices.items():
                    for i, ms in enumerate(reversed(list(times))):
                        while len(runs) <= i:
                            runs.append({})
                        runs[i].setdefault(Key(op, key, precision), {})[choice] = float(ms)
    return runs


def timed_again(times: Mapping[Key, Mapping[str, float]], seed: Mapping[Key, Mapping[str, float]]) -> dict[Key, dict[str, float]]:
    """The ops of a job's cache (`times`) that its compile timed itself: not in its seed, or
    timed otherwise than there (a seeded op Inductor found complete it does not time again)."""
    return {k: dict(v) for k, v in times.items() if k not in seed or dict(seed[k]) != dict(v)}


def kind(choice: str) -> str:
    """template or library: a choice's name starts with what made it ("triton_mm-...",
    "CppMicroGemmFP32Vec-...", "addmm-...", "bias_addmm-...", "convolution-...", "_mkl_linear-...")."""
    return "template" if family(choice).lower().startswith(TEMPLATE_PREFIXES) else "library"


def family(choice: str) -> str:
    """The choice without its config hash: "triton_mm", "bias_addmm"."""
    return choice.split("-", 1)[0]


def relative_gaps(runs: Sequence[Mapping[Key, Mapping[str, float]]], leave_out: Key | None = None) -> list[float]:
    """How far one choice's two timings are apart, relative to their mean: every choice
    timed for the same op in two runs, each pair of runs (`leave_out`: an op whose own gaps
    are not counted, to judge its decision by the others')."""
    gaps = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            for key in runs[i].keys() & runs[j].keys():
                if key == leave_out:
                    continue
                a, b = runs[i][key], runs[j][key]
                gaps += [abs(a[c] - b[c]) / ((a[c] + b[c]) / 2) for c in a.keys() & b.keys()]
    return gaps


def noise_pct(gaps: Sequence[float], quantile: float = NOISE_QUANTILE) -> float | None:
    """The `quantile` of the relative gaps, %; None with fewer than 10 gaps (too few to say)."""
    if len(gaps) < 10:
        return None
    ordered = sorted(gaps)
    return 100 * ordered[min(int(quantile * len(ordered)), len(ordered) - 1)]


def _mark(margin: float | None, noise: float | None) -> str:
    return UNKNOWN if noise is None or margin is None else WITHIN if margin < noise else REAL


def decision(key: Key, times: Mapping[str, float], noise: float | None) -> dict:
    """One op's two decisions. Which choice: the winner against the runner-up, their margin
    (% of the winner's time) and its mark. Template or library: the best template against
    the best library call (what autotune off runs), the margin between them and its mark,
    and the winner's gain on the library call (0 where the library call won)."""
    ranked = sorted(times, key=lambda c: times[c])
    win = ranked[0]
    up = ranked[1] if len(ranked) > 1 else None
    margin = (times[up] - times[win]) / times[win] * 100 if up else None
    library = [c for c in ranked if kind(c) == "library"]
    template = [c for c in ranked if kind(c) == "template"]
    lib_ms = times[library[0]] if library else None
    tem_ms = times[template[0]] if template else None
    versus = abs(lib_ms - tem_ms) / min(lib_ms, tem_ms) * 100 if lib_ms is not None and tem_ms is not None else None
    return {"op": key.op, "inputs": key.inputs, "precision": key.precision, "choices": len(ranked),
            "winner": win, "winner_kind": kind(win), "winner_ms": times[win],
            "runner_up": up, "runner_up_ms": times[up] if up else None, "margin_pct": margin,
            "noise_pct": noise, "mark": _mark(margin, noise),
            "library_ms": lib_ms, "template_ms": tem_ms, "library_margin_pct": versus,
            "library_mark": _mark(versus, noise),
            "gain_ms": lib_ms - times[win] if lib_ms is not None else None}


def decisions(doc_times: Mapping[Key, Mapping[str, float]], noise_runs: Sequence[Mapping[Key, Mapping[str, float]]] = (),
              quantile: float = NOISE_QUANTILE) -> list[dict]:
    """Every decision of one run (`doc_times`: timings() of its store), each marked against
    the noise of the runs in `noise_runs` (timings() of two or more runs; this run may be
    one of them): an op timed in those runs is judged by the other ops' gaps, so that its
    own flip does not decide its mark. Costliest winner first."""
    pooled = noise_pct(relative_gaps(noise_runs), quantile) if noise_runs else None
    out = []
    for key, times in doc_times.items():
        own = any(key in r for r in noise_runs)
        noise = noise_pct(relative_gaps(noise_runs, leave_out=key), quantile) if own else pooled
        out.append(decision(key, times, noise))
    out.sort(key=lambda r: -r["winner_ms"])
    return out


def flips(before: Mapping[Key, Mapping[str, float]], after: Mapping[Key, Mapping[str, float]],
          marked: Iterable[dict]) -> list[dict]:
    """The decisions of `before` (marked: decisions() of it) against the same ops in
    `after`: whether the winner changed, and the mark it had."""
    by_key = {(d["op"], d["inputs"], d["precision"]): d for d in marked}
    out = []
    for key in before.keys() & after.keys():
        d = by_key.get((key.op, key.inputs, key.precision))
        if d is None:
            continue
        times = after[key]
        other = min(times, key=lambda c: times[c])
        out.append({**d, "winner_after": other, "flipped": other != d["winner"],
                    "kind_flipped": kind(other) != kind(d["winner"])})
    return out


def summary(rows: Sequence[dict]) -> dict:
    """Counts of a decision table: which-choice decisions within noise, beyond, unknown; the
    templates that won, and of those, how many won on the library call beyond noise; the
    winners' gain on the library call in all and beyond noise (ms, each op's call once)."""
    def total(rs) -> float:
        return sum(r["gain_ms"] for r in rs if r["gain_ms"] is not None and r["winner_kind"] == "template")

    won = [r for r in rows if r["winner_kind"] == "template"]
    real = [r for r in won if r["library_mark"] == REAL]
    return {"decisions": len(rows), "within_noise": sum(r["mark"] == WITHIN for r in rows),
            "beyond_noise": sum(r["mark"] == REAL for r in rows),
            "noise_unknown": sum(r["mark"] == UNKNOWN for r in rows),
            "templates_won": len(won), "templates_won_beyond_noise": len(real),
            "gain_ms": total(rows), "gain_beyond_noise_ms": total(real),
            "median_margin_pct": statistics.median([r["margin_pct"] for r in rows if r["margin_pct"] is not None])
            if any(r["margin_pct"] is not None for r in rows) else None}
