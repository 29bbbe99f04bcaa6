"""Idle GPUs lent to the slow jobs (pure: counts in, a number out).

A max-autotune compile spends most of its time benchmarking template choices, one at a
time on its own GPU (bench/results/headline/: 700 s of a mixnet_l compile). Inductor can
spread that benchmarking over several GPUs (`autotune_in_subproc` with
`autotune_multi_device`: a benchmarking subprocess per visible GPU). When a sweep has more
GPUs than jobs left, the GPUs no job will need would stand idle while the autotune=on jobs
tune: so an autotune=on job that starts then takes a share of them, for its whole run
(GPUs are given at a job's start; lending them mid-run is not done).

The rule, at each job's start: of the free GPUs, one for the job, one kept for every job
still queued (so that no job ever waits for a GPU lent to another), and what is left
shared between the autotune=on jobs starting now or queued; a job without max-autotune
takes one. Only where one node holds the GPUs: on a cluster of several GPU nodes a job of
several GPUs could wait for one node to free them all, so nothing is lent there."""

from __future__ import annotations


def gpus_for(autotune: bool, free: int, queued: int, autotune_left: int, per_job: float = 1) -> float:
    """How many GPUs a job starting now takes: `free` GPUs now, `queued` jobs still to start
    after it, `autotune_left` autotune=on jobs among it and them (it included)."""
    if not autotune or per_job != 1 or autotune_left < 1:
        return per_job
    spare = free - 1 - queued
    if spare <= 0:
        return 1
    return 1 + spare // autotune_left
