"""What makes two jobs the same job: one definition, read by resume (sweep/control.py), the
expected duration (sweep/estimate.py), the compile store (sweeper/stores/compile_store.py), the
tables and the compares across sweeps (reporting/tables.py) and the builds pairs
(sweep/order.py).

A job's keys (sweeper/sweep/config.py, JobConfig) are of three kinds:
- what the job is: the model and its shapes, precision, compile options, device, Python
  environment, seed, and how it is measured (measure.*): IDENTITY_KEYS;
- how it is run: RUN_KEYS, which never make another job (a new store folder, cache
  folder or time limit, the sweep-level switches);
- of the identity, measure.* and the seed change no compile (`compile_identity`), and the
  seed repeats one configuration (`configuration`: what the tables and compares call a
  job across sweeps, whose seeds are its repeats).

Every declared key is one or the other: tests/test_identity.py fails on a new key that is
in neither list, and shows that two configurations that differ only in RUN_KEYS are one
job to every reader above.
"""

from __future__ import annotations

IDENTITY_KEYS = ("model", "batch_size", "image_size", "mode", "amp", "amp_dtype", "cudagraphs", "autotune", "device",
                 "seed", "inductor", "python", "measure")
RUN_KEYS = frozenset({"dry_run", "yes", "confirm_above", "timeout_s", "autotune_store", "compile_store", "cache_root",
                      "pythons"})
MEASURE_KEY = "measure"
SEED_KEY = "seed"


def identity(config: dict) -> dict:
    """The job's identity keys of `config` (a job's spec, or what a record says the job
    ran: sweeper.record.ran_config, whose `resolved` keys beyond these are not identity)."""
    return {k: config[k] for k in IDENTITY_KEYS if k in config}


def compile_identity(config: dict) -> dict:
    """What decides the job's compile: its identity less how it is measured. The seed
    stays: the compile store's entries were written with it, and a key of a compile store
    made before this module must read the same."""
    return {k: v for k, v in identity(config).items() if k != MEASURE_KEY}


def configuration(config: dict) -> dict:
    """The job across sweeps, its seeds its repeats: the compile identity less the seed."""
    return {k: v for k, v in compile_identity(config).items() if k != SEED_KEY}


def override_key(override: str) -> str:
    """The top-level key an override sets: "+measure.eager=false" -> "measure"."""
    return override.lstrip("+~").split("=", 1)[0].split(".")[0]


def identity_overrides(overrides: list[str]) -> list[str]:
    """The command line's overrides that set the job's identity, in their order (Hydra's
    own hydra.* settings and RUN_KEYS left out)."""
    return [o for o in overrides if not o.lstrip("+~").startswith("hydra.") and override_key(o) not in RUN_KEYS]


def compile_overrides(overrides: list[str]) -> list[str]:
    """Those of them that decide the compile (measure.* left out)."""
    return [o for o in identity_overrides(overrides) if override_key(o) != MEASURE_KEY]
