"""What to turn on of max-autotune, a finding per pair of jobs apart in autotune only (pure:
the jobs table in; sweeper/analysis/autotune_advice.py splits the gain). Where the sweep also
holds the model run with the advised settings, the finding says how much of the full gain
that run kept and at what compile time; and it names the model's jobs that no other beats
on cold compile seconds, kernels' time and peak memory at once."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from sweeper.analysis.autotune_advice import GAINS, LOSES, PARTS, Advice, Part, advise, part_ms
from sweeper.analysis.autotune_verdict import RERUN_DEVICE_PCT, change, ms_said, twin_noise_pct
from sweeper.analysis.categories import CATEGORIES
from sweeper.analysis.repeats import cold, figure_spread
from sweeper.reporting.finding import Finding, number, ok_jobs
from sweeper.reporting.labels import key_fields
from sweeper.reporting.pairs import one_key_pairs

PART_WORDS = {"templates": "matmul and convolution kernels (templates against library calls)",
              "kernel configs": "Inductor's own Triton kernels (pointwise, reduction)"}


def _setting_field(setting: str) -> tuple[str, str]:
    """"+inductor.max_autotune_gemm=true" -> ("inductor.max_autotune_gemm", "true")."""
    name, value = setting.lstrip("+").split("=", 1)
    return name, value.lower()


def advised_job(jobs: pd.DataFrame, off: pd.Series, settings: tuple[str, ...]) -> pd.Series | None:
    """The finished job of the sweep that is `off` with the advised settings added (autotune
    off and those inductor options, every other field the same); None where there is none."""
    if settings[0] != "autotune=off" or len(settings) == 1:
        return None
    fields = key_fields(str(off["key"]))
    # the off twin's own inductor options stay (freezing, say), the advised ones set on top
    want = {k: v.lower() for k, v in fields.items() if k.startswith("inductor.")}
    want.update(_setting_field(s) for s in settings[1:])
    base = {k: v for k, v in fields.items() if not k.startswith("inductor.")}
    for _, row in ok_jobs(jobs).iterrows():
        theirs = key_fields(str(row["key"]))
        mine = {k: v.lower() for k, v in theirs.items() if k.startswith("inductor.")}
        if mine == want and {k: v for k, v in theirs.items() if not k.startswith("inductor.")} == base:
            return row
    return None


def _parts_text(a: Advice) -> str:
    said = []
    for r in a.results:
        what = (f"{r.gain_ms:.3f} ms a step faster" if r.word == GAINS else
                f"{-r.gain_ms:.3f} ms a step slower" if r.word == LOSES else "within noise")
        cost = f", {r.compile_s:.0f} s of compile" if r.compile_s is not None else ""
        said.append(f"{r.part.name}: {PART_WORDS[r.part.name]} {ms_said(r.off_ms)} -> {ms_said(r.on_ms)}, {what}{cost}")
    return "; ".join(said)


def _pareto(jobs: pd.DataFrame, off: pd.Series) -> list[str]:
    """Labels of the model's finished jobs (the off twin's fields but autotune and inductor
    options) that no other job beats on cold compile seconds, kernels' time and peak memory
    all at once; only jobs that have all three and compiled cold."""
    base = {k: v for k, v in key_fields(str(off["key"])).items() if k != "autotune" and not k.startswith("inductor.")}
    rows = []
    for _, r in ok_jobs(jobs).iterrows():
        fields = {k: v for k, v in key_fields(str(r["key"])).items() if k != "autotune" and not k.startswith("inductor.")}
        point = [number(r.get(c)) for c in ("compile_s", "device_ms", "peak_memory_mb")]
        if fields == base and cold(r) and all(p is not None for p in point):
            rows.append((str(r["label"]), [float(p or 0.0) for p in point]))
    if len(rows) < 2:
        return []
    return [name for name, p in rows
            if not any(all(q[i] <= p[i] for i in range(3)) and any(q[i] < p[i] for i in range(3)) for _, q in rows)]


def advice_findings(jobs: pd.DataFrame) -> list[Finding]:
    out = []
    for p in one_key_pairs(jobs):
        if p.key != "autotune":
            continue
        off, on = p.twins()
        noise = twin_noise_pct(off, on)
        a = advise(off.to_dict(), on.to_dict(), noise, _part_noise(off, on))
        if a is None:
            continue
        label = str(off["label"])
        text = f"What to turn on of max-autotune for {label}: {_parts_text(a)}. "
        command = " ".join(a.settings)
        if not a.turn_on:
            text += "Leave it off: no part of it made its kernels faster beyond noise"
            text += (f", and it adds {a.full_compile_s:.0f} s of compile." if a.full_compile_s else ".")
        elif a.settings == ("autotune=on",):
            text += "Turn all of it on (`autotune=on`): both parts gain"
            text += (f"; {a.compile_s:.0f} s more compile, paid back after {a.payback_steps:,.0f} steps of kernel time."
                     if a.payback_steps is not None else ".")
        else:
            names = " and ".join(r.part.name for r in a.turn_on)
            text += f"Turn on the {names} alone (`{command}`)"
            if a.kept_pct is not None:
                text += f": {a.kept_pct:.0f}% of what max-autotune's parts gained"
            if a.compile_s is not None and a.full_compile_s:
                text += f", at {a.compile_s:.0f} of the {a.full_compile_s:.0f} s that all of it adds to the compile"
            if a.payback_steps is not None:
                text += f"; paid back after {a.payback_steps:,.0f} steps of kernel time"
            text += "."
        losers = [r for r in a.results if r.word == LOSES]
        if losers:
            text += " " + "; ".join(f"With it, {_worst(off, on, r.part.categories)} (its {r.part.name}' part)"
                                    for r in losers) + "."
        if not cold(on):
            text += " (The autotune=on compile started from the stores: its compile seconds are not a cold one's.)"
        figures: dict = {"gain_ms": sum(r.gain_ms for r in a.turn_on), "kept_pct": a.kept_pct,
                         "settings": command, "payback_steps": a.payback_steps}
        checked = advised_job(jobs, off, a.settings)
        if checked is not None:
            text += " " + _checked_text(off, on, checked, figures)
        for part in PARTS:  # a part the sweep ran alone, advised or not: how it did on its own
            alone = advised_job(jobs, off, ("autotune=off", *part.settings))
            if alone is not None and (checked is None or alone["job"] != checked["job"]):
                text += " " + _alone_text(off, alone, part, noise)
        best = _pareto(jobs, off)
        if best:
            text += f" No other run of the model beats {', '.join(best)} on cold compile, kernels' time and peak memory at once."
            figures["pareto"] = best
        out.append(Finding("autotune_advice", label, text, "#fig-autotune", figures))
    return out


def _part_noise(off: pd.Series, on: pd.Series) -> dict[str, float]:
    """Part name -> how far its kernels spread over either side's repeats, % (none for a
    side of one job)."""
    out = {}
    for part in PARTS:
        def ms(row: Mapping, part: Part = part) -> float | None:
            return part_ms(row, part)

        spreads = [figure_spread(side["repeats"], ms) for side in (off, on)]
        got = [s for s in spreads if s is not None]
        if got:
            out[part.name] = max(got)
    return out


def _worst(off: pd.Series, on: pd.Series, categories: tuple[str, ...]) -> str:
    """The category of a part that lost the most, said with its two times. Said beside the
    part, not as its cause: fusion moves time between categories (autotune_advice.py)."""
    def ms(row, c):
        return (number(row.get(f"share_{c}")) or 0.0) * (number(row.get("device_ms")) or 0.0) / 100

    c = max(categories, key=lambda c: ms(on, c) - ms(off, c))
    return f"{CATEGORIES[c]} kernels took {ms_said(ms(on, c))} a step against {ms_said(ms(off, c))}"


def _alone_text(off: pd.Series, alone: pd.Series, part: Part, noise_pct: float) -> str:
    """How a part run alone did against the off twin: its own kernels and all of them,
    each against the noise, and its compile seconds."""
    def said(a: float, b: float) -> str:
        c = change(a, b, noise_pct) if a else None  # a CPU runs no Triton kernel: nothing moved
        return f"{ms_said(a)} -> {ms_said(b)} ({c.change_pct if c else 0.0:+.1f}%, {c.word if c else 'within noise'})"

    parts = [f"Ran alone, the {part.name} took"]
    mine_off, mine = part_ms(off.to_dict(), part), part_ms(alone.to_dict(), part)
    if mine_off is not None and mine is not None:
        parts.append(f"{PART_WORDS[part.name]} {said(mine_off, mine)},")
    d_off, d = number(off.get("device_ms")), number(alone.get("device_ms"))
    if d_off and d is not None:
        parts.append(f"all kernels {said(d_off, d)}")
    c = number(alone.get("compile_s"))
    return " ".join(parts) + (f", in a {c:.0f}-s compile." if c is not None else ".")


def _checked_text(off: pd.Series, on: pd.Series, checked: pd.Series, figures: dict) -> str:
    """How the run with the advised settings did: its kernels' time beside both twins',
    the share of the full gain it kept, its compile seconds beside max-autotune's."""
    d_off, d_on, d_rec = (number(r.get("device_ms")) for r in (off, on, checked))
    if d_off is None or d_on is None or d_rec is None:
        return ""
    text = (f"Checked: {checked['label']} ran the kernels in {ms_said(d_rec)} a step, against {ms_said(d_off)} off and "
            f"{ms_said(d_on)} with all of max-autotune")
    full = d_off - d_on
    if abs(full) > RERUN_DEVICE_PCT / 100 * max(d_off, d_on):
        figures["checked_kept_pct"] = 100 * (d_off - d_rec) / full
        text += f" ({figures['checked_kept_pct']:.0f}% of its gain kept)"
    c_rec, c_on, c_off = (number(r.get("compile_s")) for r in (checked, on, off))
    if c_rec is not None and c_on is not None and c_off is not None:
        text += f"; its compile {c_rec:.0f} s, against {c_off:.0f} s off and {c_on:.0f} s with all of it"
        figures["checked_compile_s"] = c_rec
    return text + "."
