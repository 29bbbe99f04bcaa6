#!/usr/bin/env bash
# roofline: bench/roofs_check.py (the matmul peak per dtype and the copy bandwidth against the
# datasheet, and their reuse), then mixnet_l b128 and densenet121 b16 training with autotune
# off ($MODELS), cut at $SWEEP_S seconds (420), and bench/roofline_check.py: each job against
# the roofs and the sweep's ranking ($S/ranking.md); results: bench/results/roofline/.
#     bash bench/gpu_run.sh roofline     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

roofline() {
  [ -s "$S/roofs.md" ] || python3 bench/roofs_check.py > "$S/roofs.md" 2>&1
  log "roofs rc=$?"
  rm -rf ~/.cache/sweeper/autotune ~/.cache/sweeper/compile outputs
  local t0=$(date +%s)
  timeout "${SWEEP_S:-420}" python3 -m sweeper model="${MODELS:-mixnet_l,densenet121}" autotune=off \
    measure.microbench=false hydra.sweep.dir="$S/pair" > "$S/pair.log" 2>&1
  log "pair rc=$? wall_s=$(( $(date +%s) - t0 ))"
  python3 -m sweeper.aggregate "$S/pair" >> "$S/pair.log" 2>&1  # again, should the timeout have cut the sweep's own
  python3 bench/roofline_check.py "$S/pair" > "$S/ranking.md" 2>&1
  log "ranking rc=$?"
  drop_traces "$S/pair"
  bundle
}

run_topic roofline
