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
