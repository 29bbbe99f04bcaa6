import json
import os

import pytest

from sweeper.record import SCHEMA_VERSION, RecordError, atomic_write_text, read_record, write_record


def minimal(status="ok", reason=None):
    return {"schema_version": SCHEMA_VERSION, "status": status, "reason": reason,
            "job": {"id": "0"}, "config": {"model": "resnet18"}}


def test_round_trip(tmp_path):
    write_record(tmp_path, minimal())
    assert read_record(tmp_path)["status"] == "ok"
    assert read_record(tmp_path / "result.json")["config"]["model"] == "resnet18"
    assert oct(os.stat(tmp_path / "result.json").st_mode & 0o777) == "0o644"


def test_truncated_record_names_path_and_fix(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps(minimal())[:40])
    with pytest.raises(RecordError, match="corrupt or truncated.*re-run"):
        read_record(tmp_path)


def test_a_record_saved_compressed_reads_and_a_cut_one_is_named(tmp_path):
    import gzip

    saved = tmp_path / "denA.result.json.gz"
    saved.write_bytes(gzip.compress(json.dumps(minimal()).encode()))
    assert read_record(saved)["config"]["model"] == "resnet18"
    saved.write_bytes(gzip.compress(json.dumps(minimal()).encode())[:30])
    with pytest.raises(RecordError, match="denA.result.json.gz: corrupt or truncated.*re-run"):
        read_record(saved)


def test_missing_record_and_wrong_schema(tmp_path):
    with pytest.raises(RecordError, match="did not finish"):
        read_record(tmp_path)
    rec = minimal()
    rec["schema_version"] = 99
    (tmp_path / "result.json").write_text(json.dumps(rec))
    with pytest.raises(RecordError, match="schema_version 99"):
        read_record(tmp_path)


def test_failed_or_skipped_needs_a_reason(tmp_path):
    with pytest.raises(RecordError, match="reason"):
        write_record(tmp_path, minimal("failed"))
    write_record(tmp_path, minimal("skipped", "cudagraphs=on needs a CUDA device"))
    assert read_record(tmp_path)["reason"].startswith("cudagraphs")


def test_atomic_write_leaves_old_file_when_interrupted(tmp_path):
    target = tmp_path / "f.json"
    atomic_write_text(target, "old")

    class Boom:
        def __str__(self):
            raise KeyboardInterrupt

    with pytest.raises(TypeError):
        atomic_write_text(target, Boom())  # write() refuses a non-str: nothing replaced
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_a_version_2_record_reads_with_what_the_job_resolved_apart(tmp_path):
    """Version 2 wrote what the job decided over its config: the keys only the job sets
    move to `resolved`, the config keys it resolved are copied there, and ran_config()
    reads as before."""
    from sweeper.record import ran_config

    config = {"model": "resnet18", "device": "cuda", "batch_size": 32, "image_size": 224, "amp_dtype": "float16",
              "autotune": True, "compile_mode": "max-autotune-no-cudagraphs", "inductor_options": {"max_autotune": True},
              "optimizer_step_compiled": False, "autotune_gpus": 1, "autotune_gpus_given": 1}
    v2 = {**minimal(), "schema_version": 2, "config": dict(config)}
    (tmp_path / "result.json").write_text(json.dumps(v2))
    rec = read_record(tmp_path)
    assert rec["schema_version"] == SCHEMA_VERSION and rec["upgraded_from_schema"] == 2
    assert rec["config"] == {k: config[k] for k in ("model", "device", "batch_size", "image_size", "amp_dtype",
                                                     "autotune")}
    assert rec["resolved"]["compile_mode"] == "max-autotune-no-cudagraphs" and rec["resolved"]["batch_size"] == 32
    assert ran_config(rec) == config


def test_resolved_keys_that_are_config_keys_are_the_ones_kept_in_an_upgraded_config():
    """ASKED_TOO (what an upgrade leaves in config) is exactly the resolved keys that the
    job's config declares too: a new resolved key that is a config key must be listed."""
    import dataclasses

    from sweeper.record_schema import ASKED_TOO, RESOLVED_KEYS
    from sweeper.sweep.config import JobConfig

    declared = {f.name for f in dataclasses.fields(JobConfig)}
    assert set(ASKED_TOO) == set(RESOLVED_KEYS) & declared


def test_the_config_as_asked_and_what_ran_stay_apart():
    from sweeper.record import ran_config

    asked = {"model": "resnet18", "device": "auto", "batch_size": None}
    rec = {**minimal(), "config": asked, "resolved": {"device": "cpu", "batch_size": 64, "compile_mode": "default"}}
    assert ran_config(rec) == {"model": "resnet18", "device": "cpu", "batch_size": 64, "compile_mode": "default"}
    assert rec["config"] == {"model": "resnet18", "device": "auto", "batch_size": None}  # not changed by reading
    assert ran_config({**minimal(), "config": asked}) == asked  # a job that never set up: what was asked
