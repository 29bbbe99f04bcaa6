"""Ends an embedded Ray whose driver died without a word (SIGKILL, the OOM killer).

A driver that exits or is interrupted shuts its embedded Ray down itself. One killed
outright, or stopped while ray.init still starts Ray, cannot: Ray's GCS and raylet die
with it, but the raylet's two agents (DashboardAgent, RuntimeEnvAgent) notice, then block
on reporting to the dead GCS, and stayed alive for minutes on the 2-core CPU machine
(tests/test_ray_launcher.py). So the driver starts this small watcher right before
ray.init: it holds the read end of a pipe whose write end only the driver has. While the
driver lives it notes, every second (every 0.2 s while Ray starts), the driver's
descendants (Ray's GCS and raylet, their agents, workers and job processes): once the
raylet is dead they are the children of init and nothing else tells them apart (their
/proc environ is clobbered by Ray's process titles). When the pipe closes, however the
driver ended, it waits for the driver to be gone, then kills those of them still running
a moment later, their start times checked so that a reused pid is left alone.

A worker the raylet started after the last look (a job's worker starts about when the
driver is killed) is nobody's known descendant, and it lived on for up to 30 s until it
noticed the raylet was gone. Ray points every worker's stdout and stderr into its
session's log folder, which the GCS's and raylet's command lines name: so at the end the
processes writing into this Ray's session folder are taken too."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

_GRACE_S = 2.0  # after a normal exit, Ray's own shutdown is let finish first
_watchers: list[subprocess.Popen] = []  # kept open (the pipe with them) while the driver lives


def watch_embedded_ray() -> None:
    """In the driver, before ray.init starts an embedded Ray: the watcher notes the driver's
    descendants (Ray's GCS and raylet, then their agents and workers) from then on, so that
    a driver stopped while Ray is still starting leaves nothing behind either."""
    pids = [os.getpid()]
    _watchers.append(subprocess.Popen(
        [sys.executable, "-m", __name__, *map(str, pids)], stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True))  # not in the driver's process group: a Ctrl-C is for the driver


def _start_time(pid: int) -> str | None:
    try:  # field 22 of /proc/PID/stat, counted after the command name's closing parenthesis
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else fields[19]


def _descendants(roots: dict[int, str | None]) -> dict[int, str | None]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            children.setdefault(int(stat.read_text().rsplit(")", 1)[1].split()[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            pass
    found, todo = {}, [p for p, t in roots.items() if t and _start_time(p) == t]
    while todo:
        pid = todo.pop()
        found[pid] = _start_time(pid)
        todo += children.get(pid, [])
    return found


_SESSION = re.compile(r"=(/\S*/session_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d+_\d+)(/|$)")


def _session_dir(pids) -> str | None:
    """This embedded Ray's session folder (<temp>/session_<date>_<time>_<us>_<pid>), as an
    option on the command line of its GCS or raylet names it; None before they start."""
    for pid in pids:
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        for arg in args:
            found = _SESSION.search(arg) if arg.startswith("--") else None
            if found:
                return found.group(1)
    return None


def _writing_into(folder: str) -> dict[int, str | None]:
    """The processes whose stdout or stderr is a file in `folder` (Ray's workers and agents of
    that session, whatever their parent now is)."""
    found = {}
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        for fd in ("1", "2"):
            try:
                target = os.readlink(fd_dir / fd)
            except OSError:
                continue
            if target.startswith(folder.rstrip("/") + "/"):
                found[int(fd_dir.parent.name)] = _start_time(int(fd_dir.parent.name))
                break
    return found


def _alive(known: dict[int, str | None]) -> list[int]:
    return [pid for pid, started in known.items() if started and _start_time(pid) == started]


def main(pids: list[int]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    drivers = {pid: _start_time(pid) for pid in pids}
    known = dict(drivers)
    session = None  # read while the GCS and raylet live: they die with the driver
    while not select.select([sys.stdin], [], [], 0.2 if len(known) < 4 else 1.0)[0] or os.read(sys.stdin.fileno(), 4096):
        known |= _descendants(known)  # until the driver's end closes
        known.pop(os.getpid(), None)  # the watcher is the driver's child too
        session = session or _session_dir(p for p in known if p not in drivers)
    # The pipe closes as the driver's interpreter shuts down, and the driver can live on for
    # seconds after (Ray's shutdown, its atexit work, on a loaded machine): counting the
    # grace from there SIGKILLed drivers that were ending normally (exit -9 after a finished
    # sweep). So the grace starts once the driver is gone, and the driver is never killed.
    while _alive(drivers):
        time.sleep(0.2)
    if session:  # the workers started since the last look, orphaned with the raylet
        known |= _writing_into(session)
    for pid in [*drivers, os.getpid()]:
        known.pop(pid, None)
    deadline = time.time() + _GRACE_S
    while _alive(known) and time.time() < deadline:
        time.sleep(0.2)
    for pid in _alive(known):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__":
    main([int(p) for p in sys.argv[1:]])
