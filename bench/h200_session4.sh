#!/usr/bin/env bash
# The next H200 session's runs (issues 2, 3, 4), on a two-GPU H200 machine, from a copy
# of the repo after the set-up in docs/gpu.md, in the background:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session4.sh > /tmp/gpu.log 2>&1 &
# Steps run one at a time on an otherwise idle machine, most valuable first; after each,
# $S/bundle.tgz is rebuilt (everything but compile caches and traces), so that what is
# done can be fetched even if the session's device time runs out.
. "$(dirname "$0")/gpu_session_lib.sh"
machine_info
log start

# 1. Issue 3, speed and headroom: mixnet_l (training, fp16, batch 128) alone, with the
#    microbenchmark budget and steady module rounds; then python <kernel>.py on the three
#    costliest kernels and the phase seconds against the 25% target. (About 5 min.)
CUDA_VISIBLE_DEVICES=0 python3 -m sweeper hydra/launcher=basic model=mixnet_l hydra.sweep.dir="$S/mixnet" > "$S/mixnet.log" 2>&1
log "mixnet_l job rc=$?"
CUDA_VISIBLE_DEVICES=0 python3 bench/microbench_check.py "$S/mixnet/0" > "$S/microbench_check.md" 2>&1
log "microbench check rc=$?"; bundle

# 2. Issue 2: densenet121 (batch 16) alone, then the harness's timing of its modules with
#    and without Inductor's compile worker pool. (About 4 min.)
CUDA_VISIBLE_DEVICES=0 python3 -m sweeper hydra/launcher=basic model=densenet121 measure.microbench=false \
  hydra.sweep.dir="$S/densenet" > "$S/densenet.log" 2>&1
log "densenet121 job rc=$?"
CUDA_VISIBLE_DEVICES=0 python3 bench/harness_wall.py "$S/densenet/0" --runs 3 > "$S/harness_wall.md" 2>&1
log "harness wall rc=$?"; bundle

# 3. Issue 4: one GPU against two. (About 9 min.)
python3 bench/gpu_scaling.py --out-dir "$S/scaling" model=resnet18,resnet34 autotune=on,off \
  mode=inference batch_size=32 > "$S/scaling.md" 2>&1
log "scaling rc=$?"; bundle

# 4. Issue 3: max-autotune benchmarking in subprocesses against in the compiling process.
#    (About 4 min.)
CUDA_VISIBLE_DEVICES=0 python3 -m sweeper model=resnet18 mode=inference batch_size=32 autotune=on \
  +inductor.autotune_in_subproc=false,true hydra.sweep.dir="$S/subproc" > "$S/subproc.log" 2>&1
log "autotune in subprocess rc=$?"
python3 bench/autotune_store_check.py "$S/subproc" > "$S/subproc.md" 2>&1; bundle

# 5. Issue 4, if time is left: two GPUs again with compile_threads=share, beside step 3's
#    sweeps. (About 4 min.)
python3 bench/gpu_scaling.py --reuse --also-share --out-dir "$S/scaling" model=resnet18,resnet34 autotune=on,off \
  mode=inference batch_size=32 > "$S/scaling_share.md" 2>&1
log "scaling with share rc=$?"; bundle
log ALLDONE
