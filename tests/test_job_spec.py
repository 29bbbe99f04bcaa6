"""The job's spec (sweeper/job_spec.py): frozen, built in one place, read back from job.json."""

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


def test_the_spec_a_job_goes_out_with_is_built_in_one_place_and_its_seeds_read_back_without_bytes(tmp_path):
    """launch_spec: what the job is, what the driver decided for it, the stores' entries
    and the spare GPUs, in one spec; job.json holds the seeds as frozen values, the stored
    compile without its bytes (they go beside it: compile_store.place_seed)."""
    from omegaconf import OmegaConf

    from sweeper.job_spec import AutotuneSeed, StoredCompile
    from sweeper.sweep.control import Job, job_spec, launch_spec

    cfg = OmegaConf.create({"model": "resnet18", "autotune": True})
    job = Job(3, ["model=resnet18"], cfg, tmp_path / "3", job_spec(3, ["model=resnet18"], cfg))
    job.python_executable, job.earlier_attempts = "/envs/nightly/bin/python", [{"status": "failed", "job_ops": 1}]
    autotune = AutotuneSeed("/store/torch-2.11.0", "2.11.0", {"sys": {"cache": {"op": {}}}}, ("a.json set aside",))
    compiled = StoredCompile(store="/store/torch-2.11.0", torch="2.11.0", meta={"torch": "2.11.0"}, data=b"\x00blob")
    spec = launch_spec(job, autotune, compiled, autotune_gpus=3)
    assert (spec.job_id, spec.overrides, spec.config) == ("3", ("model=resnet18",), {"model": "resnet18", "autotune": True})
    assert spec.python_executable == job.python_executable and spec.earlier_attempts == job.earlier_attempts
    assert spec.autotune_seed is autotune and spec.compile_seed is compiled and spec.autotune_gpus == 3
    assert job.spec.compile_seed is None and launch_spec(job).compile_seed is None  # the job's own spec is as it was
    written = json.loads(json.dumps(spec.to_json()))
    assert written["autotune_seed"] == {"store": "/store/torch-2.11.0", "torch": "2.11.0",
                                        "systems": {"sys": {"cache": {"op": {}}}}, "notes": ["a.json set aside"]}
    assert "data" not in written["compile_seed"] and written["compile_seed"]["meta"] == {"torch": "2.11.0"}
    back = JobSpec.from_json(written)
    assert back.autotune_seed == autotune and back.compile_seed == dataclasses.replace(compiled, data=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        compiled.data = None  # type: ignore[misc]
