#!/usr/bin/env bash
# launch_speed: bench/core_probe.py: the host's launch speed per core and over time
#     bash bench/gpu_run.sh launch_speed     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

launch_speed() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate,utilization.gpu \
    --format=csv -lms 200 > "$S/clocks.csv" 2>&1 &
  python3 bench/core_probe.py > "$S/core_probe.md" 2>&1
  log "core probe rc=$?"
  python3 bench/launch_windows.py "$S/core_probe.md" > "$S/launch_windows.md" 2>&1
  log "launch windows rc=$?"
  bundle
}

run_topic launch_speed
