"""Checks of a whole sweep before any job starts: seconds, and no job folder created.

A typo in a model name should cost the user a second, not a 10-minute compile of the
other jobs first and a failed record at the end.
"""

from __future__ import annotations

from sweeper.models import UnknownModelError, check_model_name

FAULTS = (None, "crash", "hang", "raise", "stall_mid_compile", "oom_when_packed")


class SweepConfigError(ValueError):
    """One or more jobs of the sweep cannot run as configured."""


def undeclared_keys(cfg: dict) -> list[str]:
    """A problem for every key the job config does not declare (sweeper/sweep/config.py),
    with the closest declared keys: Hydra itself suggests `+key=value` for an unknown key,
    and that would otherwise run the sweep with the key ignored."""
    from dataclasses import fields

    from sweeper.sweep.config import JobConfig, MeasureConfig

    declared = sorted(f.name for f in fields(JobConfig))
    problems = [_undeclared(key, declared) for key in cfg if key != "hydra" and key not in declared]
    if isinstance(cfg.get("measure"), dict):
        measure = sorted(f"measure.{f.name}" for f in fields(MeasureConfig))
        problems += [_undeclared(f"measure.{key}", measure) for key in cfg["measure"]
                     if f"measure.{key}" not in measure]
    return problems


def _undeclared(key: str, declared: list[str]) -> str:
    from difflib import get_close_matches

    close = get_close_matches(key, declared, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}?" if close else "`python -m sweeper --help` lists the keys"
    return f"{key}: not a sweeper key ({hint}); a `+` in front does not make it one"


def check_declared_keys(cfg: dict) -> None:
    """Raise SweepConfigError naming every undeclared key of the composed config."""
    problems = undeclared_keys(cfg)
    if problems:
        raise SweepConfigError(f"{len(problems)} problem(s) found before starting; no job was run:\n"
                               + "\n".join(f"  {p}" for p in problems))


def setting_problem(key: str, value) -> str | None:
    """What is wrong with one key's value beyond its type (a model timm lacks, a batch of 0,
    a negative time-out), None if nothing: checked on the command line's values before
    Hydra composes anything (sweeper/sweep/overrides.py), and on each composed job."""
    if key == "model":
        try:
            check_model_name(str(value))
        except UnknownModelError as e:
            return str(e)
    elif key in ("batch_size", "image_size"):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            return f"{key}={value}: must be a positive integer (or left unset for the default)"
    elif key == "timeout_s":
        if value is not None and not isinstance(value, bool) and isinstance(value, (int, float)) and value < 0:
            return f"timeout_s={value}: must be 0 (no limit) or a positive number of seconds"
    elif key.startswith("measure."):
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            return f"{key}={value}: must be a positive integer"
        if isinstance(value, float) and value < 0:  # a span or a budget share: 0 turns it off
            return f"{key}={value}: must be 0 or more"
    elif key == "debug_fault" and value not in FAULTS:
        return f"debug_fault={value}: one of crash, hang, raise, stall_mid_compile, oom_when_packed (tests only)"
    return None


def job_problems(cfg: dict) -> list[str]:
    problems = undeclared_keys(cfg)
    settings = [(key, cfg.get(key)) for key in ("model", "batch_size", "image_size", "timeout_s", "debug_fault")]
    settings += [(f"measure.{key}", value) for key, value in (cfg.get("measure") or {}).items()]
    problems += [p for key, value in settings if (p := setting_problem(key, value))]
    if cfg.get("inductor"):
        from sweeper import inductor_options

        problems.extend(inductor_options.problems(inductor_options.flatten(cfg["inductor"])))
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


def stop_on_problem(check, *args):
    """Run a pre-flight check and return what it returns; on a problem, say it and exit
    with code 2, having run nothing."""
    import sys

    try:
        return check(*args)
    except SweepConfigError as e:
        print(f"sweeper: {e}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def check_output_dir(path) -> None:
    """Raise SweepConfigError unless `path` (the sweep folder) can be created and written,
    so that an unwritable outputs folder stops the sweep before any job, not after."""
    import tempfile
    from pathlib import Path

    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as e:
        raise SweepConfigError(
            f"the sweep folder {path} cannot be written ({e.strerror or e}); choose another with "
            "hydra.sweep.dir=PATH, or fix its permissions") from None
