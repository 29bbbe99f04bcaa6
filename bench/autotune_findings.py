"""Max-autotune's answer for a sweep, as markdown: each autotune pair's verdict, where it
loses (the regret table's layers), and what to turn on of it, beside the jobs' figures they
stand on (compile seconds by part, kernels' time by part, step, busy, peak memory).

    python bench/autotune_findings.py SWEEP_DIR [> out.md]
    python bench/autotune_findings.py tests/fixtures/h200/headline   # a fixture folder of <n>.result.json.gz

A fixture folder (records gzip-compressed beside summary.json.gz) is unpacked into a
temporary sweep folder first (example_report.unpack). The GPU run that feeds it: `bash bench/gpu_run.sh autotune_parts`.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    from sweeper.analysis.autotune_advice import KERNEL_CONFIGS, TEMPLATES, part_ms
    from sweeper.reporting.autotune_advice import advice_findings
    from sweeper.reporting.autotune_regret import regret_findings, regret_table
    from sweeper.reporting.kernel_findings import autotune
    from sweeper.reporting.load import read_sweep

    from example_report import unpack

    with tempfile.TemporaryDirectory() as scratch:
        given = Path(sys.argv[1])
        sweep = read_sweep(given if (given / "summary.json").is_file() else unpack(given, Path(scratch) / "sweep"))
        jobs, modules = sweep.jobs, sweep.model_modules
        step_kernels = sweep.kernels[sweep.kernels["scope"] == "step"]
        regret = regret_table(jobs, modules, sweep.decisions)
        print(f"# Max-autotune's answer\n\n`python bench/autotune_findings.py {sys.argv[1]}`\n")
        gpus = sorted({str(g) for g in jobs["gpu"].dropna()})
        print(f"{len(jobs)} jobs on {', '.join(gpus) or 'a CPU'}.\n")
        print("| job | compile s | template tuning s | coordinate descent s | kernels ms a step | mm/conv ms | "
              "Inductor Triton ms | step ms (loop) | busy % | peak MB | compile |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for _, r in jobs.iterrows():
            row = r.to_dict()
            cells = [r["label"], r["compile_s"], r["template_tuning_s"], r["coordinate_descent_s"], r["device_ms"],
                     part_ms(row, TEMPLATES), part_ms(row, KERNEL_CONFIGS), r["steady_step_ms"], r["busy_pct"],
                     r["peak_memory_mb"], r["compile_state"]]
            print("| " + " | ".join(_cell(c) for c in cells) + " |")
        for title, found in (("Verdicts", autotune(jobs, step_kernels)),
                             ("Where it loses", regret_findings(jobs, modules, regret)),
                             ("What to turn on", advice_findings(jobs))):
            print(f"\n## {title}\n")
            for f in found:
                print(f"- {f.text}")
        if not regret.empty:
            print("\n## Sites\n")
            print(regret.drop(columns=["job_off", "job_on", "noise_pct"]).to_markdown(index=False,
                                                                                              floatfmt=".3f"))


def _cell(v) -> str:
    import pandas as pd

    if v is None or (isinstance(v, float) and pd.isna(v)):
        return "-"
    return f"{v:.3f}" if isinstance(v, float) and abs(v) < 10 else f"{v:.1f}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    main()
