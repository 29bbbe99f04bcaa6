"""The order a sweep's jobs start in (pure: job configs in, the next job out).

Longest first: with more jobs than GPUs, a long job started last leaves the other GPUs
idle at the end. When autotune=on jobs share max-autotune results (`autotune_store`),
jobs with the same input shapes (model, mode, batch, image size, precision) autotune the
same ops: one of them goes first, and the group's other autotune=on jobs wait until it
has finished, so that they start with its timings instead of tuning the same shapes at
the same time. Jobs that do not autotune fill the free GPUs meanwhile.

Jobs that differ only in their Python environment (config key `python`: two PyTorch
builds) run one after the other, A then B, each starting as soon as the one before it
ends and before any other job: on one GPU that is A, B, A, B, so that a drift of the
machine hits both builds alike (sweeper/sweep/pythons.py).
"""

from __future__ import annotations

import json
from typing import AbstractSet, Callable, Generic, Hashable, TypeVar

from sweeper.identity import identity

T = TypeVar("T")

_SHAPE_KEYS = ("model", "mode", "batch_size", "image_size", "amp", "amp_dtype", "device")


def shape_group(config: dict) -> tuple:
    return tuple(str(config.get(k)) for k in _SHAPE_KEYS)


def pair_key(config: dict) -> str:
    """Jobs with the same pair key are one job (sweeper/identity.py) but for their Python
    environment."""
    return json.dumps({k: v for k, v in identity(config).items() if k != "python"}, sort_keys=True, default=str)


def expected_cost(config: dict, num: int) -> tuple:
    """A rough rank of how long a job takes: on the H200, max-autotune compiles took 3 to 8
    times as long as default ones (docs/findings.md), and training steps longer than
    inference; then the sweep's own order."""
    return (bool(config["autotune"]), config["mode"] == "training", -num)


class JobQueue(Generic[T]):
    """Jobs not yet started; next() gives the one to start now, or None when every job
    left waits for its group's first autotune=on job to finish (done()).

    Each job's group, whether it shares, whether it leads and what it waits for are worked
    out once, and a started job is only marked: next() reads the jobs left from the first
    one not started and stops at the first that may start, so a sweep of 10,000 jobs costs
    what 1,000 do a job (it was a scan of every job left, a job: 86.8 ms a job at 10,000)."""

    def __init__(self, jobs: list[T], config: Callable[[T], dict], num: Callable[[T], int],
                 shares: Callable[[dict], bool], tuned: AbstractSet[Hashable] = frozenset()) -> None:
        self._order = sorted(jobs, key=lambda j: expected_cost(config(j), num(j)), reverse=True)
        self._group = {id(j): shape_group(config(j)) for j in jobs}
        self._sharing = {id(j) for j in jobs if shares(config(j))}
        self._rank = {id(j): i for i, j in enumerate(self._order)}
        self._leaders: dict[Hashable, T] = {}
        for job in self._order:  # longest first: the first sharing job of a group leads it
            group = self._group[id(job)]
            if id(job) in self._sharing and group not in tuned and group not in self._leaders:
                self._leaders[group] = job
        self._leader_ids = {id(j) for j in self._leaders.values()}
        self._waiting = set(self._leaders)  # groups whose leader has not finished
        # builds compared: each job after the first of its pair waits for the one before it
        pairs: dict[str, list[T]] = {}
        for job in sorted(jobs, key=num):
            if config(job).get("python"):
                pairs.setdefault(pair_key(config(job)), []).append(job)
        self._after: dict[int, T] = {id(b): a for members in pairs.values() for a, b in zip(members, members[1:])}
        by_id = {id(j): j for j in jobs}
        self._next_of: dict[int, T] = {id(a): by_id[b_id] for b_id, a in self._after.items()}
        self._leader_order = [j for j in self._order if id(j) in self._leader_ids]
        self._due: list[T] = []  # pairs' next builds whose build before has ended
        self._ended: set[int] = set()
        self._taken: set[int] = set()  # started (of _order)
        self._start = 0  # _order before this index: all started
        self._front: list[T] = []  # put back: before every other

    def __len__(self) -> int:
        return len(self._front) + len(self._order) - len(self._taken)

    def _left(self):
        yield from self._front
        for job in self._order[self._start:]:
            if id(job) not in self._taken:
                yield job

    def __iter__(self):
        return iter(list(self._left()))

    def _ready(self, job: T) -> bool:
        before = self._after.get(id(job))
        if before is not None and id(before) not in self._ended:
            return False
        group = self._group[id(job)]
        return not (id(job) in self._sharing and group in self._waiting and self._leaders[group] is not job)

    def _first(self, jobs) -> T | None:
        return next((j for j in jobs if self._ready(j)), None)

    def next(self, force: bool = False) -> T | None:
        """The job to start now (a pair's next build right after the one before it, else a
        group's leader, else the first that may start); with force (nothing is running, so
        nothing it could wait for will end), the first job left even if it would wait."""
        front = {id(j) for j in self._front}
        due = sorted((j for j in self._due if id(j) not in self._taken or id(j) in front),
                     key=lambda j: -1 if id(j) in front else self._rank[id(j)])
        leaders = (j for part in ([j for j in self._front if id(j) in self._leader_ids],
                                  (j for j in self._leader_order if id(j) not in self._taken)) for j in part)
        pick = self._first(due) or self._first(leaders) or self._first(self._left())
        if pick is None and force:
            pick = next(iter(self._left()), None)
        if pick is not None:
            self._take(pick)
        return pick

    def _take(self, job: T) -> None:
        if any(j is job for j in self._front):
            self._front = [j for j in self._front if j is not job]
            return
        self._taken.add(id(job))
        while self._start < len(self._order) and id(self._order[self._start]) in self._taken:
            self._start += 1

    def put_back(self, job: T) -> None:
        """A started job to start again, first (run again alone after running out of GPU memory)."""
        self._front.insert(0, job)
        if id(job) in self._group:
            self._taken.add(id(job))  # it is in _front now, not in _order's part left

    def done(self, job: T) -> None:
        """A started job ended (ok or not): its group's other jobs, and the next build of
        its pair, may start."""
        self._ended.add(id(job))
        group = self._group.get(id(job))
        if group is not None and self._leaders.get(group) is job:
            self._waiting.discard(group)
        following = self._next_of.get(id(job))
        if following is not None:
            self._due.append(following)

    def waiting(self) -> int:
        """Jobs left that wait for their group's first job."""
        return sum(1 for j in self._left() if not self._ready(j))
