#!/usr/bin/env bash
# Session 7's first H200 call, on a one-GPU H200 machine, from a copy of the repo after
# the set-up in docs/gpu.md, in the background:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session7.sh > /tmp/gpu.log 2>&1 &
# 1. Does the launch speed follow the CPU core, or the GPU's clocks? bench/core_probe.py
#    pins the probe to each core in turn, then watches it unpinned with the core it ran on
#    and the host's stolen time; nvidia-smi logs the SM clock every 200 ms all along
#    (clocks.csv). Run at the start and again at the end.
# 2. Issue 3's mixnet_l check (about 5 minutes): the headroom pass now predicts each
#    kernel's timing and skips one that would pass the budget, so microbench_check.md's
#    microbench phase should stay within its budget_s.
. "$(dirname "$0")/gpu_session_lib.sh"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
machine_info
clock_log
log start
python3 bench/core_probe.py --seconds 40 > "$S/core_probe_1.md" 2>&1
log "core probe 1 rc=$?"; bundle
mixnet_check; bundle
python3 bench/core_probe.py --seconds 30 > "$S/core_probe_2.md" 2>&1
log "core probe 2 rc=$?"; bundle
log ALLDONE
