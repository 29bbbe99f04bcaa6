#!/usr/bin/env bash
# autotune_parts: max-autotune's two parts apart (python -m sweeper +sweep=autotune_parts: off, on, the
# templates alone, the kernel configs alone) on MODEL (default resnet50) in MODE (inference)
# at BATCH (64), cold (a store of its own, no compile store), packed as the launcher chooses;
# then bench/autotune_findings.py over it ($S/autotune_findings.md: each pair's verdict, where
# it loses, what to turn on and that part's own job checked); results:
# bench/results/autotune_advice/.
#     bash bench/gpu_run.sh autotune_parts     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

autotune_parts() {
  local m=${MODEL:-resnet50}
  python3 -m sweeper +sweep=autotune_parts model="$m" mode="${MODE:-inference}" batch_size="${BATCH:-64}" \
    autotune_store="$S/store" compile_store=off "yes=true" hydra.sweep.dir="$S/parts" > "$S/parts.log" 2>&1
  log "autotune_parts $m rc=$?"
  python3 bench/autotune_findings.py "$S/parts" > "$S/autotune_findings.md" 2>&1
  drop_traces "$S/parts"
  bundle
}

run_topic autotune_parts
