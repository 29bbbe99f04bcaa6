"""The example reports under docs/, re-aggregated from records committed as fixtures, as
`python -m sweeper.aggregate <sweep>` does over a sweep folder, so that each example
follows the report's current version:

  headline  docs/example-report: the mission's command on one H200, cold, finished across
            three sittings (bench/results/headline/; tests/fixtures/h200/headline)
                python -m sweeper model=mixnet_l,densenet121 autotune=on,off
  grid      docs/example-grid-report: the example grid on two H200s (bench/results/busy/;
            tests/fixtures/h200/example)
                python -m sweeper +sweep=example
  roofline  docs/example-roofline-report: mixnet_l and densenet121, autotune off, on one H100,
            with the roofline and what is left to win (bench/results/roofline/;
            tests/fixtures/h100/roofline)
                python -m sweeper model=mixnet_l,densenet121 autotune=off

    python bench/example_report.py [headline|grid] [--out DIR]
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

FIXTURES = ROOT / "tests" / "fixtures" / "h200"
EXAMPLES = {  # name: (its records, where its report goes)
    "headline": (FIXTURES / "headline", ROOT / "docs" / "example-report"),
    "grid": (FIXTURES / "example", ROOT / "docs" / "example-grid-report"),
    "roofline": (ROOT / "tests" / "fixtures" / "h100" / "roofline", ROOT / "docs" / "example-roofline-report"),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("example", nargs="?", choices=sorted(EXAMPLES), default="headline")
    ap.add_argument("--out", type=Path, help="default: the example's folder under docs/")
    args = ap.parse_args()
    records, default_out = EXAMPLES[args.example]
    out = args.out or default_out
    with tempfile.TemporaryDirectory() as tmp:
        report = build(records, Path(tmp) / args.example)
        # Only what a reader opens: the page (self-contained), its figures and tables.
        # Those are replaced; anything else in the folder (its README) is kept.
        out.mkdir(parents=True, exist_ok=True)
        for old in ("figures", "tables"):
            shutil.rmtree(out / old, ignore_errors=True)
        shutil.copy(report, out / "report.html")
        shutil.copytree(report.parent / "figures", out / "figures")
        (out / "tables").mkdir()
        for f in ("jobs.csv", "categories.csv", "microbench.csv", "recoverable.csv"):
            shutil.copy(report.parent / "tables" / f, out / "tables" / f)
    print(f"report: {out / 'report.html'}")
    return 0


def build(records: Path, sweep: Path) -> Path:
    """The sweep folder of `records` (NUM.result.json.gz and summary.json.gz) under `sweep`,
    aggregated; the report's path."""
    summary = json.loads(gzip.decompress((records / "summary.json.gz").read_bytes()))
    for entry in summary["jobs"]:
        num = entry["num"]
        rec = gzip.decompress((records / f"{num}.result.json.gz").read_bytes())
        (sweep / str(num)).mkdir(parents=True)
        (sweep / str(num) / "result.json").write_bytes(rec)
    (sweep / "summary.json").write_text(json.dumps(summary, indent=1))
    return aggregate(sweep)


if __name__ == "__main__":
    sys.exit(main())
