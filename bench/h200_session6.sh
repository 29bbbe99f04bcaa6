#!/usr/bin/env bash
# The next H200 session's runs (issues 3 and 2), on a one-GPU H200 machine, from a copy of
# the repo after the set-up in docs/gpu.md, in the background:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session6.sh > /tmp/gpu.log 2>&1 &
# Steps run one at a time on an otherwise idle machine, most valuable first; $S/bundle.tgz
# is rebuilt after each (see gpu_session_lib.sh). About 13 minutes, then 3 for step 3.
# Ran in session 6 (bench/results/h200_session6.md): step 1 refuted the alignment diagnosis
# below; bench/h200_session6b.sh checked the actual fix. It ran at commit e7e1375 with
# step 2 spelled out; the steps are now gpu_session_lib.sh's densenet_vs_reference.
. "$(dirname "$0")/gpu_session_lib.sh"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
machine_info
log start

# 1. Issue 3's speed target with captured inputs that keep their address alignment
#    (capture.copy_input): session 5's mixnet_l backward spent 11.8 s of warm-up
#    rebuilding cuDNN plans for misaligned copies. Confirmed if modules[backward_1].warmup_s
#    is under 1 s and microbench_check.md's figure is at most 25%. (About 5 min.)
mixnet_check; bundle

# 2. Issue 2, the literal procedure: densenet121 job A, `-p` three times on each module it
#    captured, jobs B and C on A's compile (sweeper's spread over three repeats, as many
#    as the reference's runs), then the comparison. (About 9 min.)
densenet_vs_reference
bundle

# 3. If time is left: which of mixnet_l's module inputs start off a 32-byte boundary on
#    the GPU (fp16, batch 128), the premise of step 1's fix; seen on the CPU in bfloat16
#    (bench/results/input_alignment_cpu.md). (About 3 min.)
python3 bench/input_alignment.py --device cuda --batch 128 > "$S/input_alignment.md" 2>&1
log "input alignment rc=$?"; bundle
log ALLDONE
