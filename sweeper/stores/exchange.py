"""The stores' exchange with each job, on the driver: both stores are folders on the
driver's machine.

- the autotune store (autotune_store.py): each autotune=on job leaves with the store's
  max-autotune timings in its spec and comes back with its own, which the store keeps for
  every job that starts after it;
- the compile store (compile_store.py): each job leaves with what an earlier run of the
  same job compiled, if any, and comes back with what it compiled.

The job's side (putting the seeds into its caches, leaving its entries) is
tasks/job_stores.py.

The launcher calls seeds() before a job starts and bring_back() when its folder is back."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from sweeper.autotune_info import EarlierAttempt
from sweeper.job_spec import AutotuneSeed, JobSpec, StoredCompile
from sweeper.record import Record, write_record
from sweeper.stores import autotune_store, compile_store
from sweeper.stores.storage import Storage


# whether a job takes and gives autotune store entries (the job order's groups follow it,
# sweeper/sweep/order.py); the job's own side asks the same question (tasks/phases.py)
shares = autotune_store.shared_by


def _torch_version() -> str:
    """torch.__version__ as a job here will see it ("2.14.1+cu130"; the package metadata
    leaves out the local part), read from torch/version.py: importing torch costs seconds."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return "unknown"
    text = (Path(spec.origin).parent / "version.py").read_text()
    found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return found.group(1) if found else "unknown"


def seeds(config: dict, storage: Storage | None = None) -> tuple[AutotuneSeed | None, StoredCompile | None]:
    """The stores' entries for a job about to start: the autotune store's when it shares
    autotuning, the compile store's earlier compile of it when it keeps compiles. With
    shared `storage` (hydra.launcher.storage_path) the compile store is there, and the
    seed names the entry for the job's node to read (compile_store.fetch), not its bytes."""
    autotune = autotune_store.load(Path(config["autotune_store"]), _torch_version()) if shares(config) else None
    compiled = None
    if compile_store.shared_by(config) and storage is not None:
        # a compile that missed storage (it came back through Ray) goes there first
        moved = compile_store.promote(Path(config["compile_store"]), storage, _torch_version(), config)
        compiled = compile_store.reference(storage, _torch_version(), config)
        compiled = compiled.noted(moved) if moved else compiled
    elif compile_store.shared_by(config):
        compiled = compile_store.load(Path(config["compile_store"]), _torch_version(), config)
    return autotune, compiled


def earlier_attempts(config: dict, record: Mapping[str, Any] | None,
                     log: str | None = None) -> list[EarlierAttempt] | None:
    """What the stopped runs of this job (timed out, killed, cancelled, failed) had tuned
    and given the store, oldest first, from the last one's record (which carries those
    before it), for the job that runs it again; None when there was none, or none gave
    anything. A job can take several sittings: each stopped run started from the store
    the ones before it filled (`seeded_ops`) and added its own (`new_in_store`). `log`:
    where that run's log was kept (control.keep_earlier_log)."""
    if not record or record.get("status") == "ok" or not shares(config):
        return None
    store = (record.get("timings") or {}).get("autotune_store") or {}
    before = list(store.get("earlier_attempts") or [])
    if not (store.get("job_entries") or store.get("job_kernel_configs")):
        return before or None
    keep = ("job_entries", "job_ops", "job_kernel_configs", "partial", "stopped_in", "phase_s_at_stop",
            "new_in_store", "new_kernel_configs_in_store", "seeded_ops", "seeded_kernel_configs",
            "kernel_config_hits")
    return before + [{"status": record.get("status"), "reason": record.get("reason"),
                      "duration_s": (record.get("job") or {}).get("duration_s"),
                      **{k: store[k] for k in keep if k in store}, **({"log": log} if log else {})}]


def bring_back(spec: JobSpec, job_dir: Path, record: Record) -> Record:
    """The job's new entries into the stores (the record says how many were new there, and
    how many bytes of compile were kept)."""
    config = spec.config
    timings = record.setdefault("timings", {})
    if shares(config):
        try:
            new = autotune_store.absorb(Path(config["autotune_store"]), job_dir)
        except (autotune_store.StoreError, OSError) as e:  # the job's results count more than its timings
            new, note = None, f"its autotune entries could not be kept: {e}"
            timings.setdefault("autotune_store", {}).setdefault("notes", []).append(note)
        if new is not None:  # how many of the job's timings and kernel configs the store did not have
            timings.setdefault("autotune_store", {}).update(new)
    if compile_store.shared_by(config):
        try:
            kept = compile_store.absorb(Path(config["compile_store"]), job_dir, config)
        except (compile_store.StoreError, OSError) as e:
            kept, note = None, f"its compile could not be kept: {e}"
            timings.setdefault("compile_store", {}).setdefault("notes", []).append(note)
        if kept is not None:
            timings.setdefault("compile_store", {})["kept_bytes"] = kept
            if (record.get("job") or {}).get("storage_note"):  # the sweep has storage; this job's folder missed it
                timings["compile_store"].setdefault("notes", []).append(
                    f"kept in the driver's compile store ({config['compile_store']}), the storage being unreachable: "
                    "the next run of this job puts it in storage before it starts")
    if shares(config) or compile_store.shared_by(config):
        write_record(job_dir, record)
    return record
