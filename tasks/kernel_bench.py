"""Standalone benchmarks of the job's selected Triton kernels (its kernel table:
tasks/kernel_table.py) in the job's own process (GPU).

The kernels are already compiled and loaded here, so nothing is started per kernel (by
hand, `python <kernel>.py` costs 12 to 14 s a kernel, mostly start-up). For each kernel:
- standalone time: the job's own kernel object (the config the job chose) run on the
  kernel file's get_args() inputs, timed by Inductor's benchmarker (warm-up, L2 cache
  flushed between runs, as Inductor's autotuner times);
- bytes moved: the kernel's kernel_num_gb; GB/s and the share of the peak bandwidth,
  measured once per job with a large device-to-device copy;
- registers, spills and shared memory of the chosen config;
- autotune headroom: the kernel file loaded afresh, every candidate config's launcher and
  the job's chosen one timed alone the same way, chosen against the best.
One kernel's inputs are held at a time. A kernel that fails is noted in its row.

The work is split in two, so that jobs sharing a GPU (tasks/gpu_lease.py) hold its lease
only while they time: prepare() loads each kernel file afresh and compiles the candidate
configs (CPU work: on the H200 mixnet_l's headroom pass took 13.0 s with it, 1.8 s of
timing without it), outside the lease; run() makes the inputs and times, holding it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from sweeper.analysis import kernels as mb
from sweeper.torch_internals.kernel_configs import config_key
from sweeper.torch_internals.probes import benchmark_gpu, raw_stream


def peak_bandwidth_gbps() -> float:
    """Device memory bandwidth from a 1 GiB device-to-device copy (bytes read plus written),
    measured for each job's microbenchmarks as the roofs measure it (tasks/roofs.py)."""
    from tasks.roofs import copy_gbps

    return copy_gbps("cuda")


def _load_fresh(path: str):
    """A new module object from the kernel file, bypassing PyCodeCache (the cached module is
    the job's own kernel, which after its first call keeps only the winning config) and the
    kernel's local autotune cache (the `.best_config` file the job's run left beside the
    kernel, which would cut the candidates down to the winner at decoration). The code is
    the job's own file, compiled in memory: nothing is written or run from elsewhere."""
    import types

    src = Path(path).read_text().replace("'autotune_local_cache': True", "'autotune_local_cache': False")
    mod = types.ModuleType(f"sweeper_fresh_{Path(path).stem}")
    mod.__file__ = path
    exec(compile(src, path, "exec"), mod.__dict__)  # noqa: S102 - the job's own generated kernel
    return mod


@dataclass
class Prepared:
    """One kernel ready to time: the job's kernel object and its file loaded afresh (see
    _load_fresh); `compiled` once the fresh load's candidate configs are compiled for the
    headroom pass."""

    name: str
    kernel: Any  # the job's kernel: Inductor's CachingAutotuner, untyped
    fresh: Any  # its file's module, loaded afresh
    compiled: bool = False

    def fresh_kernel(self):
        return getattr(self.fresh, self.name, None)


# What timing costs under Inductor's benchmarker (a few estimation runs, then at most 25 ms
# of runs: runtime/benchmarking.py), to plan the headroom pass's compiles within the budget
# before anything is timed. On the H200 (bench/results/packing/) a kernel alone, inputs
# made, took 6 to 15 ms; a headroom launcher 10 to 42 ms, 25 on average.
ALONE_S_ESTIMATE = 0.015
TIMING_S_ESTIMATE = 0.025


def prepare(table: dict, kernels_by_name: dict, budget_s: float | None = None,
            compile_configs: bool = True) -> dict[str, Prepared]:
    """The untimed half (no GPU timing; the caller need not hold the lease): every selected
    kernel's file loaded afresh, its candidate configs counted and the chosen one looked up
    among them; then, costliest first, the candidate configs of kernels with something to
    choose compiled, while the compiles so far plus the timings planned fit in `budget_s`.
    `compile_configs=False` stops before compiling (a CPU test: compiling needs the GPU).
    Rows that cannot be prepared say why; run() times the rest."""
    t0 = time.time()
    prepared: dict[str, Prepared] = {}
    for row in table["rows"]:
        kernel = kernels_by_name.get(row["name"])
        if kernel is None or not row.get("kernel_path") or not getattr(kernel, "launchers", None):
            row["error"] = "kernel object or file not found in the compiled modules"
            continue
        try:
            ready = Prepared(row["name"], kernel, _load_fresh(row["kernel_path"]))
        except Exception as e:  # noqa: BLE001 - one kernel's failure is noted, not fatal
            row["error"] = _error(e)
            continue
        prepared[row["name"]] = ready
        # The candidates as Inductor generated them (the fresh load ignores the job's
        # .best_config, which cuts a cache-hit kernel's list down to the winner).
        candidates = [config_key(c) for c in getattr(ready.fresh_kernel(), "configs", None) or []]
        row.update(candidate_configs=len(candidates) or None,
                   chosen_is_candidate=config_key(kernel.launchers[0].config) in candidates if candidates else None)
    planned_s = ALONE_S_ESTIMATE * len(prepared)  # the alone pass
    for row in table["rows"]:
        chosen = prepared.get(row["name"])
        if chosen is None or not compile_configs or not _wants_headroom(row):
            continue
        fresh_kernel = chosen.fresh_kernel()
        if fresh_kernel is None or not hasattr(fresh_kernel, "precompile"):
            row["headroom_method"] = "not measured: the kernel file does not define the kernel"
            continue
        timings_s = TIMING_S_ESTIMATE * ((row.get("candidate_configs") or 0) + 1)
        if budget_s is not None and time.time() - t0 + planned_s + timings_s > budget_s:
            continue  # run() says the budget did not reach it; a later kernel with fewer configs may fit
        try:
            if not fresh_kernel.launchers:  # decorated, not compiled yet: run() would do this lazily
                fresh_kernel.precompile()
            chosen.compiled = True
            planned_s += timings_s
        except Exception as e:  # noqa: BLE001
            row["headroom_method"] = f"not measured: {_error(e)}"
    table["prepare_s"] = round(time.time() - t0, 3)
    return prepared


def _wants_headroom(row: dict) -> bool:
    """Something to choose: more than one candidate config, or a chosen config outside them."""
    return not (row.get("candidate_configs") == 1 and row.get("chosen_is_candidate"))


def time_alone(row: dict, ready: Prepared, peak_gbps: float | None) -> dict:
    """Pass 1, every selected kernel: the job's kernel (the config the job chose) alone on
    its file's get_args() inputs, with its bytes, bandwidth, registers and spills."""
    args = ready.fresh.get_args()
    launcher = ready.kernel.launchers[0]
    stream = raw_stream(torch.cuda.current_device())
    ms = benchmark_gpu(lambda: ready.kernel.run(*args, stream=stream))
    row.update(
        standalone_ms=ms,
        profiled_ms_per_launch=row["step_ms"] / row["launches"] if row.get("launches") else None,
        **mb.bandwidth(ms, row.get("num_gb"), peak_gbps),
        config=str(launcher.config),
        regs=getattr(launcher, "n_regs", None),
        spills=getattr(launcher, "n_spills", None),
        shared_bytes=getattr(launcher, "shared", None),
    )
    del args
    return row


def headroom(row: dict, ready: Prepared) -> dict:
    """Pass 2, costliest first while the budget lasts: every candidate config of the kernel
    (the fresh load's launchers, compiled by prepare()) and the job's chosen one, each timed
    the same way on the same inputs: the launcher alone under Inductor's benchmarker. Not
    through the kernel's own benchmark_all_configs() (the first GPU run's method): its times
    disagreed with the same config timed alone (resnet18 b32: 0.062 against 0.029 ms), so
    that chosen configs read 50 to 85% behind another candidate. Its timed call also clones
    every mutated argument and zeroes buffers (CachingAutotuner.bench), a likely cause.
    Configs that spill more than Inductor's threshold are left out, as Inductor's autotuner
    leaves them out. Under max-autotune, coordinate descent may have chosen a config
    outside the candidates."""
    fresh_kernel = ready.fresh_kernel()
    args = ready.fresh.get_args()
    stream = raw_stream(torch.cuda.current_device())
    spill_limit = fresh_kernel.inductor_meta.get("spill_threshold", 16)

    def alone(launcher) -> float:
        return benchmark_gpu(lambda: launcher(*args, stream=stream))

    timings = {config_key(launcher.config): alone(launcher) for launcher in fresh_kernel.launchers
               if (getattr(launcher, "n_spills", 0) or 0) <= spill_limit}
    chosen_launcher = ready.kernel.launchers[0]
    chosen = alone(chosen_launcher)
    del args
    outside = config_key(chosen_launcher.config) not in timings
    best = min(timings.values()) if timings else None
    row.update(configs_tried=len(timings), chosen_config_ms=chosen, best_config_ms=best,
               headroom_pct=mb.headroom_pct(chosen, best))
    row["headroom_method"] = (
        f"chosen config (max-autotune's own, not among the candidates) against the best of {len(timings)} "
        f"candidate configs, each launcher timed alone" if outside
        else f"chosen against the best of {len(timings)} candidate configs, each launcher timed alone")
    return row


def run(table: dict, prepared: dict[str, Prepared], budget_s: float | None = None,
        prepare_s: float = 0.0) -> dict:
    """The timed half (holding the GPU's lease), on what prepare() readied, within what is
    left of `budget_s` seconds after its `prepare_s` (None: no limit): every kernel alone
    first (cheap), then the autotune headroom of the costliest kernels with more than one
    candidate config (each re-times all its configs) while time is left. Rows the budget
    did not reach say so."""
    t0 = time.time() - prepare_s
    t_prepared = time.time()
    peak = peak_bandwidth_gbps()
    t_peak = time.time()
    table.update(peak_bandwidth_gbps=peak, budget_s=budget_s, method=(
        "standalone: the job's kernel on its file's get_args(), Inductor's benchmarker (L2 flushed); "
        "bandwidth: kernel_num_gb over that time, against a device-to-device copy; headroom: the chosen "
        "config against the best candidate config, each launcher timed alone, costliest kernels first "
        "within the budget"))

    def over(next_s: float = 0.0) -> bool:
        return budget_s is not None and time.time() - t0 + next_s > budget_s

    not_reached = f"not measured: past the microbenchmark budget ({budget_s or 0:.0f} s)"
    todo = []
    for row in table["rows"]:
        ready = prepared.get(row["name"])
        if ready is None:
            continue  # prepare() noted why in the row
        if over():
            row["error"] = not_reached
            continue
        try:
            time_alone(row, ready, peak)
            todo.append((row, ready))
        except Exception as e:  # noqa: BLE001 - one kernel's failure is noted, not fatal
            row["error"] = _error(e)
    t_alone = time.time()
    spent, configs_timed = 0.0, 0  # what the headroom timings so far cost, to predict the next
    for row, ready in todo:
        if not _wants_headroom(row):
            row.update(configs_tried=1, headroom_pct=0.0, headroom_method="one candidate config: nothing to choose")
        elif "headroom_method" in row:
            continue  # prepare() could not compile its configs, and said why
        elif not ready.compiled or over(mb.headroom_estimate_s(spent, configs_timed, row.get("candidate_configs"))):
            # a later kernel with fewer configs may still fit
            row["headroom_method"] = not_reached
        else:
            started = time.time()
            try:
                headroom(row, ready)
            except Exception as e:  # noqa: BLE001
                row["headroom_method"] = f"not measured: {_error(e)}"
            spent += time.time() - started
            configs_timed += (row.get("configs_tried") or 0) + 1
    torch.cuda.empty_cache()
    table["seconds"] = round(time.time() - t0, 3)
    # where the phase's seconds went, to see which pass to make cheaper; `prepare` ran
    # without the GPU's lease, the others held it
    table["pass_s"] = {"prepare": round(prepare_s, 3), "peak_bandwidth": round(t_peak - t_prepared, 3),
                       "alone": round(t_alone - t_peak, 3), "headroom": round(time.time() - t_alone, 3)}
    return table


def _error(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


