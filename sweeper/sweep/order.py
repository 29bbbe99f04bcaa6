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
    left waits for its group's first autotune=on job to finish (done())."""

    def __init__(self, jobs: list[T], config: Callable[[T], dict], num: Callable[[T], int],
                 shares: Callable[[dict], bool], tuned: AbstractSet[Hashable] = frozenset()) -> None:
        self._config, self._shares = config, shares
        self._left = sorted(jobs, key=lambda j: expected_cost(config(j), num(j)), reverse=True)
        self._leaders: dict[Hashable, T] = {}
        for job in self._left:  # longest first: the first sharing job of a group leads it
            group = shape_group(config(job))
            if shares(config(job)) and group not in tuned and group not in self._leaders:
                self._leaders[group] = job
        self._waiting = set(self._leaders)  # groups whose leader has not finished
        # builds compared: each job after the first of its pair waits for the one before it
        pairs: dict[str, list[T]] = {}
        for job in sorted(jobs, key=num):
            if config(job).get("python"):
                pairs.setdefault(pair_key(config(job)), []).append(job)
        self._after: dict[int, T] = {id(b): a for members in pairs.values() for a, b in zip(members, members[1:])}
        self._ended: set[int] = set()

    def __len__(self) -> int:
        return len(self._left)

    def __iter__(self):
        return iter(list(self._left))

    def _ready(self, job: T) -> bool:
        before = self._after.get(id(job))
        if before is not None and id(before) not in self._ended:
            return False
        group = shape_group(self._config(job))
        return not (self._shares(self._config(job)) and group in self._waiting and self._leaders[group] is not job)

    def next(self, force: bool = False) -> T | None:
        """The job to start now; with force (nothing is running, so nothing it could wait
        for will end), the first job left even if it would wait."""
        ready = [j for j in self._left if self._ready(j)] or (list(self._left[:1]) if force else [])
        seconds = [j for j in ready if id(j) in self._after]  # a pair's next build, right after the one before
        leaders = [j for j in ready if any(j is lead for lead in self._leaders.values())]
        candidates = seconds or leaders or ready
        pick = candidates[0] if candidates else None
        if pick is not None:
            self._left.remove(pick)
        return pick

    def put_back(self, job: T) -> None:
        """A started job to start again, first (run again alone after running out of GPU memory)."""
        self._left.insert(0, job)

    def done(self, job: T) -> None:
        """A started job ended (ok or not): its group's other jobs, and the next build of
        its pair, may start."""
        self._ended.add(id(job))
        group = shape_group(self._config(job))
        if self._leaders.get(group) is job:
            self._waiting.discard(group)

    def waiting(self) -> int:
        """Jobs left that wait for their group's first job."""
        return sum(1 for j in self._left if not self._ready(j))
