"""How much of each job's kernel time sweeper places on the model's code, and whether it
matches what the compiled modules say: the shares attributed (all kernels, Triton kernels,
inside compiled graphs), the costliest modules, five of the costliest kernels beside the
provenance comments of their launch sites in the compiled module, and (given two runs of
the same jobs) whether the warm run's attribution is the cold run's.

    python bench/model_code_check.py SWEEP [SWEEP_AGAIN] [--modules FOLDER]

Prints markdown (results: bench/results/model_code/)."""

from __future__ import annotations

import sys
from pathlib import Path

from sweeper.analysis.attribution import event_kernel_name
from sweeper.analysis.launch_sites import launch_sites
from sweeper.record import read_record
from sweeper.reporting.tables import record_label


def records(sweep: Path) -> dict[str, dict]:
    out = {}
    for p in sorted(sweep.glob("*/result.json")):
        r = read_record(p)
        if r.get("status") == "ok":
            out[record_label(r)] = r
    return out


def shares(r: dict) -> tuple[float | None, float | None, float | None]:
    """(% of all kernel time, % of Triton kernel time, % of time inside compiled graphs) placed."""
    mc = r.get("model_code") or {}
    step = r.get("step") or {}
    rows = step.get("kernels") or []
    triton = [k for k in rows if str(k.get("category", "")).startswith("triton_")]
    t_all = sum(k["device_ms"] for k in triton)
    t_placed = sum(k["device_ms"] for k in triton if k.get("model_modules"))
    outside = (mc.get("unattributed") or {}).get("outside compiled graphs", 0.0)
    inside = (mc.get("device_ms") or 0) - outside
    return (mc.get("attributed_pct"), t_placed / t_all * 100 if t_all else None,
            mc["attributed_ms"] / inside * 100 if inside else None)


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    modules_dir = None
    if "--modules" in argv:  # the first job's compiled modules, where the records' paths are gone
        i = argv.index("--modules")
        modules_dir, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    cold = records(Path(argv[0]))
    print("| job | placed, all kernels | placed, Triton | placed, inside compiled graphs | not placed (ms a step, why) "
          "| against eager |")
    print("|---|---|---|---|---|---|")
    for label, r in cold.items():
        a, t, c = shares(r)
        why = "; ".join(f"{k} {v:.3f}" for k, v in ((r.get("model_code") or {}).get("unattributed") or {}).items())
        acc = r.get("accuracy") or {}
        verdict = (f"{'passed' if acc['passed'] else 'failed'} ({acc['compared']} tensors, tolerance {acc['tolerance']:g})"
                   if acc.get("checked") else acc.get("reason") or "not recorded")
        print(f"| {label} | {pct(a)} | {pct(t)} | {pct(c)} | {why} | {verdict} |")
    for label, r in cold.items():
        mc = r.get("model_code") or {}
        print(f"\n## {label}\n\ngraphs: {mc.get('graphs')}\n\nCostliest modules (ms a step):\n")
        for row in (mc.get("rows") or [])[:10]:
            print(f"- {row['module']} ({row['class']}, {row['pass']}, {row['category']}): {row['device_ms']:.3f}")
        print("\nFive costliest kernels:\n")
        for k in (r["step"].get("kernels") or [])[:5]:
            print(f"- `{k['name'][:90]}` {k['device_ms']:.3f} ms: {k.get('model_modules')} at {k.get('model_source')}")
        folder = Path(modules_dir) if modules_dir else None
        sources = {m["label"]: p.read_text() for m in r.get("modules") or []
                   for p in [folder / f"{m['label']}.py" if folder else Path(m.get("artifact") or "")]
                   if p.is_file()}
        if not sources:
            continue
        modules_dir = None  # the folder given is the first job's
        sites = {kernel: (label, nodes, aten) for label, src in sources.items()
                 for kernel, _, nodes, aten in launch_sites(src)}
        print("\nFive costliest generated kernels beside their launch sites' comments in the compiled module "
              "(`# Topologically Sorted Source Nodes`, `Original ATen`), to read against the modules named:\n")
        generated = [k for k in r["step"].get("kernels") or [] if event_kernel_name(k["name"]) in sites][:5]
        for k in generated:
            label, nodes, aten = sites[event_kernel_name(k["name"])]
            print(f"- `{k['name']}` {k['device_ms']:.3f} ms: {k.get('model_modules')} at {k.get('model_source')}\n"
                  f"  - {label}: FX nodes {list(nodes)[:10]}{' ...' if len(nodes) > 10 else ''}; ATen {list(aten)}")
    if len(argv) > 1:
        warm = records(Path(argv[1]))
        print("\n## Warm against cold\n")
        for label, r in cold.items():
            w = warm.get(label)
            if w is None:
                print(f"- {label}: not in the second run")
                continue
            a = {(x["module"], x["pass"], x["category"]) for x in (r.get("model_code") or {}).get("rows") or []}
            b = {(x["module"], x["pass"], x["category"]) for x in (w.get("model_code") or {}).get("rows") or []}
            loaded = ((w.get("timings") or {}).get("compile_store") or {}).get("loaded")
            print(f"- {label}: compile loaded from the store {loaded}; placed {pct(shares(r)[0])} cold, "
                  f"{pct(shares(w)[0])} warm; module rows {len(a)} cold, {len(b)} warm, {len(a & b)} in both")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
