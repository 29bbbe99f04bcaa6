"""Where max-autotune loses, for each pair of jobs apart in autotune only: the table of layers
(tables/autotune_regret.*) and a finding a pair (pure: the jobs and modules tables in;
sweeper/analysis/autotune_regret.py compares the sites)."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis.autotune_regret import (FASTER, BENCHMARK_ONLY, SITE_MIN_STEP_PCT, SLOWER, alone_by_site,
                                              alone_word, compare_repeats)
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
                 "(the kernels' run-to-run noise under max-autotune); on a CPU the twins' step noise added, if wider; "
                 "where a side is several repeats (seeds), the site's spread over them if wider still",
    "repeat_spread_pct": "how far the site's time spread over a side's repeats (seeds), % of their median, the wider "
                         "side's; empty where each side is one job. off_ms and on_ms are then the repeats' medians",
    "verdict": f"slower or faster: beyond noise_pct of the larger side and {SITE_MIN_STEP_PCT}% of the step's kernel time",
    "alone_chosen_ms": "the choices max-autotune made for the site's matmuls and convolutions, as its own benchmarks timed "
                       "them alone at the op's shapes (its decisions), ms summed over the site's calls; empty without "
                       "decisions that name the site's modules",
    "alone_library_ms": "the library calls (cuDNN, cuBLAS) for the same ops, timed alone the same way",
    "alone_word": "benchmark-only win: a slower site whose choices beat the library calls in max-autotune's own "
                  "benchmarks (each timed alone at the op's shapes, a template without the epilogue it then fuses); "
                  "in the model the site took longer. It does not say the choice is faster alone: re-timed outside "
                  "max-autotune, cuDNN can run faster than max-autotune timed it (docs/findings.md)",
}
NAMED = 3  # sites a finding names


def regret_table(jobs: pd.DataFrame, modules: pd.DataFrame, decisions: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every autotune pair's sites that moved beyond noise (REGRET_COLUMNS), pairs in job
    order; with the on twin's decisions, what its choices and the library calls took alone."""
    rows = []
    groups = by_job(modules) if not modules.empty else {}
    decided = by_job(decisions) if decisions is not None and not decisions.empty else {}
    for p in one_key_pairs(jobs):
        if p.key != "autotune":
            continue
        runs_off = [rows_of(groups, j, modules) for j in p.a_jobs]
        runs_on = [rows_of(groups, j, modules) for j in p.b_jobs]
        runs_off, runs_on = [r for r in runs_off if not r.empty], [r for r in runs_on if not r.empty]
        off, on = p.twins()
        step = number(off.get("device_ms"))
        if not runs_off or not runs_on or not step:
            continue
        mine = next((decided[j] for j in p.b_jobs if j in decided and "sites" in decided[j]
                     and decided[j]["sites"].notna().any()), None)
        alone = alone_by_site(mine.to_dict("records")) if mine is not None else {}
        for r in compare_repeats([x.to_dict("records") for x in runs_off], [x.to_dict("records") for x in runs_on],
                                 step, twin_noise_pct(off, on)):
            a = alone.get((r["layer"], r["pass"]))
            rows.append({"job_off": int(p.a["job"]), "job_on": int(p.b["job"]), "label": off["label"], **r,
                         "alone_chosen_ms": a["chosen_ms"] if a else None,
                         "alone_library_ms": a["library_ms"] if a else None, "alone_word": alone_word(r, a)})
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
        label = str(p.twins()[0]["label"])
        if not {p.a["job"], p.b["job"]} <= has_modules:
            out.append(Finding("autotune_regret", label, f"Where max-autotune loses in {label}: cannot tell, one of "
                               "the twins has no module times (its record has no model code).", "#fig-autotune",
                               {"lost_ms": None}))
            continue
        mine = table[(table["job_off"] == p.a["job"]) & (table["job_on"] == p.b["job"])]
        slower, faster = mine[mine["verdict"] == SLOWER], mine[mine["verdict"] == FASTER]
        only = slower[slower["alone_word"] == BENCHMARK_ONLY]
        lost, won = float(slower["change_ms"].sum()), -float(faster["change_ms"].sum())
        if slower.empty:
            text = f"Where max-autotune loses in {label}: no layer is slower with it beyond noise"
        else:
            named = "; ".join(f"{r['layer']} ({r['pass']}) {r['off_ms']:.3f} -> {r['on_ms']:.3f} ms "
                              f"({r['off_ran']} -> {r['on_ran']}{_alone_said(r)})" for _, r in slower.head(NAMED).iterrows())
            text = (f"Where max-autotune loses in {label}: {len(slower)} layer{'s' if len(slower) != 1 else ''} "
                    f"take{'s' if len(slower) == 1 else ''} {lost:.3f} ms a step longer with it: {named}")
            if len(only):
                text += (f". {len(only)} of the {len(slower)} won only in max-autotune's own benchmarks: it timed "
                         f"their choices {float((only['alone_library_ms'] - only['alone_chosen_ms']).sum()):.3f} ms "
                         "faster than the library calls, each alone; in the model they took "
                         f"{float(only['change_ms'].sum()):.3f} ms longer")
        text += (f"; {len(faster)} layer{'s' if len(faster) != 1 else ''} gain{'s' if len(faster) == 1 else ''} "
                 f"{won:.3f} ms." if len(faster)
                 else "; no layer is faster with it beyond noise.")
        out.append(Finding("autotune_regret", label, text, "#fig-autotune",
                           {"lost_ms": lost, "won_ms": won, "slower_sites": len(slower), "faster_sites": len(faster),
                            "benchmark_only_sites": len(only)}))
    return out


def _alone_said(r) -> str:
    """"; timed alone by max-autotune 0.031 against the library's 0.052 ms" where the site's
    decisions are known."""
    chosen, library = number(r.get("alone_chosen_ms")), number(r.get("alone_library_ms"))
    if chosen is None or library is None:
        return ""
    return f"; timed alone by max-autotune {chosen:.3f} against the library's {library:.3f} ms"
