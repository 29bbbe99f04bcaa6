"""Dynamo's graph-break reports, read (pure): where the model's code left the compiled graph
and why, from the text dynamo logs for each break (structured-trace artifact
``dynamo_graph_break_reason``, caught by tasks/capture.py)."""

from __future__ import annotations

import re
from typing import Iterable

from sweeper.analysis.launch_sites import short_file

_AT_RE = re.compile(r"^Graph break in user code at (.+):(\d+)\s*$", re.M)
_FRAME_RE = re.compile(r'^\s*File "(.+?)", line (\d+), in (\S+)\s*$')


def graph_break(report: str) -> dict:
    """One break: {"reason", "at" ("timm/models/x.py:NN"), "code"} from dynamo's report.
    The reason is dynamo's one-line kind ("Unsupported Tensor.backward() call"), or the
    report's reason line where it gives none."""
    lines = report.splitlines()
    m = _AT_RE.search(report)
    at = f"{short_file(m.group(1))}:{m.group(2)}" if m else None
    reason, code = None, None
    for i, line in enumerate(lines):
        if line.startswith("Graph Break Reason:"):
            rest = line[len("Graph Break Reason:"):].strip()
            following = next((x.strip() for x in lines[i + 1:] if x.strip()), "")
            reason = following if rest.startswith("Encountered graph break") and following else rest
            break
    tb = lines.index("User code traceback:") if "User code traceback:" in lines else -1
    if tb >= 0:  # the user frame of the break: the last one of the traceback, and its code line
        end = next((i for i in range(tb + 1, len(lines)) if lines[i].startswith("Traceback")), len(lines))
        frames = [(i, f) for i, x in enumerate(lines[tb + 1:end], tb + 1) if (f := _FRAME_RE.match(x))]
        if frames:
            i, f = frames[-1]
            at = at or f"{short_file(f.group(1))}:{f.group(2)}"
            code = lines[i + 1].strip() if i + 1 < len(lines) else None
    return {"reason": reason or (lines[0].strip() if lines else ""), "at": at, "code": code}


def graph_breaks(reports: Iterable[str]) -> list[dict]:
    """Each distinct break once, with how many times dynamo reported it."""
    out: dict[tuple, dict] = {}
    for r in reports:
        b = graph_break(r)
        key = (b["reason"], b["at"])
        if key in out:
            out[key]["times"] += 1
        else:
            out[key] = {**b, "times": 1}
    return list(out.values())
