"""Checks of a whole sweep before any job starts: seconds, and no job folder created.

A typo in a model name should cost the user a second, not a 10-minute compile of the
other jobs first and a failed record at the end.
"""

from __future__ import annotations

from sweeper.models import UnknownModelError, check_model_name

FAULTS = (None, "crash", "hang", "raise")


class SweepConfigError(ValueError):
    """One or more jobs of the sweep cannot run as configured."""


def job_problems(cfg: dict) -> list[str]:
    problems = []
    try:
        check_model_name(str(cfg["model"]))
    except UnknownModelError as e:
        problems.append(str(e))
    for key in ("batch_size", "image_size"):
        value = cfg.get(key)
        if value is not None and (not isinstance(value, int) or value <= 0):
            problems.append(f"{key}={value}: must be a positive integer (or left unset for the default)")
    if cfg.get("timeout_s") is not None and cfg["timeout_s"] < 0:
        problems.append(f"timeout_s={cfg['timeout_s']}: must be 0 (no limit) or a positive number of seconds")
    for key, value in (cfg.get("measure") or {}).items():
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            problems.append(f"measure.{key}={value}: must be a positive integer")
    if cfg.get("debug_fault") not in FAULTS:
        problems.append(f"debug_fault={cfg.get('debug_fault')}: one of crash, hang, raise (tests only)")
    return problems


def check_sweep(jobs: list[tuple[int, list[str], dict]], gpus_available: float | None = None) -> None:
    """Raise SweepConfigError listing every problem of every job (num, overrides, config).
    `gpus_available`, when known, catches device=cuda on a machine or cluster without GPUs."""
    lines = []
    for num, overrides, cfg in jobs:
        problems = job_problems(cfg)
        if gpus_available is not None and cfg.get("device") == "cuda" and gpus_available <= 0:
            problems.append("device=cuda, but there is no GPU here; use device=auto or device=cpu")
        for p in problems:
            lines.append(f"  job #{num} ({' '.join(overrides) or 'defaults'}): {p}")
    if lines:
        raise SweepConfigError(
            f"{len(lines)} problem(s) found before starting; no job was run:\n" + "\n".join(lines))
