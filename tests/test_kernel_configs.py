"""Kernel configs shared through the autotune store: a Triton kernel's tuned config (its
`.best_config` file, written by Inductor when coordinate descent or its own autotuning
chose) goes from one job's cache to the store and into another job's cache, where
Inductor's own lookup (runtime/autotune_cache.py: AutotuneCache) finds it for a kernel of
the same source and launches with the very config the first job's tuning chose.

No GPU here, so no kernel can be tuned; what runs is real nonetheless: the kernel source is
one Inductor generated on an H200 (tests/fixtures/h200/triton_poi.py), its path in each
job's cache is Inductor's own (PyCodeCache.write), and the config file is written and read
by Inductor's AutotuneCache in two fresh processes with two private caches."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tasks import autotune_store as st

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "tests" / "fixtures" / "h200" / "triton_poi.py"

# In a job process: the kernel's file written where Inductor writes it, then its tuned config
# saved (as coordinate descent does) or looked up (as a kernel does at its first launch).
INDUCTOR = r"""
import json, sys
from pathlib import Path
from torch._inductor.codecache import PyCodeCache
from torch._inductor.runtime.autotune_cache import AutotuneCache
from torch._inductor.runtime.triton_compat import Config

action, source, configs_hash, coordesc = sys.argv[1], Path(sys.argv[2]).read_text(), sys.argv[3], sys.argv[4] == "on"
key, path = PyCodeCache.write(source)
meta = {"autotune_local_cache": True, "autotune_remote_cache": False, "coordinate_descent_tuning": coordesc}
candidates = [Config({"XBLOCK": 512}, num_warps=4, num_stages=1), Config({"XBLOCK": 1024}, num_warps=4, num_stages=1)]
cache = AutotuneCache.create(meta, path, configs_hash)
if action == "tune":  # the pick of coordinate descent: a block size outside the candidates
    cache.save(Config({"XBLOCK": 256}, num_warps=2, num_stages=1), time_taken_ns=5_000_000, found_by_coordesc=True)
    print(json.dumps({"path": path}))
else:
    best = cache.read_best(meta, candidates)
    print(json.dumps({"path": path, "best": None if best is None else
                      {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages,
                       "found_by_coordesc": getattr(best, "found_by_coordesc", False)}}))
"""


def inductor(cache: Path, action: str, configs_hash="hashA", coordesc="on") -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", INDUCTOR, action, str(KERNEL), configs_hash, coordesc],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_kernels_config_tuned_in_one_job_is_the_one_another_job_launches_with(tmp_path):
    first, second, store = tmp_path / "cache_a", tmp_path / "cache_b", tmp_path / "store"
    tuned = inductor(first, "tune")
    assert inductor(second, "look")["best"] is None  # cold: the second job would tune it again
    # the first job's entries, through the driver's store, into a later job
    counts = st.write_job_entries(tmp_path / "job_a", first, "2.14.1", system="sys")
    assert counts["job_kernel_configs"] == 1
    assert st.absorb(store, tmp_path / "job_a")["new_kernel_configs_in_store"] == 1
    seeded = st.seed_job(st.load(store, "2.14.1"), second, "2.14.1", system="sys")
    assert seeded["seeded_kernel_configs"] == 1
    got = inductor(second, "look")
    assert Path(got["path"]).relative_to(second) == Path(tuned["path"]).relative_to(first)  # the same kernel source
    assert got["best"] == {"XBLOCK": 256, "num_warps": 2, "num_stages": 1, "found_by_coordesc": True}


def test_a_config_is_reused_only_where_a_cold_job_could_have_picked_it(tmp_path):
    first, store = tmp_path / "cache_a", tmp_path / "store"
    inductor(first, "tune")
    st.write_job_entries(tmp_path / "job_a", first, "2.14.1", system="sys")
    st.absorb(store, tmp_path / "job_a")
    seed = st.load(store, "2.14.1")
    # another GPU model (another system hash): its kernels get none of this GPU's configs
    other_gpu = st.seed_job(seed, tmp_path / "cache_gpu", "2.14.1", system="another")
    assert other_gpu["seeded_kernel_configs"] == 0 and inductor(tmp_path / "cache_gpu", "look")["best"] is None
    # a job without coordinate descent: a config that coordinate descent found is not given
    plain = st.seed_job(seed, tmp_path / "cache_plain", "2.14.1", system="sys", coordinate_descent=False)
    assert plain["seeded_kernel_configs"] == 0
    # a kernel of another candidate list (other Inductor settings): Inductor itself refuses it
    st.seed_job(seed, tmp_path / "cache_c", "2.14.1", system="sys")
    assert inductor(tmp_path / "cache_c", "look", configs_hash="hashB")["best"] is None
    # another torch: nothing at all
    assert st.seed_job(seed, tmp_path / "cache_t", "2.15.0", system="sys")["seeded_kernel_configs"] == 0
