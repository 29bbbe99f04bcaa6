"""What eager code outside the compiled graphs is, by the autograd node around it in a CPU
trace (torch::autograd::AccumulateGrad: a parameter's gradient copied into its .grad), in a
reader's words (pure: no torch)."""

from __future__ import annotations

from typing import Iterable

from sweeper.analysis.trace import Interval


_AUTOGRAD_NODE = "autograd::engine::evaluate_function: "
_OUTSIDE_WORDS = {"AccumulateGrad": "autograd's AccumulateGrad (each parameter's gradient into its .grad)"}


def outside_words(name: str | None) -> str:
    """A reader's words for what ran outside the compiled graphs: the autograd node (or, on a
    GPU, the ATen op linked to the kernel), or eager code where the trace does not say."""
    if not name:
        return "eager code (the trace does not say which)"
    short = name.rsplit("::", 1)[-1]
    return _OUTSIDE_WORDS.get(short, f"autograd's {short}" if name.startswith("torch::autograd") else name)


def autograd_nodes(events: Iterable[dict], kernels: list[Interval]) -> list[str | None]:
    """For each CPU kernel (an op of a CPU trace), the autograd node running it
    ("torch::autograd::AccumulateGrad"), or None: the innermost
    `autograd::engine::evaluate_function` range around its start."""
    import bisect

    ranges = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)), str(e["name"])[len(_AUTOGRAD_NODE):])
                    for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(_AUTOGRAD_NODE))
    starts = [r[0] for r in ranges]
    out: list[str | None] = []
    for k in kernels:
        found = None
        # ranges nest: scanning back from the last one to start before the op, the first that
        # still holds it is the innermost (a few hundred back at most: one a parameter)
        for i in range(bisect.bisect_right(starts, k.start_us) - 1, max(-1, bisect.bisect_right(starts, k.start_us) - 2000), -1):
            if ranges[i][1] >= k.start_us:
                found = ranges[i][2]
                break
        out.append(found)
    return out
