"""Where max-autotune loses, for each pair of jobs apart in autotune only: the table of layers
(tables/autotune_regret.*) and a finding a pair (pure: the jobs and modules tables in;
sweeper/analysis/autotune_regret.py compares the sites)."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis.autotune_regret import FASTER, SITE_MIN_STEP_PCT, SLOWER, compare
from sweeper.analysis.autotune_verdict import RERUN_DEVICE_PCT, twin_noise_pct
from sweeper.reporting.finding import Finding, by_job, number, rows_of
from sweeper.reporting.pairs import one_key_pairs

REGRET_COLUMNS: dict[str, str] = {
    "job_off": "the autotune-off twin's job number",
    "job_on": "the autotune-on twin's job number",
    "label": "the off twin's label",
    "layer": "the layer compared: the parent of the modules its kernels compute (a convolution, its batch norm and activation together, where a template's fused epilogue lands); (model): the model's top-level modules",
    "pass": "forward or backward",
    "source": "the model source line of its costliest module",
    "off_ms": "its kernels' time a step with autotune off, ms (the median profiled step's where recorded)",
    "on_ms": "the same with autotune on",
    "change_ms": "on - off, ms a step: over 0, max-autotune made it slower",
    "change_pct": "the change, % of the off twin's",
    "off_ran": "what ran its matmuls and convolutions with autotune off: library (cuDNN, cuBLAS), Triton template",
    "on_ran": "the same with autotune on (a Triton template: max-autotune chose one)",
    "noise_pct": f"the noise a site's change is held against, % of its larger side: {RERUN_DEVICE_PCT:.0f}% on a GPU "
                 "(the kernels' run-to-run noise under max-autotune); on a CPU the twins' step noise added, if wider",
    "verdict": f"slower or faster: beyond noise_pct of the larger side and {SITE_MIN_STEP_PCT}% of the step's kernel time",
}
NAMED = 3  # sites a finding names


def regret_table(jobs: pd.DataFrame, modules: pd.DataFrame) -> pd.DataFrame:
    """Every autotune pair's sites that moved beyond noise (REGRET_COLUMNS), pairs in job order."""
    rows = []
    groups = by_job(modules) if not modules.empty else {}
    for p in one_key_pairs(jobs):
        if p.key != "autotune":
            continue
        off, on = rows_of(groups, p.a["job"], modules), rows_of(groups, p.b["job"], modules)
        step = number(p.a.get("device_ms"))
        if off.empty or on.empty or not step:
            continue
        for r in compare(off.to_dict("records"), on.to_dict("records"), step, twin_noise_pct(p.a, p.b)):
            rows.append({"job_off": int(p.a["job"]), "job_on": int(p.b["job"]), "label": p.a["label"], **r})
    return pd.DataFrame(rows, columns=list(REGRET_COLUMNS))


def regret_findings(jobs: pd.DataFrame, modules: pd.DataFrame, table: pd.DataFrame) -> list[Finding]:
    """One finding an autotune pair: the sites it made slower beyond noise and what they
    lost a step, the costliest named with what ran them each way; against the sites it made
    faster. A pair without module times (records made before them, or no model code) says so."""
    out = []
    has_modules = set(modules["job"]) if not modules.empty else set()
    for p in one_key_pairs(jobs):
        if p.key != "autotune":
            continue
        label = str(p.a["label"])
        if not {p.a["job"], p.b["job"]} <= has_modules:
            out.append(Finding("autotune_regret", label, f"Where max-autotune loses in {label}: cannot tell, one of "
                               "the twins has no module times (its record has no model code).", "#fig-autotune",
                               {"lost_ms": None}))
            continue
        mine = table[(table["job_off"] == p.a["job"]) & (table["job_on"] == p.b["job"])]
        slower, faster = mine[mine["verdict"] == SLOWER], mine[mine["verdict"] == FASTER]
        lost, won = float(slower["change_ms"].sum()), -float(faster["change_ms"].sum())
        if slower.empty:
            text = f"Where max-autotune loses in {label}: no layer is slower with it beyond noise"
        else:
            named = "; ".join(f"{r['layer']} ({r['pass']}) {r['off_ms']:.3f} -> {r['on_ms']:.3f} ms "
                              f"({r['off_ran']} -> {r['on_ran']})" for _, r in slower.head(NAMED).iterrows())
            text = (f"Where max-autotune loses in {label}: {len(slower)} layer{'s' if len(slower) != 1 else ''} "
                    f"take{'s' if len(slower) == 1 else ''} {lost:.3f} ms a step longer with it: {named}")
        text += (f"; {len(faster)} layer{'s' if len(faster) != 1 else ''} gain{'s' if len(faster) == 1 else ''} "
                 f"{won:.3f} ms." if len(faster)
                 else "; no layer is faster with it beyond noise.")
        out.append(Finding("autotune_regret", label, text, "#fig-autotune",
                           {"lost_ms": lost, "won_ms": won, "slower_sites": len(slower), "faster_sites": len(faster)}))
    return out
