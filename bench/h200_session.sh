#!/usr/bin/env bash
# Every GPU run behind issues 2, 4 and 6 (second H200 session), on a two-GPU H200 machine,
# from a copy of the repo after the set-up in docs/gpu.md (wheels with ray, hydra-core,
# omegaconf on PYTHONPATH). Start it in the background; it outlives one device call:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session.sh > /tmp/gpu.log 2>&1 &
# Progress: $S/progress.log. Everything lands under $S, and $S/bundle.tgz holds it all
# but the compile caches.
BUNDLE_KEEP_TRACES=1  # this run bundled its traces too
. "$(dirname "$0")/gpu_session_lib.sh"
machine_info
log start

# 1. Issue 4: the same 4-job sweep through the Ray launcher on one GPU, then on both.
python3 bench/gpu_scaling.py --out-dir "$S/scaling" model=resnet18,resnet34 autotune=on,off mode=inference \
  batch_size=32 > "$S/scaling.md" 2>&1
log "scaling done rc=$?"

# 2. Issue 2 on two tracks, one per GPU, Hydra's basic launcher (the Ray launcher is
#    covered above). Compile threads capped so that the tracks' compiles leave cores
#    for the other track's timing (32 cores).
export TORCHINDUCTOR_COMPILE_THREADS=12
track_a() {
  # mixnet_l, training, fp16 AMP, batch 128 (the table's default), no CUDA graphs.
  CUDA_VISIBLE_DEVICES=0 python3 -m sweeper hydra/launcher=basic model=mixnet_l hydra.sweep.dir="$S/mixnet" > "$S/mixnet.log" 2>&1
  log "A: mixnet_l job rc=$?"
  CUDA_VISIBLE_DEVICES=0 python3 bench/run_reference.py --runs 3 "$S/mixnet/0" > "$S/mixnet_reference.log" 2>&1
  log "A: mixnet_l reference rc=$?"
}
track_b() {
  # densenet121 at a small batch (the table's 16).
  CUDA_VISIBLE_DEVICES=1 python3 -m sweeper hydra/launcher=basic model=densenet121 hydra.sweep.dir="$S/densenet" > "$S/densenet.log" 2>&1
  log "B: densenet121 job rc=$?"
  CUDA_VISIBLE_DEVICES=1 python3 bench/run_reference.py --runs 3 "$S/densenet/0" > "$S/densenet_reference.log" 2>&1
  log "B: densenet121 reference rc=$?"
  # CUDA graphs off and on: resnet18 training, batch 32 (by hand: busy ~16% -> ~54%).
  CUDA_VISIBLE_DEVICES=1 python3 -m sweeper hydra/launcher=basic model=resnet18 batch_size=32 cudagraphs=off,on \
    hydra.sweep.dir="$S/resnet18" > "$S/resnet18.log" 2>&1
  log "B: resnet18 cudagraphs off,on rc=$?"
  # Issue 6: one job out of GPU memory (absurd batch), the other finishes (Ray launcher).
  CUDA_VISIBLE_DEVICES=1 python3 -m sweeper model=resnet18 batch_size=32,100000 hydra.sweep.dir="$S/oom" > "$S/oom.log" 2>&1
  log "B: oom sweep rc=$? (1 expected: one job failed)"
}
track_a &
track_b &
wait
python3 bench/compare_reference.py "$S/mixnet/0" "$S/densenet/0" --json="$S/compare.json" > "$S/compare.md" 2>&1
log "compare rc=$?"
bundle
log ALLDONE
