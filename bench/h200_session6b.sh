#!/usr/bin/env bash
# Session 6's second H200 call (one GPU, after bench/h200_session6.sh), from a copy of the
# repo after the set-up in docs/gpu.md, in the background:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session6b.sh > /tmp/gpu.log 2>&1 &
# The first call refuted session 5's alignment diagnosis: with copies that keep their
# address alignment, mixnet_l's backward still spent 12.9 s warming up. The cause found
# next: ATen's cuDNN plan cache is thread_local, and the step runs its backward on the
# autograd engine's device thread. tasks/module_thread now runs a backward module's
# timing and profile on that thread. Confirmed if modules[backward_1].warmup_s is under
# 1 s and microbench_check.md's figure is at most 25%. (About 5 minutes.)
. "$(dirname "$0")/gpu_session_lib.sh"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
machine_info
log start
mixnet_check; bundle
log ALLDONE
