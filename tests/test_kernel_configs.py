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

from sweeper.stores import autotune_store as st
from tasks import job_stores

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
    counts = job_stores.write_autotune_entries(tmp_path / "job_a", first, "2.14.1", system="sys")
    assert counts["job_kernel_configs"] == 1
    assert st.absorb(store, tmp_path / "job_a")["new_kernel_configs_in_store"] == 1
    seeded = job_stores.seed_autotune(st.load(store, "2.14.1"), second, "2.14.1", system="sys")
    assert seeded["seeded_kernel_configs"] == 1
    got = inductor(second, "look")
    assert Path(got["path"]).relative_to(second) == Path(tuned["path"]).relative_to(first)  # the same kernel source
    assert got["best"] == {"XBLOCK": 256, "num_warps": 2, "num_stages": 1, "found_by_coordesc": True}


def test_a_config_is_reused_only_where_a_cold_job_could_have_picked_it(tmp_path):
    first, store = tmp_path / "cache_a", tmp_path / "store"
    inductor(first, "tune")
    job_stores.write_autotune_entries(tmp_path / "job_a", first, "2.14.1", system="sys")
    st.absorb(store, tmp_path / "job_a")
    seed = st.load(store, "2.14.1")
    # another GPU model (another system hash): its kernels get none of this GPU's configs
    other_gpu = job_stores.seed_autotune(seed, tmp_path / "cache_gpu", "2.14.1", system="another")
    assert other_gpu["seeded_kernel_configs"] == 0 and inductor(tmp_path / "cache_gpu", "look")["best"] is None
    # a job without coordinate descent: a config that coordinate descent found is not given
    plain = job_stores.seed_autotune(seed, tmp_path / "cache_plain", "2.14.1", system="sys", coordinate_descent=False)
    assert plain["seeded_kernel_configs"] == 0
    # a kernel of another candidate list (other Inductor settings): Inductor itself refuses it
    job_stores.seed_autotune(seed, tmp_path / "cache_c", "2.14.1", system="sys")
    assert inductor(tmp_path / "cache_c", "look", configs_hash="hashB")["best"] is None
    # another torch: nothing at all
    assert job_stores.seed_autotune(seed, tmp_path / "cache_t", "2.15.0", system="sys")["seeded_kernel_configs"] == 0


# In a job process: the seeded config as a compile worker reads it and sends it to the job's
# main process (a pickle round trip), then the two places where Inductor tunes a kernel at
# its first launch, called on a stand-in for the kernel's CachingAutotuner (it needs a GPU).
REUSE = r"""
import json, pickle, sys, threading
from pathlib import Path
from torch._inductor.codecache import PyCodeCache
from torch._inductor.runtime.autotune_cache import AutotuneCache
from torch._inductor.runtime.triton_compat import Config
from torch._inductor.runtime.triton_heuristics import CachingAutotuner
from sweeper.torch_internals import kernel_configs
from sweeper.torch_internals.tuned_launch import keep_own_pick, reused_tuned_configs

reuse = reused_tuned_configs()  # entered where each script installs it, for the process's life
source = Path(sys.argv[1]).read_text()
meta = {"autotune_local_cache": True, "autotune_remote_cache": False, "coordinate_descent_tuning": True}
candidates = [Config({"XBLOCK": 512}, num_warps=4, num_stages=1), Config({"XBLOCK": 1024}, num_warps=4, num_stages=1)]

class Tuned(Exception):
    pass

class Launcher:
    def __init__(self, config):
        self.config = config

class Tuner:  # what of CachingAutotuner these paths use; `tuned` says Inductor went on to tune
    heuristic_type = None  # a pointwise kernel
    def __init__(self, path, configs):
        cache = pickle.loads(pickle.dumps(AutotuneCache.create(meta, path, "hashA")))  # built in the worker
        self.save_cache_hook, self.inductor_meta, self.lock = cache.save, meta, threading.Lock()
        self.launchers, self.compiled = [Launcher(c) for c in configs], []
    def _precompile_config(self, config):
        self.compiled.append(config.kwargs)
        return type("Result", (), {"make_launcher": lambda _: Launcher(config)})()
    def _ensure_kernel_loaded(self):  # a worker's kernel needs its function back before compiling
        self.compiled.append("loaded")
    def benchmark_all_configs(self, *args, **kwargs):
        raise Tuned("benchmark")
    class coordesc_tuner:
        def autotune(*args):
            raise Tuned("coordinate descent")

def tuned(call):
    try:
        call()
    except Tuned as e:
        return str(e)

key, path = PyCodeCache.write(source)
_, other = PyCodeCache.write(source + "\n# another kernel, nothing cached\n")
text = Path(AutotuneCache.create(meta, path, "hashA").local_cache[1]).read_text()
best = AutotuneCache.create(meta, path, "hashA").read_best(meta, candidates)
back = pickle.loads(pickle.dumps(best))  # the worker's compile result, in the main process
out = {"marked_in_worker": getattr(best, "found_by_coordesc", False),
       "marked_after_pickle": getattr(back, "found_by_coordesc", False),
       "installed": (counts := reuse.__enter__()).installed}
one = Tuner(path, [back])  # one launcher, the cached config (unmarked): coordinate descent would start
got = CachingAutotuner._coordinate_descent_tuning(one, one.launchers[0])
out["descent"] = {"same_launcher": got is one.launchers[0], "marked": got.config.found_by_coordesc,
                  "compiled": one.compiled}
many = Tuner(path, candidates)  # several launchers (max-autotune's, or RBLOCK's extra ones)
out["pick"] = {"tuned": tuned(lambda: CachingAutotuner.autotune_to_one_config(many)), "compiled": many.compiled,
               "launchers": [dict(l.config.kwargs, num_warps=l.config.num_warps) for l in many.launchers],
               "marked": many.launchers[0].config.found_by_coordesc}
cold = Tuner(other, candidates)
out["uncached"] = {"pick": tuned(lambda: CachingAutotuner.autotune_to_one_config(cold)),
                   "descent": tuned(lambda: CachingAutotuner._coordinate_descent_tuning(cold, cold.launchers[0]))}
# a kernel loaded from an earlier run's compile: its cache object points at that run's cache
moved = Tuner("/nonexistent/earlier_run/inductor/" + "/".join(Path(path).parts[-2:]), candidates)
out["moved"] = {"tuned": tuned(lambda: CachingAutotuner.autotune_to_one_config(moved)),
                "launchers": [dict(l.config.kwargs) for l in moved.launchers]}
# the cached config does not build here (say, out of resources): Inductor tunes as it would
broken = Tuner(path, candidates)
broken._precompile_config = lambda config: (_ for _ in ()).throw(RuntimeError("out of resource"))
out["broken"] = tuned(lambda: CachingAutotuner.autotune_to_one_config(broken))
out["file_unchanged"] = Path(AutotuneCache.create(meta, path, "hashA").local_cache[1]).read_text() == text
out["reused"] = counts.reused
from tasks.phases_compile import heartbeat_line
out["heartbeat"] = heartbeat_line("compile", 10.0, {"seeded_ops": 2, "seeded_kernel_configs": 1}, counts)
reuse.__exit__(None, None, None)  # put back: Inductor's own methods again
out["restored"] = CachingAutotuner.autotune_to_one_config.__module__ == "torch._inductor.runtime.triton_heuristics"
print(json.dumps(out))
"""


def test_a_seeded_config_is_launched_as_it_is_not_tuned_again(tmp_path):
    """On torch 2.11 and 2.14 a config's `found_by_coordesc` mark does not survive the
    compile worker's pickle back to the job (triton.Config.__setstate__), so Inductor would
    tune a seeded kernel again, from the seeded config; an H200 mixnet_l job did so for 215
    of its 274 seeded kernels. sweeper/torch_internals/tuned_launch.reused_tuned_configs looks in the
    kernel's cache first."""
    first, second, store = tmp_path / "cache_a", tmp_path / "cache_b", tmp_path / "store"
    inductor(first, "tune")
    job_stores.write_autotune_entries(tmp_path / "job_a", first, "2.14.1", system="sys")
    st.absorb(store, tmp_path / "job_a")
    assert job_stores.seed_autotune(st.load(store, "2.14.1"), second, "2.14.1", system="sys")["seeded_kernel_configs"] == 1
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(second), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", REUSE, str(KERNEL)], env=env, capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["marked_in_worker"] and not got["marked_after_pickle"]  # what makes Inductor tune it again
    assert got["installed"]
    # one launcher with the cached config: kept, marked, nothing compiled or benchmarked
    assert got["descent"] == {"same_launcher": True, "marked": True, "compiled": []}
    # several launchers, none of them the cached config (coordinate descent found one outside
    # the candidates): it is compiled once and is the one launcher, with no benchmark
    assert got["pick"] == {"tuned": None, "compiled": ["loaded", {"XBLOCK": 256}],
                           "launchers": [{"XBLOCK": 256, "num_warps": 2}], "marked": True}
    # a kernel with nothing cached is tuned as Inductor tunes it
    assert got["uncached"] == {"pick": "benchmark", "descent": "coordinate descent"}
    # a kernel whose cache object points at an earlier run's cache (a loaded compile) finds
    # the file in this job's cache, at the same place
    assert got["moved"] == {"tuned": None, "launchers": [{"XBLOCK": 256}]}
    assert got["broken"] == "benchmark"
    assert got["file_unchanged"] and got["reused"] == 3 and got["restored"]
    # the heartbeat counts these launches, not Inductor's cache hits (which a cold kernel's
    # own fresh file also gives when coordinate descent reloads it)
    assert got["heartbeat"] == ("still compiling: 10 s (from the store: 2 ops, 1 kernel configs; "
                                "3 kernels launched with them so far, not tuned again)")


# In a job process: the kernel of the seeded config, compiled again under another name (its
# number in the graph moved, as Inductor numbers kernels in the order it generates them),
# and a kernel of other code under that name; each at its first launch.
RENAMED = REUSE.split("key, path = PyCodeCache.write(source)")[0] + r"""
name = sys.argv[2]
counts = reuse.__enter__()
_, renamed = PyCodeCache.write(source.replace(name, name[:-1] + "7"))
_, changed = PyCodeCache.write(source.replace(name, name[:-1] + "8").replace("xnumel = 802816", "xnumel = 802817"))
other = Tuner(changed, candidates)
other.filename = changed
one = Tuner(renamed, candidates)
one.filename = renamed  # as CachingAutotuner keeps its kernel's file
out = {"tuned": tuned(lambda: CachingAutotuner.autotune_to_one_config(one)),
       "launchers": [dict(l.config.kwargs, num_warps=l.config.num_warps) for l in one.launchers],
       "own_file": Path(AutotuneCache.create(meta, renamed, "hashA").local_cache[1]).exists(),
       "other_code": tuned(lambda: CachingAutotuner.autotune_to_one_config(other)),
       "reused": counts.reused, "renamed": counts.renamed}
print(json.dumps(out))
"""


def test_a_renamed_kernel_of_the_same_code_finds_its_config(tmp_path):
    """Inductor names a kernel's file by its source, the kernel's name included, and the
    name ends in the kernel's number in its graph: an H200 mixnet_l max-autotune job had its
    forward kernels from number 82 on renamed against the run before, and so tuned 140
    kernels again whose config the store had. The store keeps each config's kernel code
    without the name, and a renamed kernel of the same code launches with it."""
    import re

    from sweeper.torch_internals import kernel_configs

    first, second, store = tmp_path / "cache_a", tmp_path / "cache_b", tmp_path / "store"
    inductor(first, "tune")
    job_stores.write_autotune_entries(tmp_path / "job_a", first, "2.14.1", system="sys")
    st.absorb(store, tmp_path / "job_a")
    doc = st.load(store, "2.14.1").systems["sys"]
    (rel, code), = doc["kernel_code"].items()
    assert rel in doc["kernel_configs"] and code == kernel_configs.kernel_code_key(KERNEL.read_text())
    seeded = job_stores.seed_autotune(st.load(store, "2.14.1"), second, "2.14.1", system="sys")
    assert (seeded["seeded_kernel_configs"], seeded["seeded_kernel_codes"]) == (1, 1)
    name = re.search(r"^def (triton_\w+)\(", KERNEL.read_text(), re.M).group(1)
    assert name.endswith("6")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(second), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", RENAMED, str(KERNEL), name], env=env, capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # the renamed kernel: the seeded config, compiled once, not benchmarked; now its own file
    assert got["tuned"] is None and got["launchers"] == [{"XBLOCK": 256, "num_warps": 2}]
    assert got["own_file"] and got["reused"] == 1 and got["renamed"] == 1
    # other code under a new name: tuned as Inductor tunes it
    assert got["other_code"] == "benchmark"
    # the renamed kernel's config is among the job's entries under its own name, for the store
    assert len(job_stores.autotune_documents(second, "sys")["sys"]["kernel_configs"]) == 2


# In a job process of a default (autotune off) job: a kernel loaded from the compile store,
# whose cache object points at the cold run's cache (gone), with the config that run's
# benchmarking picked put in this job's cache at the same place (as the compile store puts
# it); then the same with a config of another candidate list, and with none.
PICKED = REUSE.split("key, path = PyCodeCache.write(source)")[0].replace(
    '"coordinate_descent_tuning": True', '"coordinate_descent_tuning": False') + r"""
key, path = PyCodeCache.write(source)
AutotuneCache.create(meta, path, "hashA").save(candidates[1], time_taken_ns=3_000_000)  # the cold run's pick
_, other = PyCodeCache.write(source + "\n# another kernel\n")
AutotuneCache.create(meta, other, "hashB").save(candidates[1], time_taken_ns=3_000_000)  # another candidate list
counts = reuse.__enter__()
def loaded(p):  # a kernel of a loaded compile: its cache path is the cold run's
    return Tuner("/nonexistent/cold_run/inductor/" + "/".join(Path(p).parts[-2:]), candidates)
moved, foreign = loaded(path), loaded(other)
here = Tuner(path, candidates)  # the file beside the kernel itself: Inductor's own read, not the hook's
out = {"moved": tuned(lambda: CachingAutotuner.autotune_to_one_config(moved)),
       "launchers": [dict(l.config.kwargs, num_warps=l.config.num_warps) for l in moved.launchers],
       "foreign": tuned(lambda: CachingAutotuner.autotune_to_one_config(foreign)),
       "own_path": tuned(lambda: CachingAutotuner.autotune_to_one_config(here)),
       "dead_path_written": Path("/nonexistent/cold_run").exists(),
       "reused": counts.reused}
# A kernel Inductor keeps no pick for (one config at its decoration, more launchers by its
# first launch: a reduction whose registers spill): benchmarked, its pick kept beside it
# as Inductor keeps one, then taken by a later run's copy of the kernel.
class Plain(Tuner):
    def __init__(self, path, configs):
        super().__init__(path, configs)
        self.save_cache_hook, self.filename = None, path
_, spills = PyCodeCache.write(source + "\n# a reduction whose registers spill\n")
first = Plain(spills, candidates)
out["plain_cold"] = tuned(lambda: CachingAutotuner.autotune_to_one_config(first))
tried = list(first.launchers)
first.launchers = [tried[1]]  # what Inductor's benchmarking picked
keep_own_pick(first, tried)
kept = {rel: json.loads(text) for rel, text in kernel_configs.tuned_configs(Path(spills).parent.parent).items()}
out["plain_kept"] = [dict(XBLOCK=d["XBLOCK"], num_warps=d["num_warps"]) for d in kept.values()
                     if d["configs_hash"] not in ("hashA", "hashB")]
later = Plain("/nonexistent/cold_run/inductor/" + "/".join(Path(spills).parts[-2:]), candidates)
out["plain_warm"] = tuned(lambda: CachingAutotuner.autotune_to_one_config(later))
out["plain_launchers"] = [dict(l.config.kwargs, num_warps=l.config.num_warps) for l in later.launchers]
out["reused_after"] = counts.reused
out["benchmarks"] = {"not_reused": dict(counts.not_reused), "kernels": counts.kernels}
print(json.dumps(out))
"""


def test_a_default_jobs_loaded_kernel_launches_with_the_config_its_cold_run_picked(tmp_path):
    """On an H200 a warm default mixnet_l job (its compile from the compile store) benchmarked
    all 883 configs of its kernels again: they point at the cold run's cache, gone, where
    Inductor looks for the pick. The hook reads this job's copy at the same place."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", PICKED, str(KERNEL)], env=env, capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["moved"] is None and got["launchers"] == [{"XBLOCK": 1024, "num_warps": 4}]  # no benchmark
    assert got["foreign"] == "benchmark"  # another candidate list: Inductor picks as it would
    assert got["own_path"] == "benchmark"  # not the hook's case (Inductor's own read cuts the list at decoration)
    assert got["reused"] == 1 and not got["dead_path_written"]
    # a kernel Inductor keeps no pick for: benchmarked once, its pick kept, then taken
    assert got["plain_cold"] == "benchmark" and got["plain_kept"] == [{"XBLOCK": 1024, "num_warps": 4}]
    assert got["plain_warm"] is None and got["plain_launchers"] == [{"XBLOCK": 1024, "num_warps": 4}]
    assert got["reused_after"] == 2
    # the three that benchmarked, and why each did, for the record (compile_benchmarks)
    assert got["benchmarks"]["not_reused"] == {"a pick for another candidate list": 1,
                                               "a pick at the kernel's own path, not taken by Inductor's read": 1,
                                               "no pick in this job's cache": 1}
    assert len(got["benchmarks"]["kernels"]) == 3
