"""How long a sweep should take, from earlier sweeps' records of the same jobs on the same
GPU model (for the dry run and the live line before the first job ends).

Jobs are matched by their overrides (the command line's keys that set the job, in any
order), not by the record's configuration: a record holds what the job resolved (batch
size, device, precision), which the dry run does not know without building the model.
A job's expected seconds are its last complete sweep's duration_s; the sweep's are the
jobs laid out longest first on the free slots (GPUs), as the launcher starts them. Jobs
with no earlier record are named, never guessed. A max-autotune job's earlier duration
already includes whatever the autotune store saved it then, and a job's earlier warm run
(its compile loaded from the compile store) is what the next run of it will cost again.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import sys
from pathlib import Path

from sweeper.identity import identity_overrides
from sweeper.words import count

EARLIER_SWEEPS = 20  # newest first, at most this many sweep folders are read


def job_identity(overrides: list[str]) -> str:
    """The job's overrides that say what it is (sweeper/identity.py), sorted: the same job
    in any sweep. An override that sets a key to its declared default (`model=resnet18`,
    `autotune=off`) is the default job's too, and is left out, unless a config group
    (`+sweep=...`) is chosen, whose values such an override may be setting back."""
    keep = identity_overrides(overrides)
    pairs = [o.lstrip("+").split("=", 1) for o in keep]
    if not any("/" in pair[0] or pair[0] in _groups() for pair in pairs):
        defaults = _default_texts()
        keep = [o for o, pair in zip(keep, pairs) if _text_of(pair) != defaults.get(pair[0])]
    return " ".join(sorted(keep))


def _groups() -> set[str]:
    """conf/'s config groups (sweep, case, ...), as the command line's check reads them."""
    from sweeper.sweep.overrides import config_groups

    conf = Path(__file__).resolve().parent.parent.parent / "conf"
    return config_groups(conf) if conf.is_dir() else set()


def _text_of(pair: list[str]) -> str | None:
    """An override's value as _default_texts() writes a default: on/true -> true, off/false
    -> false, null, else as given."""
    if len(pair) != 2:
        return None
    value = pair[1].strip()
    words = {"on": "true", "true": "true", "off": "false", "false": "false", "null": "null"}
    return words.get(value.lower(), value)


def _default_texts() -> dict[str, str]:
    """Each declared key (measure.* too) -> its default, as text (sweeper/sweep/config.py)."""
    from enum import Enum

    from sweeper.sweep.config import declared_keys

    def text(value) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if value is None:
            return "null"
        return str(value.value if isinstance(value, Enum) else value)

    return {name: text(key.default) for name, key in declared_keys().items()
            if not isinstance(key.default, (dict, list))}


_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def earlier_sweeps_root(sweep_dir: Path) -> tuple[Path, int]:
    """Where a sweep's earlier sweeps lie, and how deep to look: outputs/DATE/TIME and
    outputs/nightly/DATE lie under outputs/ (two levels); a sweep folder of the user's own
    naming (/tmp/x) has its earlier sweeps beside it, one level under its parent, not every
    folder two levels under the file system's root."""
    sweep_dir = Path(sweep_dir)
    if _DATE_RE.match(sweep_dir.parent.name) or _DATE_RE.match(sweep_dir.name):
        return sweep_dir.parent.parent, 2
    return sweep_dir.parent, 1


def _own(path: Path) -> bool:
    """Whether this user wrote the file: another user's sweep under a shared folder (/tmp)
    is no earlier run of this user's jobs, and is not read."""
    getuid = getattr(os, "getuid", None)
    try:
        return getuid is None or path.stat().st_uid == getuid()
    except OSError:
        return False


def earlier_durations(outputs: Path, keys: set[str], gpu: str | None, depth: int = 2) -> tuple[dict[str, float], int]:
    """job identity -> seconds of its newest ok run on the GPU model `gpu` ("": on a CPU; None:
    on any), from this user's complete sweeps under `outputs` (`depth` levels down); and how
    many sweeps were read."""
    from sweeper.reporting.sweeps import complete_sweeps_under, started_at

    sweeps, skipped = complete_sweeps_under(outputs, depth=depth)
    sweeps = [s for s in sweeps if _own(s / "summary.json")]
    for note in skipped:  # a summary.json no sweep wrote is worth a word; a running sweep is not
        if "summary.json" in note:
            print(f"sweeper: warning: {note} (the estimate goes without it)", file=sys.stderr, flush=True)
    found: dict[str, float] = {}
    read = 0
    for sweep in sorted(sweeps, key=started_at, reverse=True)[:EARLIER_SWEEPS]:
        read += 1
        for path in sorted(sweep.glob("*/result.json")):
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get("job") or {}, dict):
                continue  # not a record: an estimate goes without it
            key = job_identity((rec.get("job") or {}).get("overrides") or [])
            seconds = (rec.get("job") or {}).get("duration_s")
            same_gpu = gpu is None or ((rec.get("environment") or {}).get("gpu") or "") == gpu
            if key in keys and key not in found and rec.get("status") == "ok" and seconds and same_gpu:
                found[key] = float(seconds)
        if len(found) == len(keys):
            break
    return found, read


def sweep_seconds(job_seconds: list[float], slots: int) -> float:
    """Wall seconds of jobs started longest first on `slots` slots, each as one ends."""
    ends = [0.0] * max(1, slots)
    for s in sorted(job_seconds, reverse=True):
        heapq.heappush(ends, heapq.heappop(ends) + s)
    return max(ends)


def expected_line(keys: list[str], labels: list[str], durations: dict[str, float], slots: int, gpu: str | None,
             outputs: Path, read: int) -> str:
    """The dry run's line on expected time."""
    where = (f"on {gpu}" if gpu else "on a CPU" if gpu == "" else
             "on any machine (a cluster's GPU model is known only once joined)")
    if not durations:
        return (f"expected duration: unknown, no earlier record of these jobs {where} in the "
                f"{count(read, 'complete sweep')} under {outputs}")
    known = [durations[k] for k in keys if k in durations]
    missing = [lab for k, lab in zip(keys, labels) if k not in durations]
    line = (f"expected duration: about {duration_words(sweep_seconds(known, slots))} with {slots} at a time, from "
            f"earlier records of {len(known)} of {count(len(keys), 'job')} {where} (under {outputs})")
    if missing and len(missing) <= MISSING_NAMED:
        line += f"; not counted, no earlier record: {', '.join(missing)}"
    elif missing:  # a large sweep: how many, the first few named
        line += (f"; not counted, no earlier record: {count(len(missing), 'job')} ({', '.join(missing[:MISSING_NAMED])} "
                 f"and {len(missing) - MISSING_NAMED} more)")
    return line


MISSING_NAMED = 8  # jobs without an earlier record the dry run names; the rest counted


def duration_words(seconds: float) -> str:
    """A duration as a person reads it: "40 s", "12 min", "2.5 h" (never "0 min")."""
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def expected(overrides: dict[int, list[str]], outputs: Path, gpu: str | None, slots: int,
             depth: int = 2) -> tuple[str, float | None]:
    """For jobs (number -> overrides): the dry run's line and the expected seconds (None
    when no job has an earlier record); earlier sweeps under `outputs`, `depth` levels down
    (earlier_sweeps_root)."""
    keys = [job_identity(o) for o in overrides.values()]
    durations, read = earlier_durations(outputs, set(keys), gpu, depth)
    line = expected_line(keys, [f"#{n}" for n in overrides], durations, slots, gpu, outputs, read)
    known = [durations[k] for k in keys if k in durations]
    return line, (sweep_seconds(known, slots) if known else None)
