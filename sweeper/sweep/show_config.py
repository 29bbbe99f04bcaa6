"""`python -m sweeper ... --cfg job` on a sweep. Hydra's own --cfg refuses comma lists
("Ambiguous value ... add --multirun"), and with -m it stops on "Only one of --run,
--multirun, --cfg ..." in a traceback; the README promises that comma lists sweep without
-m. So a --cfg over a sweep is answered here: each job's composed config in turn, as the
launcher would compose it."""

from __future__ import annotations

from pathlib import Path

from sweeper.sweep.machine import nvml_gpus, resolved

CFG_FLAGS = ("--cfg", "-c")


def wants_config(argv: list[str]) -> bool:
    return any(a in CFG_FLAGS for a in argv)


def without_multirun(argv: list[str]) -> list[str]:
    """--cfg with -m: the primary config sweeps already (hydra.mode MULTIRUN)."""
    return [a for a in argv if a not in ("-m", "--multirun")]


def sweep_configs(argv: list[str], conf_dir: Path) -> list[tuple[list[str], str]] | None:
    """(job overrides, its config as YAML) for each job of the sweep `argv` names (one job
    too, for `--cfg job`: with its device and batch size resolved), None when argv sweeps
    nothing and asks for more than the job's config (Hydra's own --cfg then answers)."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    argv = without_multirun(argv)
    i = next(k for k, a in enumerate(argv) if a in CFG_FLAGS)
    part = argv[i + 1] if i + 1 < len(argv) else "job"
    overrides = [a for k, a in enumerate(argv) if not a.startswith("-") and k != i + 1]
    parsed = OverridesParser.create().parse_overrides(overrides)
    if not any(o.is_sweep_override() for o in parsed) and part != "job":
        return None
    jobs = [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
    gpus = nvml_gpus()[0] or 0 if part == "job" else None
    out = []
    with initialize_config_dir(str(conf_dir), version_base="1.3"):
        for job in jobs:
            cfg = compose("config", overrides=job, return_hydra_config=part != "job")
            if part == "hydra":
                cfg = cfg.hydra
            elif part == "job":
                cfg = OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"])
                plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
                assert isinstance(plain, dict)  # a DictConfig's container
                out.append((job, job_yaml(plain, gpus)))
                continue
            out.append((job, OmegaConf.to_yaml(cfg, resolve=part == "job")))
    return out


def job_yaml(config: dict, gpus: int | None) -> str:
    """A job's config as it will run here: `device: auto` and an unset `batch_size` as the
    job resolves them (sweeper/sweep/machine.py), said in a comment; a job a CPU skips
    marked."""
    from omegaconf import OmegaConf

    r = resolved(config, gpus)
    notes = []
    if config.get("device") == "auto" and r["device"] != "auto":
        config["device"] = r["device"]
        notes.append(f"device: auto -> {r['device']} ({r['device_why']})")
    if config.get("batch_size") is None and r["batch_size"] is not None:
        config["batch_size"] = r["batch_size"]
        notes.append(f"batch_size: unset -> {r['batch_size']} ({r['batch_size_why']})")
    head = "".join(f"# {n}\n" for n in notes) + (f"# SKIPPED here: {r['skipped']}\n" if r["skipped"] else "")
    return head + OmegaConf.to_yaml(OmegaConf.create(config))
