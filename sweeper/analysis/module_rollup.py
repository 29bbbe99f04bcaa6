"""A sweep's time by model code rolled up and said (pure): a module's block at a depth, the
time of each block and pass, and a kernel's modules in a line (the tables and reports read
these; sweeper/analysis/attribution.py places the time)."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Mapping


def modules_said(model_modules: object, shown: int = 2) -> str | None:
    """A kernel's model modules as tables keep them ("a; b; c; +47 more", kernel_columns)
    said in a line: the first `shown` and how many more; None where there are none."""
    if not isinstance(model_modules, str) or not model_modules:
        return None
    names = model_modules.split("; ")
    more = int(names.pop()[1:].split()[0]) if names[-1].startswith("+") else 0
    rest = max(len(names) - shown, 0) + more
    return "; ".join(names[:shown]) + (f" and {rest} more" if rest > 0 else "")


def block_of(path: object, depth: int | None) -> str:
    """The block of `depth` components that holds a module ("features.denseblock3.
    denselayer12.conv2" at depth 2 is "features.denseblock3"); depth None: the path
    itself; "(model)" for the model's own code."""
    parts = str(path).split(".") if path else []
    return ".".join(parts if depth is None else parts[:depth]) or "(model)"


def rollup(rows: Iterable[Mapping], depth: int | None = None) -> dict[tuple[str, str], float]:
    """(block_of the module at `depth`, pass) -> ms: a layer's time counted in each block
    that holds it."""
    out: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        out[(block_of(r["module"], depth), r["pass"])] += r["device_ms"]
    return dict(out)
