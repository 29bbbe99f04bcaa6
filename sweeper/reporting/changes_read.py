"""The nightly history's change points read from the sweeps' tables (`python -m
sweeper.history changes`, the nightly report's "What changed"): the nights under a root or
before a sweep, their tables built into a history (sweeper/analysis/changes.py), its
changes and their causes. Said in words by sweeper/reporting/changes_text.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sweeper.analysis import causes as ca
from sweeper.analysis import changes as ch
from sweeper.reporting import sweeps as sw
from sweeper.reporting.change_rates import false_rate_line
from sweeper.reporting.load import AggregateError, LoadedSweep
from sweeper.reporting.sweep_tables import UNREADABLE, with_unreadable


NIGHTS = 30  # nights read by default


MIN_NIGHTS = 2 * ch.PERSIST + 1  # fewer: no change point can be told


@dataclass
class Changes:
    nights: list[str]
    sweeps: list[Path]
    history: ch.History
    changes: list[ch.Change]
    notes: list[str] = field(default_factory=list)
    false_rate: str = ""

    @property
    def causes(self) -> list[ca.Cause]:
        """The changes grouped into their causes (sweeper/analysis/causes.py)."""
        return ca.group(self.changes)


HISTORY_NIGHTS = 30  # nights the report's change points read


def history_changes(sweep: LoadedSweep) -> tuple[Changes | None, list[str]]:
    """For the report: the change points of the nightly history that ends with this sweep
    (the complete sweeps beside it, as `history changes` reads its parent, up to this one),
    when there are enough nights to tell one (MIN_NIGHTS); else None. The
    history's sweeps are read from their tables (this one's, the aggregate has just written)."""
    if not sw.sweep_state(sweep.path)[0]:
        return None, []
    here = Path(sweep.path).resolve()
    sweeps, _ = sw.complete_sweeps_under(here.parent, depth=1)
    if here not in sweeps:
        return None, []
    sweeps = sweeps[:sweeps.index(here) + 1][-HISTORY_NIGHTS:]
    if len(sweeps) < MIN_NIGHTS:
        return None, []
    try:
        return changes_of(sweeps), []
    except AggregateError as e:
        return None, [f"no change points over the history: {e}"]


def _night_tables(t) -> tuple[str, pd.DataFrame, pd.DataFrame]:
    """A night's (name, jobs, step kernels) from its SweepTables."""
    kernels = t.kernels
    if "scope" in kernels:
        kernels = kernels[kernels["scope"] == "step"]
    # only what the history reads, the names as categories: 30 nights of 1,000 jobs are held at once
    keep = [c for c in ("job", "kernel", "category", "device_ms", "model_modules") if c in kernels]
    kernels = kernels[keep].astype({c: "category" for c in ("kernel", "category", "model_modules") if c in keep})
    return Path(t.path).name, t.jobs, kernels


def read_changes(root: Path, last: int = NIGHTS, penalty: float = ch.PENALTY, q: float = ch.FDR_Q) -> Changes:
    """The change points of the last `last` complete sweeps under `root` (as `trend` reads
    them), from their tables."""
    sweeps, notes = sw.complete_sweeps_under(Path(root))
    return changes_of(sweeps[-last:], notes, penalty, q)


def changes_of(sweeps: list[Path], notes: list[str] | None = None, penalty: float = ch.PENALTY,
               q: float = ch.FDR_Q) -> Changes:
    """The change points of these complete sweeps, oldest first (the report's history and
    trend's marks: they have the sweeps already)."""
    notes = list(notes or [])
    read = [sw.sweep_tables(s) for s in sweeps]
    for i, t in enumerate(read):
        if t.unreadable:  # a job whose record cannot be read is said, and its status is a change
            read[i] = with_unreadable(t, read[i - 1] if i else t)
            notes += [f"{Path(t.path).name}: job #{num}'s record cannot be read ({why}); counted as "
                      f"{UNREADABLE}" for num, why in sorted(t.unreadable.items())]
    nights = [_night_tables(t) for t in read]
    history = ch.build_history(nights, modules_of=_family_modules(nights))
    found = ch.find_changes(history, penalty, q) if len(sweeps) >= MIN_NIGHTS else []
    return Changes([s.name for s in sweeps], sweeps, history, found, notes, false_rate_line(len(history.jobs)))


def _family_modules(nights) -> dict[str, list[str]]:
    """Each kernel family's model modules (the kernels table's model_modules), most named first."""
    counts: dict[str, dict[str, int]] = {}
    for _, _, kernels in nights[-3:]:  # the latest nights say it well enough
        if "model_modules" not in kernels:
            continue
        for kernel, mods in zip(kernels["kernel"], kernels["model_modules"]):
            if not isinstance(mods, str) or not mods:
                continue
            fam = counts.setdefault(ch.family_of(kernel), {})
            for m in mods.split("; "):
                if not m.startswith("+"):
                    fam[m] = fam.get(m, 0) + 1
    return {f: [m for m, _ in sorted(c.items(), key=lambda kv: -kv[1])[:5]] for f, c in counts.items()}
