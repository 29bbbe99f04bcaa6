#!/usr/bin/env bash
# autotune_aa: max-autotune's run-to-run noise layer by layer: MODEL (default resnet50) in MODE (inference)
# at BATCH (64), autotune on and off, each twice (seed=0,1), one job at a time (the second
# autotune=on job seeded from the store the first filled: its decisions from the store on a
# GPU), cold otherwise (a store of its own, no compile store; STORE_FROM=<an earlier run's
# store folder> seeds both); then bench/autotune_findings.py over it ($S/autotune_findings.md:
# one verdict, regret table and advice for the pair of settings, their repeats' median against
# their spread); results: bench/results/autotune_advice/.
#     bash bench/gpu_run.sh autotune_aa     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

autotune_aa() {
  local m=${MODEL:-resnet50}
  if [ -n "${STORE_FROM:-}" ]; then  # an earlier run's store folder: every autotune=on job seeded
    mkdir -p "$S/store" && cp -r "$STORE_FROM"/. "$S/store/"
    log "store from $STORE_FROM"
  fi
  python3 -m sweeper model="$m" mode="${MODE:-inference}" batch_size="${BATCH:-64}" autotune=on,off seed=0,1 \
    hydra.launcher.jobs_per_gpu=1 autotune_store="$S/store" compile_store=off "yes=true" hydra.sweep.dir="$S/aa" \
    > "$S/aa.log" 2>&1
  log "autotune_aa $m rc=$?"
  python3 bench/autotune_findings.py "$S/aa" > "$S/autotune_findings.md" 2>&1
  drop_traces "$S/aa"
  bundle
}

run_topic autotune_aa
