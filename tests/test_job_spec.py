"""The job's spec (sweeper/job_spec.py): frozen, extended by replace, read back from job.json."""

import dataclasses
import json

import pytest

from sweeper.job_spec import GpuLeaseSpec, JobSpec


def test_a_spec_is_extended_by_replace_and_read_back_as_written():
    spec = JobSpec("3", ("model=resnet18", "autotune=on"), {"model": "resnet18", "autotune": True})
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.autotune_gpus = 2  # type: ignore[misc]
    lent = dataclasses.replace(spec, autotune_gpus=2, gpu_lease=GpuLeaseSpec("GPU-0", 2, (4, 5), (4, 5, 14)))
    assert spec.autotune_gpus is None and lent.autotune_gpus == 2  # the first spec is as it was
    written = json.loads(json.dumps(lent.to_json()))
    assert written == {"job_id": "3", "overrides": ["model=resnet18", "autotune=on"],
                       "config": {"model": "resnet18", "autotune": True}, "autotune_gpus": 2,
                       "gpu_lease": {"key": "GPU-0", "jobs_per_gpu": 2, "cpus_shared": [4, 5],
                                     "cpus_leased": [4, 5, 14], "pause_others": False}}  # unset fields left out
    assert JobSpec.from_json(written) == lent


def test_a_job_json_with_a_key_this_version_does_not_know_is_refused():
    with pytest.raises(ValueError, match=r"job.json: unknown key\(s\) seeds .*another sweeper version"):
        JobSpec.from_json({"job_id": "0", "config": {}, "seeds": {}})
