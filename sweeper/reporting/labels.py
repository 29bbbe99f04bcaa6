"""What the tables and figures call a job: its label ("mixnet_l b128 train fp16 autotune"),
labels that tell apart jobs of the same label, and its key across sweeps (the configuration
that makes two jobs the same job; pure)."""

from __future__ import annotations

from typing import Any, Mapping

from sweeper.command_line import flatten
from sweeper.identity import configuration
from sweeper.record import Record, ran_config


def job_label(cfg: dict) -> str:
    """'mixnet_l b128 train fp16' plus the variant: the name figures use for a job. A job
    that never started has its batch size unresolved (the model's default, resolved where
    it runs): 'default batch'."""
    batch = cfg.get("batch_size")
    parts = [str(cfg.get("model")), f"b{batch}" if batch is not None else "default batch",
             "train" if cfg.get("mode") == "training" else "infer"]
    if cfg.get("amp"):
        parts.append({"float16": "fp16", "bfloat16": "bf16"}.get(str(cfg.get("amp_dtype")), "amp"))
    if cfg.get("cudagraphs"):
        parts.append("cudagraphs")
    if cfg.get("autotune"):
        parts.append("autotune")
    parts += [f"{k}={v}" for k, v in flatten(cfg.get("inductor")).items()]
    if cfg.get("python"):
        parts.append(f"python={cfg['python']}")
    return " ".join(parts)


def record_label(rec: Mapping[str, Any]) -> str:
    """job_label() of what a record's job ran (sweeper.record.ran_config)."""
    return job_label(ran_config(rec))


# the keys every job key names, in this order (older sweeps' keys read the same)
_KEY_ORDER = ("model", "mode", "batch_size", "image_size", "amp", "amp_dtype", "cudagraphs", "autotune", "device")


def job_key(cfg: dict) -> str:
    """The job across sweeps, its seeds its repeats (sweeper/identity.configuration), as
    "model=...,mode=...,...": the keys of _KEY_ORDER always, then any other key only when
    set (python; inductor options as inductor.<name>), so that a key added to the
    configuration later leaves the keys of sweeps before it unchanged."""
    conf = configuration(cfg)
    parts = [f"{k}={conf.get(k)}" for k in _KEY_ORDER]
    for k in sorted(set(conf) - set(_KEY_ORDER)):
        value = conf[k]
        if isinstance(value, dict):
            parts += [f"{k}.{name}={v}" for name, v in sorted(flatten(value).items())]
        elif value not in (None, "", [], {}):
            parts.append(f"{k}={value}")
    return ",".join(parts)


def key_fields(key: str) -> dict[str, str]:
    """A job key's fields, as job_key() wrote them: {"model": "resnet18", ...,
    "inductor.<name>": ...}."""
    return dict(p.split("=", 1) for p in key.split(",") if "=" in p)


def key_without(key: str, field: str) -> str:
    """The job key less one field (the builds' compare keys jobs without their `python`)."""
    return ",".join(p for p in key.split(",") if p.split("=", 1)[0] != field)


def job_num(rec: Mapping[str, Any]) -> int:
    value = str((rec.get("job") or {}).get("id"))
    return int(value) if value.isdigit() else -1


def distinct_labels(jobs: dict) -> dict:
    """id -> label, from id -> (job key, base label): jobs whose base labels are the same
    but whose configurations differ get the keys that tell them apart added
    ("resnet18 b8 infer image_size=160"); jobs of one configuration (seeds) get their id."""
    groups: dict[str, list] = {}
    for ident, (_, label) in jobs.items():
        groups.setdefault(label, []).append(ident)
    out = {}
    for label, idents in groups.items():
        parts = {i: jobs[i][0].split(",") for i in idents}
        common = set.intersection(*(set(p) for p in parts.values()))
        for i in idents:
            extra = [p for p in parts[i] if p not in common]
            same = sum(1 for j in idents if parts[j] == parts[i])
            out[i] = " ".join([label, *extra] + ([f"#{i}"] if same > 1 else []))
    return out


def unique_labels(records: list[Record]) -> dict[int, str]:
    """job number -> label, told apart where two jobs would share one (distinct_labels)."""
    return distinct_labels({job_num(r): (job_key(ran_config(r)), record_label(r)) for r in records})
