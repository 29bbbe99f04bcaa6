"""The command line's KEY=VALUE overrides checked against the declarations in
sweeper/sweep/config.py before Hydra composes anything, so that every bad key or value
gets sweeper's own message and exit code 2, with or without a `+` in front:

- a key no job declares (`modle=x`): Hydra would stop with its raw "Could not override"
  (exit 1) where `+modle=x` reached sweeper's check; both now name the closest keys;
- a value outside a key's declared values: `autotune=yes` would have run max-autotune
  (OmegaConf reads yes, y, 1 as true) although the help says on|off, and `autotune=maybe`
  or `mode=train` stopped in Hydra's own text.

On and off keys take on, off, true or false; choices (mode, device, amp_dtype) their
names; integer keys integers; null where a key may be unset. Beyond its type, each value gets the
checks a composed job gets (validate.setting_problem: a model timm lacks, a batch of 0),
`inductor.*` names are looked up in Inductor's config, and device=cuda on a machine with
no GPU is refused, so that a command with several problems lists them all at once.
`hydra.launcher.*` settings are checked as the launcher declares them (type, least value,
choices, the closest name of an unknown one). Hydra's groups (`+sweep=...`,
`hydra/launcher=...`), other `hydra.*` keys and `pythons.*` are left to Hydra and their
own checks."""

from __future__ import annotations

import typing
from enum import Enum
from pathlib import Path

from sweeper.sweep.config import declared_keys
from sweeper.sweep.validate import SweepConfigError, _undeclared, setting_problem

BOOL_WORDS = ("on", "off", "true", "false")


def _declarations() -> dict[str, object]:
    """Every settable key (measure.* too) -> its declared type."""
    return {name: key.type for name, key in declared_keys().items()}


def _plain(tp) -> tuple[object, bool]:
    """(the type, whether null is allowed) of Optional[X] or X."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Union and len(args) == 1:
        return args[0], True
    return tp, False


def value_problem(key: str, value, tp) -> str | None:
    """What is wrong with one value of a declared key, None if nothing."""
    tp, nullable = _plain(tp)
    if value is None or (isinstance(value, str) and value.lower() == "null"):
        return None if nullable else f"{key}=null: this key must have a value"
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if tp is bool:
        return None if text.lower() in BOOL_WORDS else f"{key}={text}: one of on, off"
    if isinstance(tp, type) and issubclass(tp, Enum):
        names = [m.value for m in tp]
        return None if text in names else f"{key}={text}: one of {', '.join(names)}"
    if tp is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else f"{key}={text}: an integer"
    if tp is float:
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else f"{key}={text}: a number"
    return None


def _as_declared(value, tp):
    """A value as the composed config will hold it: `measure.steady_loop_s=0` parses as the
    integer 0, but the key is a float, where 0 turns the loop off."""
    if _plain(tp)[0] is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _values(override) -> list:
    if override.is_sweep_override():
        try:
            return list(override.sweep_iterator())
        except Exception:  # noqa: BLE001 - a range or glob of odd values: Hydra says what it says
            return []
    return [override.value()]


def problems(args: list[str], groups: set[str]) -> list[str]:
    """A problem for each bad key or value among the command line's overrides."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    declared = _declarations()
    keys = sorted(declared_keys())
    parser, out, inductor = OverridesParser.create(), [], {}
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        try:
            (override,) = parser.parse_overrides([arg])
        except HydraException:  # not an override Hydra can parse: its own error is the clearer one
            continue
        key = override.key_or_group
        top = key.split(".")[0]
        if key.startswith("hydra.launcher.") and not override.is_delete():  # the launcher's settings, typed
            out += launcher_problems(key[len("hydra.launcher."):], _values(override))
            continue
        if override.is_delete() or top == "hydra" or "/" in key or top in groups or override.package:
            continue
        if top == "inductor" and key != top:  # free-form: Inductor's own config names them
            inductor[key.split(".", 1)[1]] = override.value()
            continue
        if top == "pythons" and key != top:  # free-form: checked when the sweep resolves them
            continue
        if key not in declared:
            out.append(_undeclared(key, keys, plus=arg.startswith("+")))
            continue
        for value in _values(override):
            problem = value_problem(key, value, declared[key]) or setting_problem(key, _as_declared(value, declared[key]))
            if problem:
                out.append(problem)
                break
    if inductor:
        from sweeper import inductor_options

        out += inductor_options.problems(inductor)
    if wants_cuda_without_gpu(args, groups):
        out.append("device=cuda, but there is no GPU here; use device=auto or device=cpu")
    return out


def launcher_problems(key: str, values: list) -> list[str]:
    """The problem of a hydra.launcher.<key> override (its first bad value), as the
    launcher's own settings declare it (hydra_plugins/sweeper_ray/_config.py): the launcher
    checks the composed config again, with the scratch folder."""
    from hydra_plugins.sweeper_ray._config import setting_problem

    top = key.split(".")[0]
    if top == "runtime_env":  # free-form: Ray reads it
        return []
    for value in values:
        problem = setting_problem(top if "." in key else key, value)
        if problem:
            return [problem]
    return []


def wants_cuda_without_gpu(args: list[str], groups: set[str]) -> bool:
    """device=cuda asked on a machine with no GPU (NVML), for an embedded Ray: a cluster
    (`hydra.launcher.address`, RAY_ADDRESS) counts its GPUs once joined, and a chosen config
    file (`+sweep=...`, `hydra/launcher=...`) may name one, so those are left to the check
    after composition."""
    import os

    keys = [a.lstrip("+").split("=", 1)[0] for a in args if "=" in a]
    if not any(a.lstrip("+").split("=", 1)[0] == "device" and "cuda" in a.split("=", 1)[1].split(",")
               for a in args if "=" in a):
        return False
    if os.environ.get("RAY_ADDRESS") or any(k.startswith("hydra.launcher.address") or k in groups or "/" in k
                                            for k in keys):
        return False
    from sweeper.sweep.machine import nvml_gpus

    count = nvml_gpus()[0]
    return count is not None and count <= 0


def config_groups(conf_dir: Path) -> set[str]:
    """Hydra's config groups of conf/ (sweep, case, ...): `+sweep=nightly` chooses a file."""
    return {p.name for p in Path(conf_dir).iterdir() if p.is_dir()}


def check(args: list[str], conf_dir: Path) -> None:
    found = problems(args, config_groups(conf_dir))
    if found:
        raise SweepConfigError(f"{len(found)} problem(s) found before starting; no job was run:\n"
                               + "\n".join(f"  {p}" for p in found)
                               + "\n`python -m sweeper --help` lists every key with its values")
