"""What a driver killed outright, or stopped while its embedded Ray starts, leaves behind.

    python bench/driver_signals.py [--kills 6] [--terms 9] [--out bench/results/reliability/driver_signals.md]

SIGKILL: a 4-job sweep of hanging jobs (SWEEPER_TEST_FAULTS=*=hang) is killed 0, 0.5 or
1 s after its first Ray worker appears; then every process of that run is followed (the
driver's process tree as seen up to the kill, and whatever writes into its Ray session's
log folder or its scratch folder) and the seconds until none is alive are counted.
SIGTERM: a one-job sweep gets SIGTERM 0 to 2.4 s after Ray's "Started a local Ray
instance" line; its exit code, the seconds until none of its processes is alive, and
whether its sweep folder (Hydra's files and the .sweep.lock) was left are written down.
docs/reliability.md states what this measures.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = ["model=test_resnet", "mode=inference", "image_size=32", "batch_size=2", "measure.timed_steps=2",
        "measure.warmup_steps=1", "measure.profile_steps=1", "measure.eager=false", "measure.steady_loop_s=0",
        "measure.microbench=false", "timeout_s=300"]
SESSION = re.compile(r"(/\S*/session_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_\d+)")


def tree(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            children.setdefault(int(stat.read_text().rsplit(")", 1)[1].split()[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            pass
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += children.get(pid, [])
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def writing_into(folders: list[str]) -> set[int]:
    found = set()
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        for fd in ("1", "2"):
            try:
                target = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if any(target.startswith(f.rstrip("/") + "/") for f in folders):
                found.add(int(fd_dir.parent.name))
    return found


def left_for(seen: set[int], folders: list[str], cap_s: float) -> tuple[float, list[str]]:
    """Seconds until no process of the run is alive (cap_s at most), and what was left then."""
    t0 = time.time()
    while time.time() - t0 < cap_s:
        live = [p for p in seen | writing_into(folders) if alive(p) and p != os.getpid()]
        if not live:
            return time.time() - t0, []
        time.sleep(0.2)
    live = [p for p in seen | writing_into(folders) if alive(p)]
    return cap_s, [cmdline(p)[:60] for p in live]


def kill_trial(tmp: Path, delay_s: float, anchor: str) -> dict:
    """SIGKILL `delay_s` after the run's first process of `anchor` ("raylet", or "ray::" for
    a worker) appears."""
    env = dict(os.environ, SWEEPER_TEST_FAULTS="*=hang", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", *TINY, "seed=0,1,2,3", f"hydra.sweep.dir={tmp / 'sweep'}",
                             f"hydra.launcher.scratch_dir={tmp / 'scratch'}"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    seen: set[int] = set()
    session = None
    first_worker = None
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        seen |= tree(proc.pid)
        lines = {p: cmdline(p) for p in seen}
        session = session or next((m.group(1) for c in lines.values() for m in [SESSION.search(c)] if m), None)
        if first_worker is None and any(anchor in c and "Agent" not in c for c in lines.values()):
            first_worker = time.time()
        if first_worker is not None and time.time() - first_worker >= delay_s:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    took, left = left_for(seen - {proc.pid}, [f for f in (session, str(tmp)) if f], 40.0)
    return {"anchor": anchor, "delay_s": delay_s, "seen": len(seen), "gone_s": took, "left": left}


def term_trial(tmp: Path, after_s: float) -> dict:
    proc = subprocess.Popen([sys.executable, "-m", "sweeper", *TINY, f"hydra.sweep.dir={tmp / 'sweep'}"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
    seen: set[int] = set()
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    out, started, sent = "", None, False
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        out += (proc.stdout.read() or b"").decode(errors="replace")
        seen |= tree(proc.pid)
        if started is None and "Started a local Ray instance" in out:
            started = time.time()
        if started is not None and not sent and time.time() - started >= after_s:
            proc.send_signal(signal.SIGTERM)
            sent = True
        time.sleep(0.02)
    code = proc.wait(timeout=120)
    sessions = {m.group(1) for p in seen for m in [SESSION.search(cmdline(p))] if m}
    took, left = left_for(seen - {proc.pid}, sorted(sessions), 30.0)
    folder = tmp / "sweep"
    return {"after_s": after_s, "sent": sent, "exit": code, "gone_s": took, "left": left, "out": out,
            "folder_left": sorted(p.name for p in folder.iterdir()) if folder.exists() else []}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--terms", type=int, default=9)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = ["# What a killed or stopped driver leaves behind", "",
            f"`python bench/driver_signals.py --kills {args.kills} --terms {args.terms}` on {os.cpu_count()} cores, "
            f"{time.strftime('%Y-%m-%d')}.", "",
            "## SIGKILL of the driver while its embedded Ray starts and its first workers start", "",
            "| killed after | processes of the run seen | seconds until none alive | left after 40 s |",
            "|---|---:|---:|---|"]
    trials = [("raylet", 0.0), ("raylet", 0.3), ("raylet", 0.6), ("raylet", 1.0), ("ray::", 0.0), ("ray::", 0.5),
              ("ray::", 1.0)]
    for i in range(args.kills):
        anchor, delay = trials[i % len(trials)]
        with tempfile.TemporaryDirectory() as d:
            r = kill_trial(Path(d), delay, anchor)
        print({k: v for k, v in r.items() if k != "out"}, flush=True)
        what = "the raylet" if anchor == "raylet" else "the first worker"
        rows.append(f"| {r['delay_s']:.1f} s after {what} | {r['seen']} | {r['gone_s']:.1f} | "
                    f"{'; '.join(r['left']) or '–'} |")
    rows += ["", "## SIGTERM while the embedded Ray starts", "",
             "| SIGTERM after Ray's start line | exit code | seconds until none alive | sweep folder left |",
             "|---:|---:|---:|---|"]
    for i in range(args.terms):
        after = round(0.3 * i, 1)
        with tempfile.TemporaryDirectory() as d:
            r = term_trial(Path(d), after)
        print({k: v for k, v in r.items() if k != "out"}, flush=True)
        if not r["sent"]:
            rows.append(f"| {after:.1f} s | {r['exit']} (ended before the signal) | – | – |")
            continue
        rows.append(f"| {after:.1f} s | {r['exit']} | {r['gone_s']:.1f} | {', '.join(r['folder_left']) or 'none'} |")
    text = "\n".join(rows) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
