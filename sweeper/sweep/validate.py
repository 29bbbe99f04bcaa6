"""Checks of a whole sweep before any job starts: seconds, and no job folder created.

A typo in a model name should cost the user a second, not a 10-minute compile of the
other jobs first and a failed record at the end.
"""

from __future__ import annotations

from sweeper.models import UnknownModelError, check_model_name


SEED_LIMIT = 2 ** 63  # seeds below this


class SweepConfigError(ValueError):
    """One or more jobs of the sweep cannot run as configured."""


def undeclared_keys(cfg: dict) -> list[str]:
    """A problem for every key the job config does not declare (sweeper/sweep/config.py),
    with the closest declared keys: Hydra itself suggests `+key=value` for an unknown key,
    and that would otherwise run the sweep with the key ignored."""
    from sweeper.sweep.config import declared_keys

    keys = declared_keys()
    shown = sorted(keys)
    top = {k.split(".")[0] for k in keys}
    problems = [_undeclared(key, sorted({k.split(".")[0] for k in shown})) for key in cfg
                if key != "hydra" and key not in top]
    for group in sorted({k.split(".")[0] for k in keys if "." in k}):  # measure
        if isinstance(cfg.get(group), dict):
            problems += [_undeclared(f"{group}.{key}", [k for k in shown if k.startswith(group + ".")])
                         for key in cfg[group] if f"{group}.{key}" not in keys]
    return problems


def _undeclared(key: str, declared: list[str], plus: bool = True) -> str:
    """An undeclared key's problem, with the closest declared names; plus: it was given
    with a `+` (or came from a config file), which adds a key to Hydra's config but not to
    sweeper's."""
    from difflib import get_close_matches

    close = get_close_matches(key, declared, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}?" if close else "`python -m sweeper --help` lists the keys"
    return f"{key}: not a sweeper key ({hint})" + ("; a `+` in front does not make it one" if plus else "")


def check_declared_keys(cfg: dict) -> None:
    """Raise SweepConfigError naming every undeclared key of the composed config."""
    problems = undeclared_keys(cfg)
    if problems:
        raise SweepConfigError(f"{len(problems)} problem(s) found before starting; no job was run:\n"
                               + "\n".join(f"  {p}" for p in problems))


def setting_problem(key: str, value) -> str | None:
    """What is wrong with one key's value beyond its type (a model timm lacks, a batch of 0,
    a negative time-out), None if nothing: the model is looked up
    in timm, the rest is read from the key's declaration (sweeper/sweep/config.py: its
    least value). Checked on the command line's values before Hydra composes
    anything (sweeper/sweep/overrides.py), and on each composed job."""
    import typing

    from sweeper.sweep.config import declared_keys

    if key == "model":
        try:
            check_model_name(str(value))
        except UnknownModelError as e:
            return str(e)
        return None
    if key == "seed" and not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < SEED_LIMIT):
        # torch.manual_seed takes no more: a larger seed passed here and failed in the job
        return f"seed={value}: must be a whole number from 0 to 2^63-1 ({SEED_LIMIT - 1})"
    declared = declared_keys().get(key)
    if declared is None or value is None:
        return None
    if declared.minimum is not None:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if declared.minimum >= 1 and not (number and isinstance(value, int) and value >= declared.minimum):
            unset = " (or left unset for the default)" if type(None) in typing.get_args(declared.type) else ""
            return f"{key}={value}: must be a positive integer{unset}"
        if number and value < declared.minimum:  # a span, a share, a time limit: 0 turns it off
            return f"{key}={value}: must be 0 or more"
    return None


def _declared_values(cfg: dict) -> list[tuple[str, object]]:
    """(dotted key, value) of every declared key `cfg` sets."""
    from sweeper.sweep.config import declared_keys

    out: list[tuple[str, object]] = []
    for key in declared_keys():
        node: object = cfg
        found = True
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                found = False
                break
            node = node[part]
        if found:
            out.append((key, node))
    return out


def job_problems(cfg: dict) -> list[str]:
    problems = undeclared_keys(cfg)
    problems += [p for key, value in _declared_values(cfg) if (p := setting_problem(key, value))]
    if cfg.get("inductor"):
        from sweeper import inductor_options

        problems.extend(inductor_options.problems(inductor_options.flatten(cfg["inductor"])))
    return problems


def check_sweep(jobs: list[tuple[int, list[str], dict]], gpus_available: float | None = None) -> None:
    """Raise SweepConfigError listing every problem of every job (num, overrides, config).
    `gpus_available`, when known, catches device=cuda on a machine or cluster without GPUs."""
    lines = _same_jobs(jobs)
    for num, overrides, cfg in jobs:
        problems = job_problems(cfg)
        if gpus_available is not None and cfg.get("device") == "cuda" and gpus_available <= 0:
            problems.append("device=cuda, but there is no GPU here; use device=auto or device=cpu")
        for p in problems:
            lines.append(f"  job #{num} ({' '.join(overrides) or 'defaults'}): {p}")
    if lines:
        raise SweepConfigError(
            f"{len(lines)} problem(s) found before starting; no job was run:\n" + "\n".join(lines))


def _same_jobs(jobs: list[tuple[int, list[str], dict]]) -> list[str]:
    """A problem for every job that is another job of the sweep again (seed=0,0): two
    identical jobs measure nothing twice, and share one compile and one record's name."""
    import json

    from sweeper.identity import identity

    first: dict[str, tuple[int, list[str]]] = {}
    out = []
    for num, overrides, cfg in jobs:
        key = json.dumps(identity(cfg), sort_keys=True, default=str)
        if key in first:
            other, other_overrides = first[key]
            out.append(f"  job #{num} ({' '.join(overrides) or 'defaults'}): the same job as #{other} "
                       f"({' '.join(other_overrides) or 'defaults'}); give each repeat a seed of its own "
                       "(seed=0,1), or drop the repeated value")
        else:
            first[key] = (num, overrides)
    return out


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
    from sweeper.record import write_problem

    why = write_problem(path)
    if why:
        raise SweepConfigError(
            f"the sweep folder {path} cannot be written ({why}); choose another with "
            "hydra.sweep.dir=PATH, or fix its permissions")
