"""The sweep's progress line: jobs done, running, failed, time so far and left."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    """Jobs done, running, failed, time so far and left. On a terminal: one live line at
    the bottom (rich), with the jobs' own output scrolling above it; otherwise a plain
    line per change (and at least one a minute), for logs and CI.

    Time left counts down between job ends: from the earlier sweeps' estimate
    (`expected_s`, sweeper/sweep/estimate.py) until a job has ended, then from the mean
    duration of the jobs ended so far, re-estimated at each end."""

    def __init__(self, total: int, reused: int, console=None, expected_s: float | None = None) -> None:
        self.total, self.reused, self.t0 = total, reused, time.time()
        self.eta_at = self.t0 + expected_s if expected_s else None
        self.done = self.failed = 0
        self.durations: list[float] = []
        self._last: tuple[int, int, int] | None = None
        self._last_print = 0.0
        self._console = console
        self._live: Any = None  # rich.live.Live while the live line shows

    def start(self) -> None:
        if self._console is None and not sys.stdout.isatty():
            return
        from rich.console import Console
        from rich.live import Live

        console = self._console or Console()
        # Ray prints the workers' output through sys.stdout/err: redirected, it scrolls
        # above the live line instead of tearing it.
        self._live = Live(console=console, refresh_per_second=2, redirect_stdout=True, redirect_stderr=True)
        self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def finished(self, status: str, duration: float, slots: int = 1) -> None:
        self.done += 1
        self.failed += status == "failed"
        self.durations.append(duration)
        left = self.total - self.reused - self.done
        per_job = sum(self.durations) / len(self.durations)
        self.eta_at = time.time() + per_job * left / max(1, min(slots, left)) if left else None

    def line(self, running: int, slots: int) -> str:
        now = time.time()
        eta = ""
        if self.eta_at is not None:
            left_s = self.eta_at - now
            eta = f", about {left_s / 60:.0f} min left" if left_s > 0 else ", running past the estimate"
        return (f"[sweep] {self.done + self.reused}/{self.total} done ({self.reused} from an earlier run), "
                f"{running} running, {self.failed} failed, {(now - self.t0) / 60:.1f} min so far{eta}")

    def show(self, running: int, slots: int) -> None:
        line = self.line(running, slots)
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(line, style="bold red" if self.failed else "bold"))
            return
        state = (self.done, running, self.failed)  # plain lines: a change, or a minute gone
        if state != self._last or time.time() - self._last_print > 60:
            print(line, flush=True)
            self._last, self._last_print = state, time.time()
