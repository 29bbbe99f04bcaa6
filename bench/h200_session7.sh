#!/usr/bin/env bash
# The next H200 session's runs (issue 2), on a one-GPU H200 machine, from a copy of the
# repo after the set-up in docs/gpu.md, in the background:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session7.sh > /tmp/gpu.log 2>&1 &
# Issue 2's literal procedure again, now with the launch probe on both sides: sweeper
# reads it before each module round, and run_reference.py after each `-p` run
# (tasks/timing.launch_probe_us). Session 6 left open whether the probe explains the gaps
# between sweeper and `-p` (bench/results/h200_session6.md). compare.md shows both
# probes beside the busy figures; launch_probe.md pairs sweeper's rounds with their
# readings. About 14 minutes. Then, issue 3's mixnet_l check again (about 5 minutes):
# the headroom pass now predicts each kernel's timing and skips one that would pass the
# budget, so microbench_check.md's microbench phase should stay within its budget_s.
. "$(dirname "$0")/gpu_session_lib.sh"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
machine_info
log start
densenet_vs_reference
python3 bench/launch_probe.py "$S/denA/run/0" "$S/denB/run/0" "$S/denC/run/0" > "$S/launch_probe.md" 2>&1
log "launch probe rc=$?"; bundle
mixnet_check; bundle
log ALLDONE
