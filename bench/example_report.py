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

    python bench/example_report.py [headline|grid|roofline] [--out DIR] [--records SWEEP_DIR]

--records takes the records from a sweep folder a GPU run left (numbered job folders beside
summary.json; e.g. `bash bench/gpu_run.sh headline` or its sittings) in place of the
committed fixtures: docs/example-report rebuilt from a new run of the mission's command.
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
    ap.add_argument("--records", type=Path, help="a sweep folder whose records to use instead of the fixtures")
    args = ap.parse_args()
    records, default_out = EXAMPLES[args.example]
    out = args.out or default_out
    with tempfile.TemporaryDirectory() as tmp:
        report = build(args.records or records, Path(tmp) / args.example)
        # Only what a reader opens: the page (self-contained), its figures and tables.
        # Those are replaced; anything else in the folder (its README) is kept.
        out.mkdir(parents=True, exist_ok=True)
        for old in ("figures", "tables"):
            shutil.rmtree(out / old, ignore_errors=True)
        shutil.copy(report, out / "report.html")
        shutil.copytree(report.parent / "figures", out / "figures")
        (out / "tables").mkdir()
        for f in ("jobs.csv", "categories.csv", "microbench.csv", "recoverable.csv", "autotune_decisions.csv",
                  "autotune_regret.csv"):
            if f.startswith("autotune_") and len((report.parent / "tables" / f).read_text().splitlines()) < 2:
                continue  # no autotune decisions or sites in the sweep: no empty table beside the page
            shutil.copy(report.parent / "tables" / f, out / "tables" / f)
    print(f"report: {out / 'report.html'}")
    return 0


def build(records: Path, sweep: Path) -> Path:
    """The sweep folder of `records` (unpack) under `sweep`, aggregated; the report's path."""
    return aggregate(unpack(records, sweep))


def unpack(records: Path, sweep: Path) -> Path:
    """A sweep folder under `sweep` from `records`: NUM.result.json.gz and summary.json.gz
    (a fixture folder), or a sweep folder's NUM/result.json and summary.json."""
    folder = (records / "summary.json").is_file()
    summary = json.loads((records / "summary.json").read_text() if folder
                         else gzip.decompress((records / "summary.json.gz").read_bytes()))
    for entry in summary["jobs"]:
        num = entry["num"]
        rec = ((records / str(num) / "result.json").read_bytes() if folder
               else gzip.decompress((records / f"{num}.result.json.gz").read_bytes()))
        (sweep / str(num)).mkdir(parents=True)
        (sweep / str(num) / "result.json").write_bytes(rec)
    (sweep / "summary.json").write_text(json.dumps(summary, indent=1))
    return sweep


if __name__ == "__main__":
    sys.exit(main())
