"""Command lines the tool prints for its users, and reads back (pure): both the sweep side
(the closing report) and the reporting side (report.html) print them; and what the
commands share in reading their own (a count's argument type, a closed pipe)."""

from __future__ import annotations

import argparse
import re
import shlex
from typing import Any


# Characters Hydra's override grammar reads as its own in an unquoted value (lists,
# sweeps, dicts, interpolations, quotes, escapes, whitespace).
_HYDRA_SPECIAL = set(" \t,[]{}()'\"\\=:$*?")


def hydra_value(text: str) -> str:
    """A plain string (a folder's path) as a value Hydra's override parser reads back
    unchanged: as it is where nothing in it is special, else quoted for Hydra."""
    if not text or not (set(text) & _HYDRA_SPECIAL):
        return text
    quote = "'" if "'" not in text else '"'
    # Hydra's quoted strings: a backslash is itself except before the quote or at the end
    escaped = re.sub(r"(\\*)" + quote, lambda m: m.group(1) * 2 + "\\" + quote, text)
    escaped = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, escaped)
    return f"{quote}{escaped}{quote}"


def sweep_dir_override(path) -> str:
    """`hydra.sweep.dir=PATH` for a command line: quoted for Hydra, then for the shell, so
    that a folder with spaces or quotes pastes and runs."""
    return shlex.quote(f"hydra.sweep.dir={hydra_value(str(path))}")


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


def closing_pipe_quietly(main):
    """`main` run as a command whose output may go to a reader that stops early (`sweeper
    --help | head`): a closed pipe ends it quietly, with exit code 1 as Python's own
    handling advises (docs.python.org, "Note on SIGPIPE"), not a traceback."""
    import functools
    import os
    import sys

    @functools.wraps(main)
    def run(*args, **kwargs):
        try:
            result = main(*args, **kwargs)
            sys.stdout.flush()  # a pipe closed while the last of the output waited in the buffer
            return result
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # the interpreter's own flush at exit would raise again
            sys.exit(1)

    return run


def positive(text: str) -> int:
    """An argument that counts something: a whole number of at least 1 (`--last 0` read every
    night, `--last -1` dropped one, `--top -3` printed nonsense)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give 1 or more")
    return value
