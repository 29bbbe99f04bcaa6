"""Each job's compiled step time over the last complete sweeps (`python -m sweeper.history
trend`): the data, the jobs that changed most, those the last sweep flagged, and the figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sweeper.analysis.regression import wall_ms
from sweeper.reporting import sweeps as sw
from sweeper.reporting.load import AggregateError
from sweeper.reporting.tables import distinct_labels
from sweeper.words import count


def date_limits(times: list) -> tuple | None:
    """The time axis's ends: the sweeps' span with 5% either side, and at least an hour
    either side. Left to matplotlib, one sweep (or several within seconds) drew a 2025-2029
    axis with overlapping labels."""
    if not times:
        return None
    lo, hi = min(times), max(times)
    pad = max((hi - lo) * 0.05, pd.Timedelta(hours=1))
    return lo - pad, hi + pad


TREND_LINES = 10  # jobs drawn as lines of their own; more: the rest as a band


def trend_data(sweeps: list[Path]) -> pd.DataFrame:
    """Each finished job's compiled step (steady loop) in each sweep: sweep, started, key,
    label, step_ms; read from the sweeps' tables (sweeps.sweep_tables)."""
    frames, unreadable = [], []
    for s in sweeps:
        t = sw.sweep_tables(s)
        unreadable += [f"{s.name}: job #{num}'s record cannot be read ({why}); not drawn"
                       for num, why in sorted(t.unreadable.items())]
        jobs = t.jobs[t.jobs["status"] == "ok"]
        frames.append(jobs.assign(sweep=s.name, started=pd.to_datetime(t.started_at, errors="coerce"),
                                  step_ms=[wall_ms(r) for _, r in jobs.iterrows()])[
            ["sweep", "started", "key", "label", "step_ms"]])
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["sweep", "started", "key", "label", "step_ms"])
    # one point a job and sweep: jobs of one configuration (seeds) stand as the first, as in a compare
    data = data.drop_duplicates(["sweep", "key"]).reset_index(drop=True)
    data["label"] = data["label"].str.replace(r" #\d+$", "", regex=True)  # a seed's number names no job across sweeps
    names = distinct_labels({k: (k, lab) for k, lab in data.drop_duplicates("key")[["key", "label"]].values})
    data["label"] = data["key"].map(names)
    data.attrs["unreadable"] = unreadable  # said by `trend` (it dropped them without a word)
    return data


TREND_MIN_CHANGE = 0.02  # a job whose last step is within 2% of its first stays in the band


def most_changed(data: pd.DataFrame, n: int) -> list[str]:
    """The n jobs (labels) whose last step moved most from their first, relatively, those
    that moved TREND_MIN_CHANGE or more."""
    ordered = data.sort_values("started").groupby("label")["step_ms"]
    change = (ordered.last() / ordered.first() - 1).abs().dropna()
    return list(change[change >= TREND_MIN_CHANGE].sort_values(ascending=False).index[:n])


def last_flagged(sweeps: list[Path], data: pd.DataFrame) -> list[str]:
    """The trend's labels of the jobs that the last sweep's compare with the one before it
    flags (sweeps.compare_sweeps, read from their tables); none with fewer than two sweeps."""
    if len(sweeps) < 2:
        return []
    try:
        cmp = sw.compare_sweeps(sweeps[-1], sweeps[-2], kernels="none")
    except AggregateError:
        return []
    label_of = dict(zip(data["key"], data["label"]))
    return [label_of[k] for k in cmp.flagged["key"] if k in label_of]


def trend_figure(sweeps: list[Path], out: Path) -> tuple[Path, pd.DataFrame]:
    """Each job's compiled step over the sweeps. Up to TREND_LINES jobs, a line each in
    milliseconds; more, each job's step relative to its first sweep shown: the
    middle 80% of jobs as a band with their median, and as lines of their own the jobs the
    last compare flags and the TREND_LINES that moved most (last against first)."""
    import matplotlib.dates as mdates

    from sweeper.reporting.figures import plt, save  # matplotlib, set up for files only

    data = trend_data(sweeps)
    many = data["label"].nunique() > TREND_LINES
    fig, ax = plt.subplots(figsize=(11, 5.5))
    if many:
        data = data.sort_values("started")
        rel = data.assign(ratio=data["step_ms"] / data.groupby("label")["step_ms"].transform("first"))
        band = rel.groupby("started")["ratio"].quantile([0.1, 0.5, 0.9]).unstack()
        ax.fill_between(band.index, band[0.1], band[0.9], color="0.85", label=f"middle 80% of {rel['label'].nunique()} jobs")
        ax.plot(band.index, band[0.5], color="0.4", linewidth=1.5, label="their median")
        flagged = last_flagged(sweeps, data)
        lines = list(dict.fromkeys(flagged + most_changed(data, TREND_LINES)))[:max(TREND_LINES, len(flagged))]
        for label in lines:
            g = rel[rel["label"] == label].sort_values("started")
            ax.plot(g["started"], g["ratio"], marker="o", markersize=3,
                    label=f"{label} (flagged)" if label in flagged else label)
        ax.axhline(1, color="0.5", linewidth=0.8, linestyle="--")
        ax.set_ylabel("compiled step against the job's first sweep shown (1 = unchanged)")
    else:
        for label, g in data.sort_values("started").groupby("label"):
            ax.plot(g["started"], g["step_ms"], marker="o", label=label)
        ax.set_ylabel("compiled step, steady loop (ms)")
        ax.set_ylim(bottom=0)
    marks = change_marks(ax, sweeps, data)
    limits = date_limits(list(data["started"].dropna()))
    if limits is not None:
        ax.set_xlim(*limits)
    locator = mdates.AutoDateLocator(maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("sweep started")
    what = "compiled step time" + (f"\nlines: the jobs the last compare flagged, and those that moved "
                                   f"{TREND_MIN_CHANGE:.0%} or more (at most {TREND_LINES}); the rest as a band"
                                   if many else "")
    over = "of the last complete sweep" if len(sweeps) == 1 else f"over the last {len(sweeps)} complete sweeps"
    ax.set_title(what.replace("\n", f" {over}\n", 1) if many else f"{what} {over}", fontsize=10)
    if len(data):
        ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1))
    data.attrs["change_points"] = marks
    return save(fig, out), data


MARKED = 6  # change points drawn on the trend; `history changes` lists them all


def change_marks(ax, sweeps: list[Path], data: pd.DataFrame) -> list[str]:
    """The change points of these sweeps (`history changes`' analysis) drawn on the trend:
    a dotted vertical line at the first night of each (the largest MARKED), numbered, with
    its words in the legend. Returns those words; none under changes_text.MIN_NIGHTS nights."""
    from sweeper.reporting.changes_read import MIN_NIGHTS, changes_of

    if len(sweeps) < MIN_NIGHTS:
        return []
    try:
        got = changes_of(list(sweeps))
    except AggregateError:
        return []
    started = data.drop_duplicates("sweep").set_index("sweep")["started"]
    labels = got.history.labels
    words = []
    for i, k in enumerate(got.causes[:MARKED], 1):  # one mark a cause (sweeper/analysis/causes.py)
        c = k.lead
        when = started.get(got.nights[c.night]) if c.night < len(got.nights) else None
        if when is None or pd.isna(when):
            continue
        what = (c.name if c.level in ("category", "family") else f"{labels.get(c.name, c.name)} {c.level}")
        size = "fails" if c.level in ("accuracy", "status") else f"{c.size_pct:+.1f}%"
        size += f" with {count(len(k.changes) - 1, 'more series', 'more series')}" if len(k.changes) > 1 else ""
        text = f"change {i}: {what} {size} from {got.nights[c.night]}"
        ax.axvline(when, color="tab:red", linestyle=":", linewidth=1.2, label=text)
        ax.annotate(str(i), (when, 1.0), xycoords=("data", "axes fraction"), color="tab:red", fontsize=8,
                    ha="center", va="bottom")
        words.append(text)
    return words


def trend_command(outputs: Path, last: int, out_path: Path | None) -> int:
    """`python -m sweeper.history trend`: the figure of the last `last` complete sweeps under
    `outputs`, what it left out and the change points it marks said; its exit code."""
    import sys

    sweeps, notes = sw.complete_sweeps_under(outputs)
    for n in notes:
        print(f"sweeper.history: {n}", file=sys.stderr)
    sweeps = sweeps[-last:]
    if not sweeps:
        print(f"sweeper.history: no complete sweep (summary.json, not interrupted) under {outputs}", file=sys.stderr)
        return 2
    out, data = trend_figure(sweeps, out_path or outputs / "trend.png")
    for n in data.attrs.get("unreadable", []):
        print(f"sweeper.history: {n}", file=sys.stderr)
    print(f"trend of {count(len(sweeps), 'sweep')}: wrote {out}")
    for words in data.attrs.get("change_points", []):
        print(f"marked: {words} (python -m sweeper.history changes {outputs})")
    return 0
