"""Confirmation by interleaving (`python -m sweeper.history confirm NEW OLD`): the jobs a
compare flagged, run again old and new on this machine, their rounds taken in turn, and
the shift judged with an interval (sweeper/analysis/confirm_stats.py).

Each side is a process of its own (tasks/confirm_worker.py) under the interpreter its job
ran under (a build's `python=`), compiled once from the job's own job.json; the driver
then asks them for a round each in turn, old-new then new-old (ABBA), so that a drift of
the machine, a warming GPU or a busy neighbour, weighs on both alike. Nothing is written
into the sweep folders: the work folders go under --out (or a temporary folder).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sweeper.analysis.confirm_stats import Confirmed, confirm

REPO_ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 3600.0  # a side's compile (an autotuned one can take most of an hour)
ROUND_TIMEOUT_S = 600.0


class Interrupted(Exception):
    """Ctrl-C during a confirmation: the results so far (the pair in hand with its rounds)."""

    def __init__(self, results: list):
        super().__init__("interrupted")
        self.results = results


class ConfirmError(Exception):
    """A confirmation that cannot run: the message names what and the fix."""


@dataclass
class Pair:
    label: str
    old_dir: Path  # the job folders (result.json, or job.json)
    new_dir: Path


@dataclass
class PairResult:
    pair: Pair
    confirmed: Confirmed | None
    error: str | None = None
    old_rounds: list[float] | None = None
    new_rounds: list[float] | None = None


def is_job_folder(path: Path) -> bool:
    return (Path(path) / "result.json").is_file() or (Path(path) / "job.json").is_file()


def spec_of(job_dir: Path) -> dict:
    """The job's spec as its job.json held it, rebuilt from its record (a finished job's
    folder keeps result.json, not job.json): its configuration, overrides and the
    interpreter it ran under. No GPU lease, no stored compile: each side compiles afresh."""
    from sweeper.record import RecordError, read_record

    if not (job_dir / "result.json").is_file():
        return json.loads((job_dir / "job.json").read_text())
    try:
        rec = read_record(job_dir)
    except RecordError as e:
        raise ConfirmError(f"{job_dir}: {e}") from e
    if not rec.get("config"):
        raise ConfirmError(f"{job_dir}/result.json holds no configuration to run the job again from")
    return {"job_id": str((rec.get("job") or {}).get("id", job_dir.name)),
            "overrides": list((rec.get("job") or {}).get("overrides") or []), "config": rec["config"],
            "python_executable": (rec.get("environment") or {}).get("python_executable")}


def pairs_of(new: Path, old: Path, jobs: list[str] | None) -> tuple[list[Pair], list[str]]:
    """The job pairs to confirm, and notes. NEW and OLD are two job folders (one pair: two
    settings of one sweep, or any two jobs), or two sweep folders: their jobs matched by
    configuration, those named by --job (a label or key, in part), else those a compare of
    the two flags."""
    if is_job_folder(new) and is_job_folder(old):
        a, b = spec_of(Path(old))["overrides"], spec_of(Path(new))["overrides"]
        differ = (" ".join(o for o in a if o not in b), " ".join(o for o in b if o not in a))
        label = f"job {old.name}" + (f" ({differ[0]})" if differ[0] else "") + f" -> job {new.name}" + \
            (f" ({differ[1]})" if differ[1] else "")
        return [Pair(label, Path(old), Path(new))], []
    if is_job_folder(new) != is_job_folder(old):
        raise ConfirmError(f"give two job folders (each with result.json) or two sweep folders; {new} and {old} are "
                           "one of each")
    from sweeper.reporting import sweeps as sw

    t_new, t_old = sw.sweep_tables(new), sw.sweep_tables(old)
    ok_old = t_old.jobs[t_old.jobs["status"] == "ok"].drop_duplicates("key").set_index("key")
    ok_new = t_new.jobs[t_new.jobs["status"] == "ok"].drop_duplicates("key").set_index("key")
    both = [k for k in ok_new.index if k in ok_old.index]
    notes = []
    if jobs:
        keys = [k for k in both if any(j in k or j == ok_new.loc[k, "label"] for j in jobs)]
        missing = [j for j in jobs if not any(j in k or j == ok_new.loc[k, "label"] for k in both)]
        if missing:
            raise ConfirmError(f"no job of both sweeps matches {', '.join(missing)}: give a job's label or part of its "
                               f"key (e.g. model=resnet18), as `history compare {new} {old}` lists them")
    else:
        cmp = sw.compare_sweeps(Path(new), Path(old), kernels="none")
        keys = [k for k in cmp.flagged["key"] if k in both]
        notes.append(f"confirming the {len(keys)} jobs the compare flagged (--job names others)")
    return [Pair(str(ok_new.loc[k, "label"]), Path(str(ok_old.loc[k, "dir"])), Path(str(ok_new.loc[k, "dir"])))
            for k in keys], notes


class Side:
    """One worker process and the lines it answers."""

    def __init__(self, name: str, job_dir: Path, work: Path, say: Callable[[str], None]):
        work.mkdir(parents=True, exist_ok=True)
        spec = spec_of(job_dir)
        (work / "job.json").write_text(json.dumps(spec, indent=1))
        python = spec.get("python_executable") or sys.executable
        if not shutil.which(python) and not Path(python).exists():
            raise ConfirmError(f"{job_dir}: its interpreter {python} is not on this machine; confirm where it ran")
        env = dict(os.environ, PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
        self.name, self.say, self.log = name, say, (work / "confirm.log").open("w")
        self.proc = subprocess.Popen([python, "-m", "tasks.confirm_worker", str(work)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     cwd=REPO_ROOT, start_new_session=True)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.log.write(line)
            self.log.flush()
            if line.startswith("CONFIRM "):
                self.answers.put(json.loads(line[len("CONFIRM "):]))
            elif line.startswith("[sweeper] phase"):
                self.say(f"{self.name}: {line.strip()[len('[sweeper] '):]}")
        self.answers.put({"error": f"the process ended (exit {self.proc.wait()}); its log: {self.log.name}"})

    def wait(self, timeout: float) -> dict:
        try:
            got = self.answers.get(timeout=timeout)
        except queue.Empty:
            got = {"error": f"no answer in {timeout:.0f} s; its log: {self.log.name}"}
        if "error" in got:
            raise ConfirmError(f"{self.name}: {got['error']}")
        return got

    def round(self, calls: int) -> float:
        import statistics

        assert self.proc.stdin is not None
        self.proc.stdin.write(f"round {calls}\n")
        self.proc.stdin.flush()
        return statistics.median(self.wait(ROUND_TIMEOUT_S)["ms"])

    def close(self, at_once: bool = False) -> None:
        """The worker told to quit and waited for (at most 30 s), or, `at_once` (Ctrl-C, or
        anything else that ends the confirmation early), its whole process group (its
        compile workers too) killed now. A Ctrl-C during the wait kills it too."""
        if not at_once:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.write("quit\n")
                    self.proc.stdin.close()
                self.proc.wait(timeout=30)
                self.log.close()
                return
            except (OSError, subprocess.TimeoutExpired):
                pass
            except KeyboardInterrupt:
                self._kill()
                raise
        self._kill()

    def _kill(self) -> None:
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        self.log.close()


def confirm_pair(pair: Pair, work: Path, rounds: int, calls: int | None, processes: int = 2,
                 say: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> PairResult:
    """Both sides compiled, `processes` processes each, then `rounds` rounds a side in turn
    (old, new, new, old, ...; a side's rounds dealt over its processes in turn)."""
    sides: list[Side] = []
    got: dict[str, list[float]] = {}
    interrupted = True  # until it ends as planned: any other end (a Ctrl-C anywhere) kills the sides at once
    try:
        for k in range(processes):
            sides += [Side(f"old#{k + 1}", pair.old_dir, work / f"old{k + 1}", say),
                      Side(f"new#{k + 1}", pair.new_dir, work / f"new{k + 1}", say)]
        t0 = time.time()
        for s in sides:
            s.wait(READY_TIMEOUT_S)
        say(f"{pair.label}: both sides compiled ({processes} processes each) in {time.time() - t0:.0f} s; "
            f"{rounds} rounds each, in turn")
        n = calls or int(spec_of(pair.new_dir)["config"]["measure"]["timed_steps"])
        got.update({s.name: [] for s in sides})
        old = [s for s in sides if s.name.startswith("old")]
        new = [s for s in sides if s.name.startswith("new")]
        for i in range(rounds):
            a, b = old[i % processes], new[i % processes]
            for s in ((a, b) if i % 2 == 0 else (b, a)):
                got[s.name].append(s.round(n))
        old_rounds = [x for s in old for x in got[s.name]]
        new_rounds = [x for s in new for x in got[s.name]]
        interrupted = False
        return PairResult(pair, confirm(old_rounds, new_rounds, old_by_process=[got[s.name] for s in old],
                                        new_by_process=[got[s.name] for s in new]), None, old_rounds, new_rounds)
    except (ConfirmError, ValueError) as e:
        interrupted = False
        return PairResult(pair, None, str(e))
    except KeyboardInterrupt:
        old_rounds = [x for name, v in got.items() if name.startswith("old") for x in v]
        new_rounds = [x for name, v in got.items() if name.startswith("new") for x in v]
        raise Interrupted([PairResult(pair, None, f"interrupted (Ctrl-C) after {len(old_rounds)} rounds old and "
                                                  f"{len(new_rounds)} new: no verdict", old_rounds, new_rounds)])
    finally:
        for s in sides:
            s.close(at_once=interrupted)


def _path(python: str) -> str:
    # as written, not resolved: a venv's python is a link to the base one, and what it runs
    # (its site-packages, its .pth files) follows the path it was started by
    return os.path.normpath(os.path.abspath(os.path.expanduser(python)))


def check_interpreters(pairs: list[Pair], trusted: list[str]) -> None:
    """Refuse, before anything runs, a side whose record names an interpreter that is neither
    this command's nor one the user named (--python): a job folder is data, and a crafted one
    named a script that ran as whoever confirmed."""
    allowed = {_path(sys.executable), *(_path(p) for p in trusted)}
    for pair in pairs:
        for job_dir in (pair.old_dir, pair.new_dir):
            python = spec_of(job_dir).get("python_executable") or sys.executable
            if _path(python) not in allowed:
                raise ConfirmError(f"{job_dir}: its job ran under {python}, which confirm runs only when you name it: "
                                   f"add --python {python} if you trust it (the job folder says which interpreter to "
                                   "run; nothing was run)")


def run_confirm(new: Path, old: Path, jobs: list[str] | None, rounds: int, calls: int | None, out: Path | None,
                processes: int = 2, pythons: list[str] | None = None) -> tuple[list[PairResult], list[str]]:
    pairs, notes = pairs_of(new, old, jobs)
    check_interpreters(pairs, list(pythons or []))
    root = Path(out) if out else Path(tempfile.mkdtemp(prefix="sweeper-confirm-"))
    results: list[PairResult] = []
    for i, pair in enumerate(pairs):
        try:
            results.append(confirm_pair(pair, root / f"pair{i}", rounds, calls, processes))
        except Interrupted as stop:  # the pairs done and the rounds of the one in hand, kept
            raise Interrupted(results + stop.results) from None
    return results, notes + ([f"work folders (each side's log): {root}"] if pairs else [])


def confirm_lines(results: list[PairResult]) -> list[str]:
    lines = []
    for r in results:
        lines.append(f"- {r.pair.label}: " + (r.confirmed.words() if r.confirmed else f"could not confirm: {r.error}"))
    return lines


def write_confirm_csv(results: list, out: Path) -> Path:
    """confirm.csv in `out`: a row a job, its verdict, shift and interval, and its rounds."""
    import pandas as pd

    rows = [{"job": r.pair.label, "verdict": r.confirmed.verdict if r.confirmed else "could not confirm",
             "shift_pct": r.confirmed.shift_pct if r.confirmed else None,
             "ci_low_pct": r.confirmed.ci_pct[0] if r.confirmed else None,
             "ci_high_pct": r.confirmed.ci_pct[1] if r.confirmed else None,
             "p_value": r.confirmed.p_value if r.confirmed else None,
             "cliffs_delta": r.confirmed.cliffs_delta if r.confirmed else None,
             "old_rounds_ms": json.dumps(r.old_rounds), "new_rounds_ms": json.dumps(r.new_rounds),
             "error": r.error} for r in results]
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "confirm.csv", index=False)
    return out / "confirm.csv"
