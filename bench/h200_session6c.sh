#!/usr/bin/env bash
# Session 6's third H200 call (one GPU), with the device minutes left after
# h200_session6.sh and h200_session6b.sh, in the foreground:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu timeout 250 bash bench/h200_session6c.sh
# Issue 2: does the launch probe (tasks/timing.launch_probe_us, read before each timed
# round) follow a launch-bound module's wall time, round by round and job by job?
# resnet18 training at batch 32 (the issue's example of a noisy `-p`), three jobs on one
# compile. (About 2 minutes.) Session 6 then ran jobs D-G in a follow-up call on the warm
# machine (bench/results/h200_session6.md).
. "$(dirname "$0")/gpu_session_lib.sh"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
machine_info
log start
for n in A B C; do
  cached_job "r18$n" resnet18 batch_size=32
  bundle
done
log ALLDONE
