"""One cause, one change (pure): the change points of a nightly history
(sweeper/analysis/changes.py) grouped by what moved them together.

A build that slows Triton's reductions moves, on one night, every reduction family it
touches, their category and the kernel time of the jobs that run them: told apart, one
cause reads as dozens of changes. So changes are grouped when they start on the same night
(or the next: a family's located night can be one off, changes.py `_refined`), go the same
way, and share jobs:
- two pooled changes (category, family) when at least half of the smaller one's jobs moved
  in the other too;
- a job's change (its kernel time, step, compile time, memory, check against eager) with a
  pooled change that names its job;
- jobs' changes of one level (compile time, peak memory, ...) on the same night: a compile
  that got 30% slower in 25 jobs at once is one cause, not 25;
- one job's changes of different levels on the same night (its kernels and its step).
Groups are closed under these links (union-find). A cause is said by its lead: the category
where one moved (unless diluted: under half its largest family's change), else the family
that moved the most jobs, else the jobs' level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from sweeper.analysis.changes import Change

POOLED = ("category", "family")
NEAR = 1  # nights apart that two changes of one cause may start (a located night can be one off)
SHARED = 0.5  # of the smaller pooled change's jobs, the share the other must have moved too
_ORDER = {"status": 0, "accuracy": 0, "category": 1, "family": 2, "kernels": 3, "step": 4, "compile": 5, "memory": 6}


@dataclass
class Cause:
    """Changes that one cause made: its lead first, then the others as find_changes ordered them."""

    changes: list[Change]
    jobs: tuple[str, ...] = field(default=())  # every job any of its changes moved

    @property
    def lead(self) -> Change:
        return self.changes[0]

    @property
    def night(self) -> int:
        return min(c.night for c in self.changes)

    @property
    def last_night(self) -> int:
        return max(c.night for c in self.changes)

    @property
    def direction(self) -> str:
        return "fails" if self.lead.level in ("accuracy", "status") else self.lead.direction

    def of(self, level: str) -> list[Change]:
        return [c for c in self.changes if c.level == level]


def _way(c: Change) -> int:
    if c.level in ("accuracy", "status"):
        return 1  # a check that starts failing goes the way of a slowdown
    return 1 if c.size_pct > 0 else -1


def _linked(a: Change, b: Change) -> bool:
    if _way(a) != _way(b) or abs(a.night - b.night) > NEAR:
        return False
    pa, pb = a.level in POOLED, b.level in POOLED
    if pa and pb:
        ja, jb = set(a.jobs), set(b.jobs)
        small = min(len(ja), len(jb))
        return small > 0 and len(ja & jb) >= SHARED * small
    if pa != pb:
        pooled, job = (a, b) if pa else (b, a)
        return job.name in pooled.jobs
    if a.night != b.night:
        return False
    return a.level == b.level or a.name == b.name


def _lead_rank(c: Change) -> tuple:
    """The change that speaks for a cause: a category, else the family that moved the most
    jobs, else the first level by find_changes' order; the larger change first."""
    size = abs(c.size_pct) if c.size_pct == c.size_pct else 0.0
    return (0 if c.level == "category" else 1 if c.level == "family" else 2,
            -len(c.jobs) if c.level in POOLED else _ORDER.get(c.level, 9), -size)


def _lead(members: list[Change]) -> Change:
    """A category speaks for its cause unless it is diluted: under half the size of the
    cause's family that moved the most jobs (+0.5% for the category where the family moved
    +3.9%); then that family does."""
    lead = min(members, key=_lead_rank)
    families = [c for c in members if c.level == "family"]
    if lead.level == "category" and families:
        best = min(families, key=_lead_rank)
        if abs(lead.size_pct) < 0.5 * abs(best.size_pct):
            return best
    return lead


def group(changes: Sequence[Change]) -> list[Cause]:
    """The causes of these changes, the earliest night first (within a night, by lead level
    and size); each change in exactly one cause."""
    parent = list(range(len(changes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(changes)):
        for j in range(i + 1, len(changes)):
            if _linked(changes[i], changes[j]):
                parent[root(i)] = root(j)
    groups: dict[int, list[Change]] = {}
    for i, c in enumerate(changes):
        groups.setdefault(root(i), []).append(c)
    causes = []
    for members in groups.values():
        lead = _lead(members)
        rest = [c for c in members if c is not lead]
        jobs: list[str] = []
        for c in [lead, *rest]:
            for name in (c.jobs if c.level in POOLED else (c.name,)):
                if name not in jobs:
                    jobs.append(name)
        causes.append(Cause([lead, *rest], tuple(jobs)))
    return sorted(causes, key=lambda k: (k.night, _lead_rank(k.lead)))


def moved_estimate(c: Change) -> float:
    """How many jobs a pooled change moved by its mixture estimate (the share of the jobs
    that run it); NaN where not estimated."""
    if c.moved_share != c.moved_share:
        return math.nan
    return c.moved_share * c.jobs_running
