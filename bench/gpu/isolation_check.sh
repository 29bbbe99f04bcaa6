#!/usr/bin/env bash
# isolation_check: bench/isolation_check.py: MODEL (resnet50) at BATCH (64), the LAYERS
# (layer1.0,layer2.0,layer3.0) each compiled by default and with max-autotune, and each of
# their convolutions alone, eager (the library call) and with max-autotune: does the regret
# table's benchmark-only win hold when timed again outside the model ($S/isolation_check.md,
# .json); results: bench/results/autotune_advice/.
#     bash bench/gpu_run.sh isolation_check     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

isolation_check() {
  python3 bench/isolation_check.py --model "${MODEL:-resnet50}" --batch "${BATCH:-64}" \
    --layers "${LAYERS:-layer1.0,layer2.0,layer3.0}" --json "$S/isolation_check.json" \
    > "$S/isolation_check.md" 2> "$S/isolation_check.err"
  log "isolation_check rc=$?"
  bundle
}

run_topic isolation_check
