"""The example report under docs/example-report/, from the H200 records of session 2
(tests/fixtures/h200/session2: the scaling sweep's autotune on/off pairs, resnet18 with
CUDA graphs off and on, the OOM sweep, mixnet_l and densenet121). They come from several
sweeps, gathered into one folder; it is not one sweep of issue 5's grid.

    python bench/example_report.py [--out docs/example-report]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from sweeper import summary as sm  # noqa: E402
from sweeper.aggregate import aggregate  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "h200" / "session2"
ORDER = ["mixnet_l", "densenet121", "resnet18_0", "resnet18_1", "scaling_gpu2_0", "scaling_gpu2_1",
         "scaling_gpu2_2", "scaling_gpu2_3", "oom_0", "oom_1"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "example-report")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = build(Path(tmp) / "h200-session2")
        # Only what a reader opens: the page (self-contained), its figures and tables.
        shutil.rmtree(args.out, ignore_errors=True)
        args.out.mkdir(parents=True)
        shutil.copy(report, args.out / "report.html")
        shutil.copytree(report.parent / "figures", args.out / "figures")
        for f in ("jobs.csv", "categories.csv"):
            (args.out / "tables").mkdir(exist_ok=True)
            shutil.copy(report.parent / "tables" / f, args.out / "tables" / f)
    print(f"report: {args.out / 'report.html'}")
    return 0


def build(sweep: Path) -> Path:
    entries = []
    for num, name in enumerate(ORDER):
        rec = json.loads(gzip.decompress((FIXTURES / f"{name}.result.json.gz").read_bytes()))
        job_dir = sweep / str(num)
        job_dir.mkdir(parents=True)
        (job_dir / "result.json").write_text(json.dumps(rec, indent=1))
        entries.append(sm.job_entry(num, rec["job"]["overrides"], job_dir, rec))
    # started: the first record's start, so that the page's date is the runs' date
    started = min(datetime.fromisoformat(json.loads((sweep / str(n) / "result.json").read_text())["job"]["started_at"])
                  .timestamp() for n in range(len(ORDER))
                  if json.loads((sweep / str(n) / "result.json").read_text())["job"].get("started_at"))
    sm.write_summary(sweep, entries, started, ["(records of several H200 sweeps, session 2: bench/example_report.py)"],
                     done=True)
    summary = json.loads((sweep / "summary.json").read_text())
    summary["elapsed_s"] = None  # gathered from several sweeps: no one sweep's duration
    (sweep / "summary.json").write_text(json.dumps(summary, indent=1))
    return aggregate(sweep)


if __name__ == "__main__":
    sys.exit(main())
