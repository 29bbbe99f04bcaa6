#!/usr/bin/env bash
# fidelity: densenet121 (training, batch 16) job A, `python <module>.py -p` three times on each module
# it captured, jobs B and C on A's compile, then bench/compare_reference.py: sweeper against
# PyTorch's harness ($S/compare.md)
#     bash bench/gpu_run.sh fidelity     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fidelity() {
  cached_job denA densenet121
  python3 bench/run_reference.py --runs 3 "$S/denA/run/0" > "$S/denA_reference.log" 2>&1
  log "reference runs rc=$?"
  cached_job denB densenet121
  cached_job denC densenet121
  python3 bench/compare_reference.py "$S/denA/run/0,$S/denB/run/0,$S/denC/run/0" > "$S/compare.md" 2>&1
  log "compare rc=$?"
  bundle
}

run_topic fidelity
