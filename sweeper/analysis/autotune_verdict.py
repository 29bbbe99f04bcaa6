"""One verdict on max-autotune per pair of twin jobs (autotune off and on, nothing else
apart), from the figure that can carry it (pure: two jobs-table rows in, a verdict out).

Two figures could say whether autotune helped, and they can disagree:

- the kernels' time a step (the profiled steps' GPU time, `device_ms`): what autotune
  changes. It does not follow the host. Its noise between two runs of one job is wide
  because max-autotune chooses again each run: the same resnet18 autotune=on job run twice
  on an H200 gave 0.683 and 0.649 ms (5.0%), and identical nightly runs moved a job's
  kernel time by up to 5.0% (bench/results/packing/serial_noise, bench/results/nightly).
  So a change within RERUN_DEVICE_PCT is "within noise", whatever the page's decimals say.
- the step's wall time (the steady loop's, and the timed steps' median). It follows the
  kernels only where the GPU is kept busy; in a launch-bound step it follows the launches
  and the host's speed. Its change is said only where something autotune did accounts for
  it: the kernels' time (the GPU busy at least STEP_FOLLOWS_BUSY_PCT in both jobs), or the
  number of launches a step (a template that fused an epilogue launches fewer kernels). A
  step that moved while neither did is the host's doing, and where the timed median and
  the steady loop move in opposite directions nothing can be told from them.

At most one speedup is stated per figure, and only beyond its noise: "1.20x" never stands
beside a kernel time that did not move (an H100 pair: kernels 1.577 -> 1.573 ms, the
median step 3.47 -> 5.06 ms, the steady loop 4.71 -> 3.91 ms, GPU busy 33-40%).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

RERUN_DEVICE_PCT = 5.0  # one job's kernel time a step, run twice with max-autotune (see above)
STEP_FOLLOWS_BUSY_PCT = 80.0  # GPU busy in both jobs at least this: the step follows its kernels
STEP_MIN_NOISE_PCT = 2.0  # a step's own noise is never taken as less than this
FASTER, SLOWER, WITHIN, CANNOT_TELL = "faster", "slower", "within noise", "cannot tell"


@dataclass(frozen=True)
class Change:
    """One figure off against on: ms each, the change % (on against off), the noise it is
    held against (±%), and the word for it."""

    off: float
    on: float
    change_pct: float
    noise_pct: float
    word: str

    @property
    def speedup(self) -> float:
        return self.off / self.on

    def said(self) -> str:
        """"1.18x faster", "9.1% slower", "within noise (-4.0%, noise ±5.0%)"."""
        if self.word == FASTER:
            return f"{self.speedup:.2f}x faster"
        if self.word == SLOWER:
            return f"{self.change_pct:.1f}% slower" if self.change_pct < 100 else f"{1 / self.speedup:.2f}x slower"
        return f"within noise ({self.change_pct:+.1f}%, noise ±{self.noise_pct:.1f}%)"


@dataclass(frozen=True)
class TwinVerdict:
    gpu: Change | None  # the kernels' time a step; None on a CPU (the host is the device)
    step: Change | None  # the step's wall time, where it was measured
    step_word: str  # faster, slower, within noise, cannot tell
    step_why: str  # what accounts for the step's change, or why it cannot be told
    figures: dict = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        """The one speedup the page may state: the step's where its change is accounted
        for, else the kernels' where they moved beyond noise; None otherwise."""
        if self.step is not None and self.step_word in (FASTER, SLOWER):
            return self.step.speedup
        if self.gpu is not None and self.gpu.word in (FASTER, SLOWER):
            return self.gpu.speedup
        return None

    @property
    def saved_ms(self) -> float | None:
        """Milliseconds a step that max-autotune saves, from the figure the speedup is of."""
        if self.step is not None and self.step_word in (FASTER, SLOWER):
            return self.step.off - self.step.on
        if self.gpu is not None and self.gpu.word in (FASTER, SLOWER):
            return self.gpu.off - self.gpu.on
        return None


def as_float(x) -> float | None:
    """A table cell as a float: None for a missing, non-numeric or NaN value."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def change(off: float, on: float, noise: float) -> Change:
    """One figure off against on, judged against `noise` (±%)."""
    pct = (on / off - 1) * 100
    word = WITHIN if abs(pct) <= noise else SLOWER if pct > 0 else FASTER
    return Change(off, on, pct, noise, word)


def _step_noise(off: Mapping, on: Mapping) -> float:
    """Both jobs' own step noise (regression.step_noise_pct) added, at least
    STEP_MIN_NOISE_PCT."""
    return max(STEP_MIN_NOISE_PCT, sum(as_float(r.get("step_noise_pct")) or 0.0 for r in (off, on)))


def repeat_spreads(off: Mapping, on: Mapping, figure: str) -> list[float]:
    """How far a figure spread over each side's repeats, % (sweeper/analysis/repeats.py puts
    `<figure>_spread_pct` in a row that stands for several jobs); [] for single jobs."""
    return [v for v in (as_float(r.get(f"{figure}_spread_pct")) for r in (off, on)) if v is not None]


def twin_noise_pct(off: Mapping, on: Mapping) -> float:
    """The noise a pair's kernel times are held against, ±%: RERUN_DEVICE_PCT on a GPU (its
    kernels do not follow the host); on a CPU, whose kernels are the host's, the twins' step
    noise added where that is wider; and where a side is several repeats, their spread if
    wider still."""
    if isinstance(off.get("gpu"), str) and off.get("gpu"):
        base = RERUN_DEVICE_PCT
    else:
        base = max(RERUN_DEVICE_PCT, sum(as_float(r.get("step_noise_pct")) or 0.0 for r in (off, on)))
    return max([base, *repeat_spreads(off, on, "device_ms")])


def _launches_account(off: Mapping, on: Mapping, step_pct: float) -> float | None:
    """The change of launches a step, %, where it goes the step's way and is at least half
    as large (a launch-bound step follows its launches at most one for one); else None."""
    a, b = as_float(off.get("kernel_launches")), as_float(on.get("kernel_launches"))
    if not a or b is None or abs(b - a) < 1:
        return None
    pct = (b / a - 1) * 100
    return pct if pct * step_pct > 0 and abs(pct) >= abs(step_pct) / 2 else None


def twin_verdict(off: Mapping, on: Mapping) -> TwinVerdict | None:
    """The verdict on a pair of jobs-table rows (autotune off, on); None where either lacks
    a step time."""
    wall_off = as_float(off.get("steady_step_ms")) or as_float(off.get("compiled_step_ms"))
    wall_on = as_float(on.get("steady_step_ms")) or as_float(on.get("compiled_step_ms"))
    if not wall_off or not wall_on:
        return None
    on_gpu = bool(off.get("gpu")) and isinstance(off.get("gpu"), str)
    d_off, d_on = as_float(off.get("device_ms")), as_float(on.get("device_ms"))
    gpu = change(d_off, d_on, twin_noise_pct(off, on)) if on_gpu and d_off and d_on else None
    busy = [as_float(r.get("busy_pct")) for r in (off, on)]
    followed = on_gpu and all(b is not None and b >= STEP_FOLLOWS_BUSY_PCT for b in busy)
    # a step that follows its kernels has their run-to-run noise too: a re-run chooses again;
    # repeats of a side (seeds) add how far their steps spread
    step_figure = "steady_step_ms" if as_float(off.get("steady_step_ms")) else "compiled_step_ms"
    noise = max([_step_noise(off, on), RERUN_DEVICE_PCT if followed else 0.0,
                 *repeat_spreads(off, on, step_figure)])
    step = change(wall_off, wall_on, noise)
    figures: dict = {"step_noise_pct": noise}
    # the two step figures: the timed steps' median and the steady loop, where both exist
    m_off, m_on, l_off, l_on = (as_float(r.get(k)) for k in ("compiled_step_ms", "steady_step_ms") for r in (off, on))
    if m_off and m_on and l_off and l_on:
        m_pct, l_pct = (m_on / m_off - 1) * 100, (l_on / l_off - 1) * 100
        figures.update(median_change_pct=m_pct, loop_change_pct=l_pct)
        if m_pct * l_pct < 0 and min(abs(m_pct), abs(l_pct)) > noise:
            return TwinVerdict(gpu, step, CANNOT_TELL, f"the step times disagree: the timed steps' median moved "
                               f"{m_pct:+.1f}%, the steady loop {l_pct:+.1f}%", figures)
    if step.word == WITHIN:
        return TwinVerdict(gpu, step, WITHIN, "", figures)
    if not on_gpu:  # the host is the device: its step is the figure
        return TwinVerdict(gpu, step, step.word, "", figures)
    known = [b for b in busy if b is not None]
    busy_said = (f"the GPU is busy {min(known):.0f}-{max(known):.0f}% of the step" if len(known) == 2
                 else "the GPU's busy share is not known")
    if gpu is not None and gpu.word == step.word and followed:
        return TwinVerdict(gpu, step, step.word, f"it follows the kernels ({busy_said})", figures)
    launches = _launches_account(off, on, step.change_pct)
    if launches is not None and not followed:  # launches cost a launch-bound step, not a busy one
        figures["launch_change_pct"] = launches
        return TwinVerdict(gpu, step, step.word, f"it follows the launches: {as_float(off.get('kernel_launches')):.0f} -> "
                           f"{as_float(on.get('kernel_launches')):.0f} a step ({launches:+.1f}%; {busy_said})", figures)
    why = f"it moved {step.change_pct:+.1f}% while "
    why += ("the kernels' time and the launches did not" if gpu is None or gpu.word == WITHIN
            else f"the kernels' time moved {gpu.change_pct:+.1f}% and {busy_said}")
    speeds = [as_float(r.get("launch_us")) for r in (off, on)]
    if all(speeds):
        why += f"; the host launched at {speeds[0]:.1f} and {speeds[1]:.1f} µs a launch"
    return TwinVerdict(gpu, step, CANNOT_TELL, why + ": the host's doing, not autotune's", figures)


def sentence(v: TwinVerdict) -> str:
    """The verdict in words, the kernels first: "the kernels' time a step goes from 58.9 ms
    to 56.6 ms: within noise (-4.0%, noise ±5.0%); the step: cannot tell (...)"."""
    parts = []
    if v.gpu is not None:
        parts.append(f"the kernels' time a step goes from {ms_said(v.gpu.off)} to {ms_said(v.gpu.on)}: {v.gpu.said()}")
    if v.step is not None:
        if v.step_word in (FASTER, SLOWER):
            parts.append(f"the step {ms_said(v.step.off)} -> {ms_said(v.step.on)}: {v.step.said()} ({v.step_why})")
        elif v.step_word == WITHIN:
            parts.append(f"the step {ms_said(v.step.off)} -> {ms_said(v.step.on)}: {v.step.said()}")
        else:
            parts.append(f"the step: cannot tell ({v.step_why})")
    return "; ".join(parts)


def ms_said(x: float) -> str:
    """Milliseconds to three significant places or so: 0.645 ms, 8.24 ms, 58.9 ms."""
    return f"{x:.3f} ms" if x < 1 else f"{x:.2f} ms" if x < 10 else f"{x:.1f} ms"
