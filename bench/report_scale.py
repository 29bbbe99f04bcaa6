"""The report, compare and trend at a cluster's size: synthetic sweeps of 4, 50, 200 and
1,000 jobs made from the committed H200 records (tests/synthetic_sweeps.py: the 18 real jobs
copied, each copy's model renamed), three nights of each, the last with three jobs slowed.
For each size: `python -m sweeper.aggregate` of the last night (wall time, peak memory,
report.html's size, its findings: sweep-level and all, the page's height at 1400 px, the
height of the sweep-level findings and where the job sections start), `history compare` (default and --kernels:
time, lines, the line of the first flagged job and of the full table) and `history trend`.
With --screens, a 1400x1000 screenshot of the 200-job report's first screen and a copy of
its figures (the PNGs the page shows) go beside the table.

    python bench/report_scale.py [--sizes 4,50,200,1000] [--out bench/results/report_scale] [--screens]

Needs Chromium for the page's height and the screenshot (apt-get install chromium);
without it those columns read "–". Each run starts from fresh synthetic sweeps in a
temporary folder (about 1.2 GB at 1,000 jobs)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from synthetic_sweeps import real_records, write_sweep  # noqa: E402

NIGHTS = 3
# run a command, print its wall time and the peak memory of its process (kB) on the last line
_MEASURED = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
             "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr); "
             "print(f'@@ {time.perf_counter() - t:.2f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {r.returncode}')")


def measured(*args: str) -> tuple[str, float, float, int]:
    """(stdout, wall s, peak memory GB, exit code) of `python -m ...args` in its own process."""
    proc = subprocess.run([sys.executable, "-c", _MEASURED, sys.executable, *args], capture_output=True, text=True)
    out, last = proc.stdout.rsplit("@@ ", 1)
    wall, rss, rc = last.split()
    return out, float(wall), int(rss) / 1e6, int(rc)


def chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def page_geometry(report: Path) -> dict:
    """The page as a 1400-px browser lays it out (the data-* the page sets on load)."""
    browser = chromium()
    if browser is None:
        return {}
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                          "--virtual-time-budget=20000", "--dump-dom", report.as_uri()],
                         capture_output=True, text=True, timeout=300).stdout
    return {a: int(m.group(1)) for a in ("data-page-height", "data-job-sections-y", "data-sweep-findings-height")
            if (m := re.search(rf'{a}="(-?\d+)"', dom))}


def screenshot(report: Path, png: Path) -> None:
    browser = chromium()
    if browser is not None:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1400,1000", f"--screenshot={png}", report.as_uri()],
                       capture_output=True, timeout=300, cwd=png.parent)


def one_size(n: int, work: Path, records: list[dict], screens: Path | None) -> dict:
    root = work / f"n{n}"
    start = datetime(2026, 12, 1, 2, 0, 0)
    slow = {1: 1.3, 7: 1.25, n - 3: 1.4} if n > 8 else {1: 1.3}
    nights = [write_sweep(root / f"night{i + 1}", n, start + timedelta(days=i),
                          slow if i == NIGHTS - 1 else None, records) for i in range(NIGHTS)]
    for night in nights[:-1]:  # their tables, as their own aggregates left them
        measured("-m", "sweeper.aggregate", str(night))
    _, wall, gb, rc = measured("-m", "sweeper.aggregate", str(nights[-1]))
    report = nights[-1] / "report.html"
    page = report.read_text()
    sweep_level = len(re.findall(r"<li data-rule='[^']*'", page.split("<ul class='findings sweep'>")[1].split("</ul>")[0])
                      ) if "<ul class='findings sweep'>" in page else None
    geometry = page_geometry(report)
    row = {"jobs": n, "aggregate_s": wall, "aggregate_peak_gb": round(gb, 2), "aggregate_rc": rc,
           "report_mb": round(report.stat().st_size / 1e6, 2),
           "figures_embedded": "data:image/png;base64," in page,
           "findings_sweep_level": sweep_level,
           "findings_in_page": len(re.findall(r"<li data-rule=", page)),
           "page_height_px": geometry.get("data-page-height"),
           "sweep_findings_height_px": geometry.get("data-sweep-findings-height"),
           "job_sections_y_px": geometry.get("data-job-sections-y")}
    for name, extra in (("compare", []), ("compare_kernels", ["--kernels"])):
        out, wall, gb, rc = measured("-m", "sweeper.history", "compare", str(nights[-1]), *extra)
        lines = out.splitlines()
        first_flag = next((i + 1 for i, x in enumerate(lines) if x.startswith("- ")), None)
        table = next((i + 1 for i, x in enumerate(lines) if x.startswith("## Every job")), None)
        row.update({f"{name}_s": wall, f"{name}_peak_gb": round(gb, 2), f"{name}_lines": len(lines),
                    f"{name}_first_flagged_line": first_flag, f"{name}_table_line": table})
    _, wall, gb, rc = measured("-m", "sweeper.history", "trend", str(root), "--out", str(root / "trend.png"))
    row.update({"trend_s": wall, "trend_peak_gb": round(gb, 2)})
    if screens is not None and n == 200:
        screens.mkdir(parents=True, exist_ok=True)
        screenshot(report, screens / "first_screen_200.png")
        for png in sorted((nights[-1] / "figures").glob("*.png")):
            shutil.copy(png, screens / f"{png.stem}_200.png")
        shutil.copy(root / "trend.png", screens / "trend_200.png")
    shutil.rmtree(root)
    return row


def table(rows: list[dict]) -> str:
    cols = list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out.append("| " + " | ".join("–" if r[c] is None else str(r[c]) for c in cols) + " |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="4,50,200,1000")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "report_scale")
    ap.add_argument("--screens", action="store_true", help="screenshot the 200-job report, copy its figures")
    args = ap.parse_args()
    records = real_records()
    rows = []
    with tempfile.TemporaryDirectory(prefix="report_scale") as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            rows.append(one_size(n, Path(tmp), records, args.out if args.screens else None))
            print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    text = (f"# The report, compare and trend by sweep size\n\n{datetime.now():%Y-%m-%d}, "
            f"`python bench/report_scale.py --sizes {args.sizes}{' --screens' if args.screens else ''}` "
            f"on {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores; "
            "times in seconds, memory the process's peak in GB, the page's height at 1400 px.\n\n" + table(rows) + "\n")
    (args.out / "report_scale.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
