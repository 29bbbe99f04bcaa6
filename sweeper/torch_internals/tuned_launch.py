"""Kernels launched with the config an earlier run tuned, not tuned again: a patch of
Inductor's CachingAutotuner at the two places it tunes a kernel at its first launch,
installed by a context manager that restores them on exit and counts what it did."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from sweeper.torch_internals.compile_cache import in_this_cache
from sweeper.torch_internals.kernel_configs import config_key, renamed_config


@dataclass
class TunedLaunch:
    """What reused_tuned_configs() did while installed: kernels given their cached config
    (`reused`; of them, found under another name: `renamed`), and those that benchmarked
    their configs at their first launch, by why no earlier pick was taken (`not_reused`),
    with the first few of their names (`kernels`). `installed`: False where this torch lacks
    the places it hooks (or has no Triton)."""

    installed: bool = False
    reused: int = 0
    renamed: int = 0
    not_reused: Counter = field(default_factory=Counter)
    kernels: list[str] = field(default_factory=list)


@contextmanager
def reused_tuned_configs() -> Iterator[TunedLaunch]:
    """While inside: a kernel whose coordinate-descent config is already in its local
    autotune cache (a seeded one, from the store or a loaded compile) uses it, not tuned
    again; the patched methods are put back on exit.

    Inductor means to: the cache read marks the config `found_by_coordesc`
    (autotune_cache.py: _load_cached_autotuning), and a marked config is not tuned. But the
    mark is lost on the way back from a compile worker (triton.Config.__setstate__ keeps
    only its own fields; pytorch/pytorch#172819 and #181292), and a reduction's extra RBLOCK
    launchers (_dynamic_scale_rblock) send it through benchmarking again, which rewrites the
    cache file unmarked. On torch 2.11 an H200 mixnet_l job seeded with 274 configs re-ran
    coordinate descent on 215 of them (bench/results/headline/sitting2_configs_retuned.md;
    bench/coordesc_reuse.py checks the hook on one small graph; tests/test_kernel_configs.py).
    So the two places where Inductor tunes a kernel at its first launch look in that cache
    first; what they find there is what cold tuning of this very kernel source chose. A
    kernel without coordinate descent (autotune off) loaded from the compile store takes the
    config its cold run's benchmarking picked the same way (picked_launcher)."""
    counts = TunedLaunch()
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:  # a torch built without Triton: nothing is tuned at launch
        yield counts
        return
    names = ("autotune_to_one_config", "_coordinate_descent_tuning")
    if not all(hasattr(CachingAutotuner, name) for name in names):
        yield counts
        return
    originals = {name: CachingAutotuner.__dict__[name] for name in names}
    pick_one, descend = originals["autotune_to_one_config"], originals["_coordinate_descent_tuning"]

    def autotune_to_one_config(self, *args, **kwargs):
        launcher = cached_launcher(self, self.launchers, counts)
        if launcher is None:
            launcher, why = _picked_launcher(self, self.launchers, counts)
            if launcher is None:
                _note_not_reused(self, why, counts)
                candidates = list(self.launchers)
                picked = pick_one(self, *args, **kwargs)
                keep_own_pick(self, candidates)
                return picked
        self.launchers = [launcher]
        self.autotune_time_taken_ns = getattr(self, "precompile_time_taken_ns", 0)

    def _coordinate_descent_tuning(self, launcher, *args, **kwargs):
        return cached_launcher(self, [launcher], counts) or descend(self, launcher, *args, **kwargs)

    setattr(CachingAutotuner, "autotune_to_one_config", autotune_to_one_config)
    setattr(CachingAutotuner, "_coordinate_descent_tuning", _coordinate_descent_tuning)
    counts.installed = True
    try:
        yield counts
    finally:
        for name, original in originals.items():
            setattr(CachingAutotuner, name, original)


def cached_coordesc_config(tuner, counts: TunedLaunch):
    """The coordinate-descent config in a kernel's local autotune cache file (the one its
    cache read would give, marked `found_by_coordesc`), or None: no file, another config
    list (configs_hash), a config picked only by benchmarking, or coordinate descent off.
    The file is looked for in this process's Inductor cache too: a kernel that Inductor
    loaded from a cached compile (TritonBundler's static autotuners) still points at the
    cache of the run that compiled it. Failing both, a seeded config of the same kernel
    code under another name (renamed_config) is written as this kernel's file and used."""
    import json

    cache = getattr(getattr(tuner, "save_cache_hook", None), "__self__", None)
    local = getattr(cache, "local_cache", None)
    if cache is None or not local or not tuner.inductor_meta.get("coordinate_descent_tuning"):
        return None
    path = Path(local[1])
    if not path.exists():  # a kernel from an earlier run's compile (the compile store) keeps that run's
        path = in_this_cache(path)  # cache path; the file is here, at the same place
    renamed = None  # the kernel file whose code found a seeded config under another name
    if not path.exists():  # perhaps the same code under another name: a seeded config by its code key
        filename = getattr(tuner, "filename", None)
        candidates = [Path(filename), in_this_cache(Path(filename))] if filename else []
        renamed = next((f for f in candidates if f.exists()), None)
        text = renamed_config(renamed) if renamed else None
    else:
        try:
            text = path.read_text()
        except OSError:
            return None
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    if text is None or not isinstance(data, dict) or not data.get("found_by_coordesc"):
        return None
    from torch._inductor.runtime.autotune_cache import _load_cached_autotuning

    config = _load_cached_autotuning(dict(data), cache.configs_hash, [], tuner.inductor_meta)
    if not getattr(config, "found_by_coordesc", False):
        return None
    if renamed is not None:  # its own file now: the job's entries, and a later launch, find it by name
        (renamed.parent / Path(local[1]).name).write_text(text)
        counts.renamed += 1
    return config


def cached_launcher(tuner, launchers: list, counts: TunedLaunch):
    """A launcher for the kernel's cached coordinate-descent config, marked so that Inductor
    does not tune it: one of `launchers` if it has that config, else compiled as coordinate
    descent compiles a config it tries; None when nothing is cached."""
    config = cached_coordesc_config(tuner, counts)
    if config is None:
        return None
    key = config_key(config)
    launcher = next((one for one in launchers if config_key(one.config) == key), None)
    if launcher is None:
        try:
            if hasattr(tuner, "_ensure_kernel_loaded"):  # compiled in a worker: its fn was dropped (torch 2.14)
                tuner._ensure_kernel_loaded()
            elif tuner.fn.fn is None:  # the same, torch 2.11
                tuner.fn = tuner._reload_kernel().fn
            with tuner.lock:
                launcher = tuner._precompile_config(config).make_launcher()
        except Exception:  # noqa: BLE001 - a config that will not build here: Inductor tunes as it would
            return None
    launcher.config.found_by_coordesc = True
    counts.reused += 1
    return launcher


def _note_not_reused(tuner, why: str, counts: TunedLaunch) -> None:
    counts.not_reused[why] += 1
    if len(counts.kernels) < 10:
        meta = getattr(tuner, "inductor_meta", None) or {}
        counts.kernels.append(str(meta.get("kernel_name") or Path(getattr(tuner, "filename", "") or "?").stem))


def picked_launcher(tuner, launchers: list, counts: TunedLaunch):
    """For a kernel without coordinate descent (autotune off): the launcher of the config its
    own benchmarking picked in the run that compiled it, where Inductor does not look. A
    kernel loaded from the compile store keeps that run's cache path, gone with its scratch
    folder, so Inductor benchmarked every config again (on an H200, 883 benchmarks in a warm
    mixnet_l job, 74 s beside other jobs) and wrote its pick back there, into the dead folder,
    where only a later run found it. The file the compile store put in this job's cache, at
    the same place, is read instead; a config that is not among `launchers`, or a file of
    another candidate list (configs_hash), is not taken. A kernel Inductor keeps no pick for
    has the one the job kept for it (keep_own_pick) read the same way, at its own path too.
    None: Inductor picks as it would."""
    return _picked_launcher(tuner, launchers, counts)[0]


def _picked_launcher(tuner, launchers: list, counts: TunedLaunch) -> tuple[object | None, str]:
    """picked_launcher's launcher, and when there is none, why (compile_benchmarks)."""
    import json

    if tuner.inductor_meta.get("coordinate_descent_tuning"):
        return None, "coordinate descent on, no config of its in the cache"
    if len(launchers) < 2:
        return None, "one launcher"
    cache = getattr(getattr(tuner, "save_cache_hook", None), "__self__", None)
    own = not getattr(cache, "local_cache", None)  # a kernel Inductor keeps no pick for: ours
    if own:
        cache = _own_pick_cache(tuner, launchers)
    local = getattr(cache, "local_cache", None)
    if cache is None or not local:
        return None, "no local autotune cache for the kernel"
    path = Path(local[1])
    if path.exists() and not own:  # at the kernel's own path: Inductor's own read finds it
        return None, "a pick at the kernel's own path, not taken by Inductor's read"
    try:
        data = json.loads((path if own and path.exists() else in_this_cache(path)).read_text())
    except OSError:
        return None, "no pick in this job's cache"
    except ValueError:
        return None, "an unreadable pick in this job's cache"
    if not isinstance(data, dict) or data.get("configs_hash") != cache.configs_hash:
        return None, "a pick for another candidate list"
    # matched as Inductor's own cache read matches a picked config (autotune_cache.py:
    # _load_cached_autotuning): its block sizes, warps and stages, one launcher exactly
    matching = [one for one in launchers
                if all(value == data.get(key) for key, value in one.config.kwargs.items())
                and one.config.num_warps == data.get("num_warps") and one.config.num_stages == data.get("num_stages")]
    if len(matching) != 1:
        return None, f"a pick matching {len(matching)} of the {len(launchers)} launchers"
    counts.reused += 1
    return matching[0], ""


def _own_pick_cache(tuner, launchers: list):
    """The local autotune cache Inductor would keep for a kernel it keeps none for, under the
    hash of `launchers`' configs; None where it cannot be made. Inductor makes one only for a
    kernel of several configs at its decoration (triton_heuristics.check_autotune_cache), but
    a reduction of one config whose registers spill gets launchers of smaller RBLOCK at its
    first launch (_dynamic_scale_rblock) and benchmarks them, in every run, its pick kept
    nowhere: 17 kernels of an H200 densenet121 training job on torch 2.11, 34 benchmarks
    that a warm job of a packed night waited 66 s of GPU lease for
    (bench/results/compile_store/warm_default_rblock.md)."""
    filename = getattr(tuner, "filename", None)
    if not filename:
        return None
    try:
        from torch._inductor.runtime.autotune_cache import AutotuneCache
        from torch._inductor.runtime.triton_heuristics import hash_configs

        return AutotuneCache.create({"autotune_local_cache": True, "autotune_remote_cache": False}, filename,
                                    hash_configs([one.config for one in launchers]))
    except Exception:  # noqa: BLE001 - another torch's internals: Inductor benchmarks as it would
        return None


def keep_own_pick(tuner, candidates: list) -> None:
    """After Inductor benchmarked `candidates` of a kernel it keeps no pick for: its pick,
    written as Inductor writes one (AutotuneCache.save, beside the kernel's file), so that the
    compile store carries it (tuned_configs) and a later run's _picked_launcher takes it."""
    has_own = getattr(getattr(getattr(tuner, "save_cache_hook", None), "__self__", None), "local_cache", None)
    if has_own or len(candidates) < 2 or len(tuner.launchers) != 1 \
            or tuner.inductor_meta.get("coordinate_descent_tuning"):
        return
    cache = _own_pick_cache(tuner, candidates)
    if cache is None or not cache.local_cache:
        return
    try:
        cache.save(tuner.launchers[0].config, int(getattr(tuner, "autotune_time_taken_ns", 0) or 0))
    except Exception:  # noqa: BLE001 - a pick not kept costs a later run its benchmarks, never this job
        pass
