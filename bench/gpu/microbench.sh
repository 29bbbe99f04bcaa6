#!/usr/bin/env bash
# microbench: a mixnet_l job (training, batch 128), then bench/microbench_check.py: its costliest kernels
# against `python <kernel>.py` and the phases' cost
#     bash bench/gpu_run.sh microbench     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

microbench() {
  python3 -m sweeper hydra.launcher.jobs_per_gpu=1 model=mixnet_l hydra.sweep.dir="$S/mixnet" > "$S/mixnet.log" 2>&1
  log "mixnet_l job rc=$?"
  python3 bench/microbench_check.py "$S/mixnet/0" > "$S/microbench_check.md" 2>&1
  log "microbench check rc=$?"
  bundle
}

run_topic microbench
