#!/usr/bin/env bash
# scaling: bench/gpu_scaling.py: one sweep on one GPU, then on every GPU
#     bash bench/gpu_run.sh scaling     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

scaling() {
  python3 bench/gpu_scaling.py --out-dir "$S/scaling" model=resnet18,resnet34 autotune=on,off mode=inference \
    batch_size=32 > "$S/scaling.md" 2>&1
  log "scaling rc=$?"
  bundle
}

run_topic scaling
