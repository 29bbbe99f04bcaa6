#!/usr/bin/env bash
# The next H200 session's runs (issues 2, 3 and 4), on a one- or two-GPU H200 machine, from a
# copy of the repo after the set-up in docs/gpu.md, in the background:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session5.sh > /tmp/gpu.log 2>&1 &
# Steps run one at a time on an otherwise idle machine, most valuable first; after each,
# $S/bundle.tgz is rebuilt (everything but compile caches and traces; packed outside $S
# first, so that tar never reads its own output), so that what is done can be fetched even
# if the session's device time runs out. About 17 minutes, then 7 for step 4. (Ran at
# commit 27b6198 with these steps spelled out; they are now gpu_session_lib.sh's.)
. "$(dirname "$0")/gpu_session_lib.sh"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
machine_info
log start

# 1. Issue 3's speed target: mixnet_l (training, fp16, batch 128) with timed loops free of
#    garbage collection (measure.pause_gc, default on), each module's seconds recorded;
#    then the three costliest kernels against `python <kernel>.py` and the phase seconds
#    against the 25% target. (About 5 min.)
mixnet_check; bundle

# 2. Issue 2, the literal procedure for densenet121 (batch 16): the job, then `-p` three
#    times on each module it captured, in the same call. (About 10 min.)
densenet_job denA
python3 bench/run_reference.py --runs 3 "$S/denA/run/0" > "$S/denA_reference.log" 2>&1
log "reference runs rc=$?"; bundle

# 3. Two more densenet121 jobs on the same compile (the cache folder is named after the
#    sweep folder's name, "run", so they hit job A's FX graph cache and run the same
#    kernels): B repeats A (sweeper's spread over repeats), C turns measure.pause_gc off
#    (what garbage collection does to the rounds: timings.gc says when it ran). (About 2 min.)
densenet_job denB
densenet_job denC measure.pause_gc=false
python3 bench/compare_reference.py "$S/denA/run/0,$S/denB/run/0" > "$S/compare.md" 2>&1
log "compare rc=$?"; bundle

# 4. Issue 4, if time is left and the machine has two GPUs: the scaling sweeps again, now
#    that each job records how many cores other work kept busy in each phase
#    (timings.host_busy_cores): the contention measured, not inferred. (About 7 min.)
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  env -u CUDA_VISIBLE_DEVICES python3 bench/gpu_scaling.py --out-dir "$S/scaling" model=resnet18,resnet34 autotune=on,off \
    mode=inference batch_size=32 > "$S/scaling.md" 2>&1
  log "scaling rc=$?"; bundle
fi
log ALLDONE
