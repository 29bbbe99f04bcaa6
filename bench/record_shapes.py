"""Two sweep folders of the same jobs, made by two revisions of the job's code: whether their
records have the same shape (every key path, job by job), and the figures each job's record
holds side by side (status, compile, step, modules, kernel table and microbenchmarks,
roofline, accuracy), for a change to how the job makes its record that must not change the
record.

    python bench/record_shapes.py BEFORE_SWEEP AFTER_SWEEP [--out FILE]

Key paths whose presence follows timing, not the code, are left out of the shape: the
garbage collector's phases (`timings.gc.<phase>`, a phase in which no collection ran has
none), Inductor's timers by name (`timings.compile_timers.*`), and the dict keys under
per-kernel or per-module maps (kernel and module names). Jobs are matched by their
overrides that make the job (sweeper/identity.py: a store's folder, say, left out).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.identity import identity_overrides  # noqa: E402

# key paths whose children are names (kernels, modules, timers, phases), not fields
NAMED_CHILDREN = re.compile(r"^\.(timings\.(compile_timers|gc|phase_s|compile_benchmarks\.(by_caller|not_reused)|"
                            r"wait_by_phase|gpu_lease\.wait_by_phase)|artifacts\.(traces|modules)|"
                            r"autotune_decisions\.[^.]+|model_code\.graphs\.modules|step\.categories|"
                            r"step\.reference_categories_share_pct|modules\[\]\.breakdown\.categories|"
                            r"roofline\.by_kind|timings\.autotune_store\.(loaded|kept)|timings\.compile_store\.loaded|"
                            r"model_code\.tags|resolved\.inductor_options|timings\.cpu_isa_probes)(\.|$)")


def paths(x, p: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(x, dict):
        named = bool(NAMED_CHILDREN.match(p)) and p != ""
        for k, v in x.items():
            child = f"{p}.*" if named else f"{p}.{k}"
            out.add(child)
            out |= paths(v, child)
    elif isinstance(x, list):
        for v in x:
            if isinstance(v, (dict, list)):
                out |= paths(v, p + "[]")
    return out


def records(sweep: Path) -> dict[str, dict]:
    summary = json.loads((sweep / "summary.json").read_text())
    out = {}
    for job in summary["jobs"]:
        f = sweep / str(job["num"]) / "result.json"
        if f.exists():
            out[" ".join(identity_overrides(job["overrides"]))] = json.loads(f.read_text())
    return out


def figures(r: dict) -> str:
    t = r.get("timings") or {}
    table = r.get("kernel_table") or {}
    rows = table.get("rows") or []
    timed = sum(1 for row in rows if row.get("standalone_ms") is not None)
    line = r.get("roofline") or {}
    return (f"{r.get('status')}; compile {t.get('compile_s')} s; step {((t.get('compiled_step_ms') or {}).get('median') or 0):.3f} ms; "
            f"busy {((r.get('step') or {}).get('busy_pct') or 0):.1f}%; {len(r.get('modules') or [])} modules; "
            f"kernel table {len(rows)} rows, {timed} timed alone{', error: ' + table['error'] if table.get('error') else ''}; "
            f"roofline {'yes' if line else 'no'}; accuracy {(r.get('accuracy') or {}).get('passed')}; "
            f"autotune decisions {len(r.get('autotune_decisions') or {})}; "
            f"lease acquired {((t.get('gpu_lease') or {}).get('acquired'))}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    before, after = records(args.before), records(args.after)
    lines = [f"`python bench/record_shapes.py {args.before} {args.after}`", ""]
    same = True
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        lines.append(f"## {key}")
        if a is None or b is None:
            lines.append(f"only in {'after' if a is None else 'before'}")
            same = False
            continue
        pa, pb = paths(a), paths(b)
        lines += [f"- before: {figures(a)}", f"- after: {figures(b)}",
                  f"- key paths: {len(pa)} before, {len(pb)} after; only before: {sorted(pa - pb) or 'none'}; "
                  f"only after: {sorted(pb - pa) or 'none'}", ""]
        same = same and pa == pb
    lines.append(f"**{'Same shape in every job.' if same else 'Shapes differ (above).'}**")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
