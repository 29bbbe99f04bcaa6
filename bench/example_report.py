"""The example report under docs/example-report: the example grid as it ran on two H200s
(bench/results/busy/):

    python -m sweeper +sweep=example        # on a GPU machine: 6 jobs, 6.0 min on two H200s

Its records and summary are committed (tests/fixtures/h200/example); this script
re-aggregates them, as `python -m sweeper.aggregate <sweep>` does over a sweep folder,
so that the example follows the report's current version.

    python bench/example_report.py [--out docs/example-report]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from sweeper.aggregate import aggregate  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "h200" / "example"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "example-report")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = build(Path(tmp) / "example")
        # Only what a reader opens: the page (self-contained), its figures and tables.
        # Those are replaced; anything else in the folder (its README) is kept.
        args.out.mkdir(parents=True, exist_ok=True)
        for old in ("figures", "tables"):
            shutil.rmtree(args.out / old, ignore_errors=True)
        shutil.copy(report, args.out / "report.html")
        shutil.copytree(report.parent / "figures", args.out / "figures")
        (args.out / "tables").mkdir()
        for f in ("jobs.csv", "categories.csv", "microbench.csv"):
            shutil.copy(report.parent / "tables" / f, args.out / "tables" / f)
    print(f"report: {args.out / 'report.html'}")
    return 0


def build(sweep: Path) -> Path:
    summary = json.loads(gzip.decompress((FIXTURES / "summary.json.gz").read_bytes()))
    for entry in summary["jobs"]:
        num = entry["num"]
        rec = gzip.decompress((FIXTURES / f"{num}.result.json.gz").read_bytes())
        (sweep / str(num)).mkdir(parents=True)
        (sweep / str(num) / "result.json").write_bytes(rec)
    (sweep / "summary.json").write_text(json.dumps(summary, indent=1))
    return aggregate(sweep)


if __name__ == "__main__":
    sys.exit(main())
