"""One job, one definition (sweeper/identity.py): two configurations composed by Hydra that
differ only in how a job is run are one job to every reader of "the same job"; one that
differs in what the job is, is another job to each."""

import dataclasses
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from sweeper import identity
from sweeper.job_spec import JobSpec
from sweeper.record import new_record, write_record
from sweeper.reporting.tables import job_key
from sweeper.sweep import estimate
from sweeper.sweep.config import JobConfig
from sweeper.sweep.control import Job, earlier_record, reusable
from sweeper.sweep.hydra_setup import register
from sweeper.sweep.order import pair_key
from sweeper.stores import compile_store

CONF = str(Path(__file__).resolve().parent.parent / "conf")
register()

BASE = ["model=resnet18", "batch_size=8", "autotune=on"]
# every run key, set otherwise than by default
RUN = ["cache_root=/tmp/elsewhere", "timeout_s=60", "autotune_store=/tmp/a", "compile_store=off",
       "+pythons.b=/usr/bin/python3", "dry_run=true", "yes=true", "confirm_above=3"]


def composed(*overrides: str) -> dict:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


def readers(tmp_path: Path, overrides: list[str]) -> dict:
    """What each reader makes of a job of these overrides, against a finished earlier job of
    BASE in the same folder (resume) and a stopped one (a stopped job's earlier attempt)."""
    config = composed(*overrides)
    folder = tmp_path / "job"
    folder.mkdir(exist_ok=True)
    earlier = new_record(JobSpec("0", tuple(BASE), composed(*BASE)), folder)
    earlier["status"] = "ok"
    write_record(folder, earlier)
    job = Job(0, list(overrides), OmegaConf.create(config), folder, {"config": config})
    resumed = reusable(job) is not None
    earlier.update(status="failed", reason="stopped at its time limit")
    write_record(folder, earlier)
    return {"resume": resumed, "earlier attempt": earlier_record(job) is not None,
            "estimate": estimate.job_identity(list(overrides)), "compile store": compile_store.key(config),
            "tables": job_key(config), "builds pairs": pair_key(config)}


def test_every_declared_key_is_identity_or_how_the_job_is_run():
    declared = {f.name for f in dataclasses.fields(JobConfig)}
    assert set(identity.IDENTITY_KEYS) | identity.RUN_KEYS == declared
    assert not set(identity.IDENTITY_KEYS) & identity.RUN_KEYS
    assert set(composed()) - {"hydra"} == declared


def test_configurations_that_differ_only_in_how_they_run_are_one_job_everywhere(tmp_path):
    base = readers(tmp_path, BASE)
    assert base["resume"] and base["earlier attempt"]
    for extra in RUN:
        assert readers(tmp_path, [*BASE, extra]) == base, extra
    assert readers(tmp_path, [*BASE, *RUN]) == base


def test_a_different_job_is_another_job_everywhere(tmp_path):
    base = readers(tmp_path, BASE)
    other = readers(tmp_path, ["model=resnet18", "batch_size=16", "autotune=on"])
    assert not other["resume"] and not other["earlier attempt"]
    assert all(other[k] != base[k] for k in ("estimate", "compile store", "tables", "builds pairs"))


def test_how_a_job_is_measured_is_the_job_but_not_its_compile(tmp_path):
    """measure.* is identity (resume measures again), but the compile is the same: the
    compile store loads it and a stopped attempt's tuning carries over; across sweeps the
    tables call it the same job, as they do its seeds."""
    base = readers(tmp_path, BASE)
    measured = readers(tmp_path, [*BASE, "measure.timed_steps=3"])
    assert not measured["resume"] and measured["estimate"] != base["estimate"]
    assert measured["builds pairs"] != base["builds pairs"]
    assert measured["earlier attempt"] and measured["compile store"] == base["compile store"]
    assert measured["tables"] == base["tables"]
    seeded = readers(tmp_path, [*BASE, "seed=1"])
    assert not seeded["resume"] and seeded["compile store"] != base["compile store"]
    assert seeded["tables"] == base["tables"]


def test_a_records_resolved_keys_are_not_its_identity():
    """A record's config also holds what the job resolved and applied (compile mode,
    leased benchmarks): the tables' key of such a record is its spec's."""
    config = composed(*BASE)
    recorded = {**config, "compile_mode": "max-autotune", "leased_benchmarks": ["x"], "inductor_applied": {}}
    assert job_key(recorded) == job_key(config)
    assert identity.identity(recorded) == identity.identity(config)
