"""Command lines the tool prints for its users, and reads back (pure): both the sweep side
(the closing report) and the reporting side (report.html) print them."""

from __future__ import annotations

import shlex
from typing import Any


def rerun_command(overrides: list[str]) -> str:
    """The command that runs one job alone."""
    return "python -m sweeper " + " ".join(shlex.quote(o) for o in overrides)


def flatten(options: dict | None, prefix: str = "") -> dict[str, Any]:
    """Nested options ({"triton": {"cudagraphs": True}}) as their dotted names, as a user
    writes them after `+inductor.` on the command line."""
    out: dict[str, Any] = {}
    for key, value in (options or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out
