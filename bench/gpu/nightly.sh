#!/usr/bin/env bash
# nightly: the same four-job sweep (resnet18, resnet50, convnext_tiny, vit_small_patch16_224; batch 32
# inference; the Ray launcher on every GPU) three times, each compared with the one before
# (python -m sweeper.history compare --fail-on-regression), then a fourth with
# bench/gpu_load.py's matmul loop on every GPU, compared with --kernels; results:
# bench/results/nightly/.
#     bash bench/gpu_run.sh nightly     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

nightly() {
  local grid=(model=resnet18,resnet50,convnext_tiny,vit_small_patch16_224 batch_size=32 mode=inference
              measure.microbench=false)
  for n in 1 2 3 4; do
    local load=""
    if [ $n = 4 ]; then
      python3 bench/gpu_load.py --seconds 900 > "$S/gpu_load.log" 2>&1 &
      load=$!
      sleep 20  # the load is running before the sweep starts
    fi
    python3 -m sweeper "${grid[@]}" hydra.sweep.dir="$S/nightly/night$n" > "$S/night$n.log" 2>&1
    log "night$n rc=$?"
    [ -n "$load" ] && { pkill -P "$load"; kill "$load"; }
    if [ $n -gt 1 ]; then
      python3 -m sweeper.history compare "$S/nightly/night$n" --fail-on-regression --out "$S/compare$n" \
        $([ $n = 4 ] && echo --kernels) > "$S/compare$n.md" 2>&1
      log "compare night$n rc=$?"
    fi
    bundle
  done
}

run_topic nightly
