#!/usr/bin/env bash
# Session 7's second H200 call, on a one-GPU H200 machine, from a copy of the repo after
# the set-up in docs/gpu.md, in the background:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session7b.sh > /tmp/gpu.log 2>&1 &
# The first call (h200_session7.sh) found the host's launch speed switching between about
# 7 and 10 µs every 0.2 to 4 s on any core, so a module's rounds taken in 2 s saw one
# level. Modules are now timed in turn over at least measure.module_span_s (8 s) and
# their busy figure divides by the trimmed mean of the rounds (commit after 115d90f).
# 1. Issue 2's literal procedure with the launch probe on both sides (about 13 minutes):
#    densenet121 job A, `-p` three times per module, jobs B and C; compare.md. Then jobs D
#    and E (40 s each on A's compile) for sweeper's spread over five repeats, and
#    launch_probe.md over all five.
# 2. Issue 3's mixnet_l check (about 5 minutes): the phase seconds against the 25% target
#    now that time_modules spans 8 s, and the predictive microbench budget.
. "$(dirname "$0")/gpu_session_lib.sh"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
machine_info
clock_log
log start
densenet_vs_reference; bundle
densenet_job denD
densenet_job denE
python3 bench/compare_reference.py "$S/denA/run/0,$S/denB/run/0,$S/denC/run/0,$S/denD/run/0,$S/denE/run/0" > "$S/compare_5.md" 2>&1
log "compare over five rc=$?"
python3 bench/launch_probe.py "$S"/den{A,B,C,D,E}/run/0 > "$S/launch_probe.md" 2>&1
log "launch probe rc=$?"; bundle
mixnet_check; bundle
log ALLDONE
