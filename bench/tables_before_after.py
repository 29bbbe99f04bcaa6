"""The same records aggregated by two revisions of sweeper: are the tables the same?

A restructuring that should change nothing users see (issue 56: the scheduler, the typed
settings, the data path) is held against the revision before it. Each sweep's records are
aggregated by this checkout and by `--before` (a git revision, checked out into a temporary
worktree), and every table both wrote (tables/*.parquet) is compared row for row, column for
column (floats to 1e-12 relative). Inputs: the committed example sweeps (H200: the mission's
command and the +sweep=example grid; H100: the roofline pair) and any sweep folders given
(a CPU sweep run here, say).

    python bench/tables_before_after.py --before 34e827e [--sweep outputs/...] \
        [--out bench/results/scheduler/tables_before_after.md]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"H200 mission's command": ROOT / "tests/fixtures/h200/headline",
            "H200 +sweep=example": ROOT / "tests/fixtures/h200/example",
            "H100 roofline pair": ROOT / "tests/fixtures/h100/roofline"}


def sweep_of(records: Path, dest: Path) -> Path:
    """A committed example (NUM.result.json.gz, summary.json.gz) as a sweep folder."""
    summary = json.loads(gzip.decompress((records / "summary.json.gz").read_bytes()))
    for entry in summary["jobs"]:
        (dest / str(entry["num"])).mkdir(parents=True)
        (dest / str(entry["num"]) / "result.json").write_bytes(
            gzip.decompress((records / f"{entry['num']}.result.json.gz").read_bytes()))
    (dest / "summary.json").write_text(json.dumps(summary))
    return dest


def copy_of(sweep: Path, dest: Path) -> Path:
    """The records of a sweep folder alone (summary.json, <n>/result.json), without its tables."""
    dest.mkdir(parents=True)
    if (sweep / "summary.json").exists():
        shutil.copy(sweep / "summary.json", dest / "summary.json")
    for rec in sweep.glob("*/result.json"):
        (dest / rec.parent.name).mkdir()
        shutil.copy(rec, dest / rec.parent.name / "result.json")
    return dest


def aggregate_with(checkout: Path, sweep: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(checkout), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-m", "sweeper.aggregate", str(sweep)], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"aggregate in {checkout} failed:\n{proc.stderr[-3000:]}")


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    df = df[sorted(df.columns)]
    keys = [c for c in df.columns if df[c].map(lambda v: isinstance(v, (str, int, float, bool)) or v is None).all()]
    return df.sort_values(keys, kind="stable").reset_index(drop=True) if keys else df.reset_index(drop=True)


def compare(before: Path, after: Path) -> list[str]:
    """A row a table of the two tables folders: the same, or how it differs."""
    rows = []
    names = sorted({p.name for p in before.glob("*.parquet")} | {p.name for p in after.glob("*.parquet")})
    for name in names:
        b, a = before / name, after / name
        if not (b.exists() and a.exists()):
            rows.append(f"| {name} | {'only after' if a.exists() else 'only before'} | | |")
            continue
        db, da = pd.read_parquet(b), pd.read_parquet(a)
        try:
            pd.testing.assert_frame_equal(_sorted(db), _sorted(da), check_dtype=False, rtol=1e-12)
            verdict = "same"
        except AssertionError as e:
            verdict = "DIFFERENT: " + " ".join(str(e).split())[:200]
        rows.append(f"| {name} | {verdict} | {len(da)} | {len(da.columns)} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="a git revision, e.g. the commit before the change")
    ap.add_argument("--sweep", type=Path, action="append", default=[], help="a sweep folder (its records)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lines = [f"`python bench/tables_before_after.py --before {args.before}"
             + "".join(f" --sweep {s}" for s in args.sweep) + f"` (after: {head}{'+changes' if _dirty() else ''})", ""]
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), args.before], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            inputs = {name: sweep_of(path, Path(tmp) / "src" / name.replace(" ", "_")) for name, path in EXAMPLES.items()}
            inputs.update({str(s): copy_of(s, Path(tmp) / "src" / f"given{i}") for i, s in enumerate(args.sweep)})
            for name, src in inputs.items():
                # one folder for both, so that the paths the tables hold are the same
                work = copy_of(src, Path(tmp) / "work" / src.name)
                aggregate_with(old, work)
                shutil.move(work / "tables", Path(tmp) / "before_tables")
                aggregate_with(ROOT, work)
                lines += [f"## {name}", "", "| table | before against after | rows | columns |", "|---|---|---|---|",
                          *compare(Path(tmp) / "before_tables", work / "tables"), ""]
                shutil.rmtree(Path(tmp) / "before_tables")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, capture_output=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 1 if "DIFFERENT" in text else 0


def _dirty() -> bool:
    return bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    sys.exit(main())
