"""A max-autotune job's entries written while it compiles, so that none is lost.

A cold max-autotune compile of a mid-size model tunes for 15 minutes or more (template
autotuning, then coordinate descent), and the job process can be killed at any point of
it: its time limit, a cancelled sweep, a lost node. Inductor writes each op's template
timings and each kernel's tuned config into the job's cache folder as soon as it has them;
this thread copies them into the job folder (sweeper/stores/autotune_store.ENTRIES_FILE, marked
partial) every `SWEEPER_CHECKPOINT_S` seconds (30 by default) and at each phase end,
whenever something new is there. The launcher brings that file back with the job folder,
whatever ended the job, and the store takes it in.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from sweeper.autotune_info import AutotuneStoreInfo
from tasks import job_stores
from sweeper.torch_internals import probes


def interval_s() -> float:
    return float(os.environ.get("SWEEPER_CHECKPOINT_S", "30"))


def _fingerprint(inductor_cache: Path) -> tuple:
    """Cheap to take: the names, sizes and times of the files that hold tuning results."""
    files = list((inductor_cache / "cache").glob("*")) + list(inductor_cache.glob("*/*.best_config"))
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        out.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


class AutotuneCheckpoint:
    def __init__(self, job_dir: Path, inductor_cache: Path, torch_version: str, system: str | None,
                 started_with: dict | None = None) -> None:
        self.job_dir, self.cache, self.torch, self.system = Path(job_dir), Path(inductor_cache), torch_version, system
        self.started_with = started_with or {}  # what came from the store
        self.phase, self.phase_started_at = "compile", time.time()
        self.writes = 0
        self._seen: tuple = ()
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="autotune-checkpoint")

    def start(self) -> "AutotuneCheckpoint":
        self._thread.start()
        return self

    def phase_entered(self, name: str) -> None:
        """At each phase end (tasks/job.run): write what the phase tuned."""
        self.write()
        self.phase, self.phase_started_at = name, time.time()

    def write(self, force: bool = False) -> AutotuneStoreInfo | None:
        """The partial entries, if anything changed since the last write; their counts."""
        with self._lock:
            if self._stop.is_set():
                return None
            hits = probes.kernel_config_hits()  # a seeded job's progress shows as hits, not as new files
            now = (_fingerprint(self.cache), hits)
            if not force and now == self._seen:
                return None
            counts = job_stores.write_autotune_entries(
                self.job_dir, self.cache, self.torch, self.system, partial=True,
                progress={"phase": self.phase, "phase_started_at": self.phase_started_at,
                          "kernel_config_hits": hits, "started_with": self.started_with})
            self._seen, self.writes = now, self.writes + 1
            return counts

    def stop(self) -> None:
        """No more partial writes: the job writes its final entries itself."""
        self._stop.set()
        with self._lock:  # a write under way ends before the final one starts
            pass

    def _run(self) -> None:
        while not self._stop.wait(interval_s()):
            try:
                self.write()
            except Exception as e:  # noqa: BLE001 - a failed checkpoint costs a later retry, never the job
                print(f"[autotune checkpoint] not written: {type(e).__name__}: {e}", flush=True)
