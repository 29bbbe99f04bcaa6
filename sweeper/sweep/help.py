"""`python -m sweeper --help`: every key a user may set, with its values, default and
meaning, read from the declarations in sweeper/sweep/config.py (`declared_keys`: the comment on a
field's line, or the comment lines just above it), so that the help
cannot drift from the config.
Hydra shows it through hydra.help.template (conf/config.yaml); Hydra's own help is
`--hydra-help`."""

from __future__ import annotations

import textwrap
import typing
from enum import Enum

from sweeper.sweep.config import declared_keys

HEADER = """sweeper: where the GPU time of torch.compile'd timm models goes, across a sweep.

  python -m sweeper [KEY=VALUE ...]       comma lists sweep (no -m needed)

Examples:
  python -m sweeper model=mixnet_l,densenet121 autotune=on,off     4 jobs
  python -m sweeper model=resnet18 batch_size=8,32 mode=inference  2 jobs
  python -m sweeper +sweep=nightly                                 the nightly grid
  python -m sweeper model=resnet50 dry_run=true                    list the jobs, run none
  python -m sweeper model=resnet50 --cfg job                       one job's config

Outputs: outputs/DATE/TIME/ (hydra.sweep.dir=PATH to choose): a folder per job (result.json,
job.log, traces, compiled modules), summary.json, tables/, figures/, report.html.
Afterwards: python -m sweeper.aggregate DIR (report again), python -m sweeper.history
compare|trend (against earlier sweeps). Docs: README.md, docs/running.md, docs/method.md.
"""


def _values(tp, name: str = "") -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) is typing.Union and len(args) == 1:  # Optional[X]
        tp = args[0]
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "|".join(m.value for m in tp)
    if tp is bool:
        return "on|off"
    if typing.get_origin(tp) is dict:  # entries are added with Hydra's +
        return f"+{name}.NAME=VALUE"
    return {str: "text", int: "integer", float: "number"}.get(tp, str(tp))


def _default(value) -> str:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bool):
        return "on" if value else "off"
    return "null" if value is None else str(value)


def _rows() -> list[tuple[str, str, str, str]]:
    return [(name, _values(key.type, name), _default(key.default), key.doc)
            for name, key in declared_keys().items()]


def help_text() -> str:
    rows = _rows()
    width = max(len(k) for k, *_ in rows) + 2
    out = [HEADER, "Keys (KEY=VALUE; values, default: meaning):"]
    for key, values, default, note in rows:
        out.append(f"  {key.ljust(width)}{values}, default {default}")
        out += textwrap.wrap(note, 100, initial_indent=" " * (width + 4), subsequent_indent=" " * (width + 4))
    out += ["", "Ray launcher (hydra.launcher.KEY=VALUE): docs/running.md.",
            "Hydra's own help, and its flags (--cfg, --info, -m, ...): python -m sweeper --hydra-help"]
    return "\n".join(out)

