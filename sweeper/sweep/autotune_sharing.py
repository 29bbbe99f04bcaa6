"""The driver's side of the autotune store (tasks/autotune_store.py): each autotune=on job
leaves with the store's entries in its spec and comes back with its own, which the
store keeps for every job that starts after it. Both launchers call these."""

from __future__ import annotations

from pathlib import Path

from sweeper.record import write_record
from tasks import autotune_store


shares = autotune_store.shared_by  # the job's own side asks the same question (tasks/phases.py)


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


def with_seed(spec: dict) -> dict:
    """The job's spec, with the store's entries for it when it shares autotuning."""
    if not shares(spec["config"]):
        return spec
    return {**spec, "autotune_seed": autotune_store.load(Path(spec["config"]["autotune_store"]), _torch_version())}


def bring_back(spec: dict, job_dir: Path, record: dict) -> dict:
    """The job's new entries into the store (the record says how many were new there)."""
    if not shares(spec["config"]):
        return record
    try:
        new = autotune_store.absorb(Path(spec["config"]["autotune_store"]), job_dir)
    except (autotune_store.StoreError, OSError) as e:  # the job's results count more than its timings
        new, note = None, f"its autotune entries could not be kept: {e}"
        record.setdefault("timings", {}).setdefault("autotune_store", {}).setdefault("notes", []).append(note)
    if new is not None:
        record.setdefault("timings", {}).setdefault("autotune_store", {})["new_in_store"] = new
    write_record(job_dir, record)
    return record
