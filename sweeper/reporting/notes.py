"""The report's notes: the jobs whose figures a reader should take with care, named, with
why (pure: the jobs table in, sentences out)."""

from __future__ import annotations

from sweeper.words import count


def _note_naming(jobs, column: str, threshold: float, describe, text: str) -> list[str]:
    """[text with {named}: '#1 (...), #4 (...)', the jobs whose `column` reaches
    `threshold`, each with describe(its row)], or [] when there are none (or no column)."""
    if column not in jobs:
        return []
    hit = jobs[jobs[column].fillna(0) >= threshold]
    if hit.empty:
        return []
    # the job number from its own column: a row of an all-number frame holds it as a float
    named = ", ".join(f"#{job} ({describe(row)})" for job, (_, row) in zip(hit["job"][:NAMED], hit.head(NAMED).iterrows()))
    if len(hit) > NAMED:  # a large sweep's note names the first few, and says how many more
        named += f" and {len(hit) - NAMED} more (the jobs table's `{column}` column)"
    return [text.format(named=named)]


NAMED = 10  # jobs a note names


# Other work on this many cores while a job measured is worth a warning: on two H200s a
# launch-bound module read 1.5x slower in a job that measured beside another's compile.
BUSY_HOST_CORES = 1.0


def busy_host_notes(jobs) -> list[str]:
    """A note naming the jobs whose timings ran while other work kept the host busy."""
    return _note_naming(
        jobs, "host_busy_cores", BUSY_HOST_CORES, lambda r: f"{r['host_busy_cores']:.1f} cores",
        "other work kept the host's CPUs busy while these jobs measured: {named}. Their "
        "launch-bound figures (step and module times of small kernels, busy percentages) "
        "can read slower than on an idle host; the 'other cores busy' column gives each job's figure")


# Timed rounds whose interquartile range is this share of their median or more: the
# busy percentages built on them move by as much between runs (densenet121 on the H200
# on one machine: 17-29%, and two jobs' busy figures 6 points apart). Small-batch launch-bound
# jobs often reach 10% on that machine; 15% flags the ones that moved most.
UNSTEADY_TIMING_PCT = 15.0


def unsteady_timing_notes(jobs) -> list[str]:
    """A note naming the jobs whose timed rounds varied, whatever the cause."""
    return _note_naming(
        jobs, "timing_iqr_pct", UNSTEADY_TIMING_PCT, lambda r: f"IQR {r['timing_iqr_pct']:.0f}% of the median",
        "the timed rounds of these jobs varied: {named}. Their step times and busy percentages "
        "can differ by as much in a repeat; the host's launch speed can drift with no other work "
        "running (docs/findings.md, 'The host\'s launch speed'). Compare such figures only within one run, or repeat the job")


# A job whose launch probe read this far from the sweep's median measured on a host at
# another launch speed: on the H200 the probe read about 10.2 us a launch with
# stretches at about 7.4, and resnet18's modules ran about 30% faster in those.
LAUNCH_OFF_PCT = 15.0


def launch_speed_notes(jobs) -> list[str]:
    """A note naming the jobs whose host launched at another speed than the sweep's median
    (summary.launch_us); needs two jobs with a reading."""
    if "launch_us" not in jobs or jobs["launch_us"].notna().sum() < 2:
        return []
    median = jobs["launch_us"].median()
    return _note_naming(
        jobs.assign(launch_off_pct=(jobs["launch_us"] / median - 1).abs() * 100), "launch_off_pct",
        LAUNCH_OFF_PCT,
        lambda r: f"{r['launch_us']:.2f} µs, {'faster' if r['launch_us'] < median else 'slower'}",
        "these jobs measured while the host launched work at another speed than in the rest of "
        f"the sweep (median {median:.2f} µs a launch; the 'launch µs' column gives each job's): "
        "{named}. Launch-bound figures (small-batch step and module times, busy percentages) "
        "follow that speed: on a faster host they read faster and busier (docs/method.md)")


# The two instruments of the busy figure (the profiler's kernel intervals over the
# unprofiled step, NVML's utilization counter) differ by more than this: worth a look.
BUSY_NVML_GAP_PP = 7.0
# NVML within this of what the busy figure and the launches predict (nvml_expected_pct):
# the gap is NVML's count of the launches. Over 19 H200 jobs the largest miss was 3.4.
NVML_EXPECTED_PP = 3.5


def busy_nvml_notes(jobs) -> list[str]:
    """Notes naming the jobs whose busy figure and NVML utilization differ by more than
    BUSY_NVML_GAP_PP points: those whose NVML reading the launches account for, and those
    they do not (docs/method.md says what each instrument counts)."""
    if "nvml_util_pct" not in jobs:
        return []
    gap = jobs.assign(busy_nvml_gap=(jobs["nvml_util_pct"] - jobs["busy_pct"]).abs())
    wide = gap[gap["busy_nvml_gap"] > BUSY_NVML_GAP_PP]
    if "nvml_expected_pct" in wide:
        explained = (wide["nvml_util_pct"] - wide["nvml_expected_pct"]).abs() <= NVML_EXPECTED_PP
    else:
        explained = wide["busy_nvml_gap"] < 0  # none
    return _note_naming(
        wide[explained], "busy_nvml_gap", 0.0,
        lambda r: f"busy {r['busy_pct']:.1f}%, NVML {r['nvml_util_pct']:.1f}%, expected {r['nvml_expected_pct']:.1f}%",
        f"NVML's utilization reads more than {BUSY_NVML_GAP_PP:g} points above the busy figure for these jobs: "
        "{named}. NVML counts about 1 µs of GPU time for each kernel launch besides the kernels' own run; "
        "with these steps' launches that accounts for the gap (expected: the busy figure plus 1 µs a launch). "
        "The busy figure is the share of the step in which kernels run (docs/method.md)") + _note_naming(
        wide[~explained], "busy_nvml_gap", 0.0,
        lambda r: f"busy {r['busy_pct']:.1f}%, NVML {r['nvml_util_pct']:.1f}%",
        f"the busy figure and NVML's utilization differ by more than {BUSY_NVML_GAP_PP:g} points "
        "for these jobs, more than NVML's count of the launches accounts for: {named}. NVML reads a "
        "sample period at a grain of 1/6 s or more; a gap that large means the step did not run steadily "
        "(docs/method.md)")


def microbench_failed_notes(jobs) -> list[str]:
    """A note naming the jobs some of whose selected kernels failed their microbenchmark: on
    an H200 every kernel of four warm jobs once failed so, and the jobs ended ok."""
    def describe(r) -> str:
        return f"{r['microbench_failed']:.0f} of {r['microbench_kernels']:.0f} kernels; the first: {r['microbench_error']}"

    return _note_naming(
        jobs, "microbench_failed", 1, describe,
        "microbenchmarks failed for some of these jobs' kernels: {named}. The breakdown stands "
        "without them; tables/microbench.csv's error column says why for each kernel")


def packing_notes(jobs) -> list[str]:
    """How the sweep was packed onto its GPUs: jobs a GPU, the waits for the GPU's lease,
    the jobs run again alone (hydra.launcher.jobs_per_gpu; docs/running.md)."""
    if "jobs_per_gpu" not in jobs or jobs["jobs_per_gpu"].dropna().empty:
        return []
    per_gpu = int(jobs["jobs_per_gpu"].max())
    if per_gpu <= 1:
        return []
    shared = jobs["shared_gpu_with"].notna().sum()
    waits = jobs["lease_wait_s"].fillna(0)
    longest = jobs.loc[waits.idxmax()]
    text = (f"packed: up to {per_gpu} jobs a GPU (hydra.launcher.jobs_per_gpu); {shared} of {count(len(jobs), 'job')} "
            f"shared their GPU with another. Each timed its GPU holding the GPU's lease, one job at a time: "
            f"they waited {waits.sum():.0f} s for it in all (longest, #{int(longest['job'])}: "
            f"{waits.max():.0f} s); jobs_per_gpu=1 runs them one a GPU")
    paused = jobs["paused_others_s"].dropna() if "paused_others_s" in jobs else None
    if paused is not None and len(paused) and paused.sum() > 0:
        text += (f". While one timed its steps and modules, the others of its GPU stood paused: {paused.sum():.0f} s "
                 "in all (hydra.launcher.pause_while_timing=false lets them compile on)")
    alone = jobs[jobs["rerun_alone"].notna()]
    if len(alone):
        text += "; ran out of GPU memory beside others and ran again alone: " + ", ".join(
            f"#{int(r['job'])}" for _, r in alone.iterrows())
    return [text]


def slower_than_eager_notes(jobs) -> list[str]:
    """A note naming the finished jobs whose compiled step is slower than their eager step."""
    if "speedup" not in jobs:
        return []
    hit = jobs[(jobs["status"] == "ok") & (jobs["speedup"] < 1)]
    if hit.empty:
        return []
    named = ", ".join(f"#{job} {label} ({speedup:.2f}x)" for job, label, speedup
                      in zip(hit["job"][:NAMED], hit["label"][:NAMED], hit["speedup"][:NAMED]))
    more = f" and {len(hit) - NAMED} more" if len(hit) > NAMED else ""
    return [f"compiled slower than eager: {named}{more}. Each job's finding says what its record shows about why "
            "(a busy host, unsteady timings, graph breaks, a small batch)"]


def _named(hit, column: str, said) -> str:
    """The first NAMED jobs of `hit` as "#<job> (<said(their `column`)>)", and how many more
    the jobs table's column holds."""
    named = ", ".join(f"#{job} ({said(value)})" for job, value in zip(hit["job"][:NAMED], hit[column][:NAMED]))
    if len(hit) > NAMED:
        named += f" and {len(hit) - NAMED} more (the jobs table's `{column}` column)"
    return named


def loaded_roofs_notes(jobs) -> list[str]:
    """A note naming the jobs whose roofs were measured on a busy device: their bounds are
    lower than an idle device's, so what they leave to win reads smaller."""
    if "roofs_loaded" not in jobs:
        return []
    hit = jobs[jobs["roofs_loaded"].notna()]
    if hit.empty:
        return []
    named = _named(hit, "roofs_loaded", lambda load: f"{load} of other work")
    return [f"the roofs of these jobs were measured while other work kept the device busy: {named}. A roof is a "
            "ceiling: measured under load it is too low, so their bounds are too short and what is left to win "
            "reads smaller than it is; a later job that finds the device idler measures them again (docs/method.md, "
            "'How far each kernel is from the hardware')"]


def storage_missed_notes(jobs) -> list[str]:
    """A note naming the jobs whose results missed the sweep's shared storage: their folders
    are in the sweep folder (they came back through Ray), not where the others are."""
    if "storage_missed" not in jobs:
        return []
    hit = jobs[jobs["storage_missed"].notna() & (jobs["storage_missed"] != "")]
    if hit.empty:
        return []
    named = _named(hit, "storage_missed", lambda why: str(why)[:160])
    return [f"these jobs missed the sweep's shared storage: {named}. Their results are complete, in the sweep folder; "
            "a compile kept in the driver's compile store goes to the storage when the job next runs"]


def ran_again_notes(jobs) -> list[str]:
    """A note naming the jobs whose worker or node was lost and that Ray ran again."""
    if "ran_again" not in jobs:
        return []
    hit = jobs[jobs["ran_again"].notna()]
    if hit.empty:
        return []
    named = _named(hit, "ran_again", str)
    return [f"these jobs lost their Ray worker or node while they ran and ran again from the start: {named}. Their "
            "figures are the last attempt's; Ray's own logs say why the node was lost "
            "(hydra.launcher.max_retries_on_node_loss sets how often a job runs again)"]


def all_notes(jobs) -> list[str]:
    """Every note about the sweep's jobs, in the order the report shows them."""
    return (slower_than_eager_notes(jobs) + packing_notes(jobs) + busy_nvml_notes(jobs) + busy_host_notes(jobs) + unsteady_timing_notes(jobs)
            + launch_speed_notes(jobs) + microbench_failed_notes(jobs) + loaded_roofs_notes(jobs)
            + storage_missed_notes(jobs) + ran_again_notes(jobs))
