#!/usr/bin/env bash
# packing: one GPU kept busy (hydra.launcher.jobs_per_gpu): the store export $IMPORT (default
# tests/fixtures/h200/headline_store.tgz) imported, then the mission's command packed (auto)
# into $S/packed_run2 (the store-imported second run of a fresh machine), packed into
# $S/packed_night (every compile from the compile store the packed run filled), one job a GPU
# (jobs_per_gpu=1) into $S/serial_night and packed without pausing the other jobs while one
# times (pause_while_timing=false; UNPAUSED=0 leaves it out) into $S/unpaused_night; each
# after its dry run, with nvidia-smi's utilization at 1 s ($S/smi_<run>.csv); then `history
# compare --kernels` of each packed run against the one-job night, and bench/gpu_idle.py.
# GRID="packed serial serial2" (any of them, in order) adds a cold max-autotune grid
# (GRID_MODELS, default resnet18, e.g. resnet18,resnet50; b32 inference, autotune on,off x
# CUDA graphs off,on; a store of each run's own, no compile store) packed, one job a GPU, and
# one job a GPU again, and bench/store_diff.py of the one-job store against each other;
# NIGHTS=0 runs the grid only (no store import, none of the mission's command's runs); stopped
# UNTIL_S seconds after the start if given; results: bench/results/packing/.
#     bash bench/gpu_run.sh packing     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

packing() {
  local end=0 run
  local grid=(model="${GRID_MODELS:-resnet18}" mode=inference batch_size=32 autotune=on,off cudagraphs=off,on compile_store=off)
  local cmd=(model=mixnet_l,densenet121 autotune=on,off)
  [ -n "${UNTIL_S:-}" ] && end=$(( $(date +%s) + UNTIL_S ))
  if [ "${NIGHTS:-1}" = 1 ]; then
    store_import "${IMPORT:-tests/fixtures/h200/headline_store.tgz}"
    smi_run packed_run2 "$end" "${cmd[@]}"
    smi_run packed_night "$end" "${cmd[@]}"
    smi_run serial_night "$end" "${cmd[@]}" hydra.launcher.jobs_per_gpu=1
    [ "${UNPAUSED:-1}" = 1 ] && smi_run unpaused_night "$end" "${cmd[@]}" hydra.launcher.pause_while_timing=false
  fi
  for run in packed_run2 packed_night unpaused_night; do
    [ -f "$S/$run/summary.json" ] && [ -f "$S/serial_night/summary.json" ] || continue
    python3 -m sweeper.history compare "$S/$run" "$S/serial_night" --kernels --out "$S/compare_$run" \
      > "$S/compare_$run.md" 2>&1
    log "compare $run rc=$?"
  done
  for run in ${GRID:-}; do  # packed, serial, serial2: each a store of its own
    case $run in
      packed) smi_run grid_packed "$end" "${grid[@]}" autotune_store="$S/store_packed" ;;
      serial|serial2) smi_run "grid_$run" "$end" "${grid[@]}" autotune_store="$S/store_$run" \
                        hydra.launcher.jobs_per_gpu=1 ;;
      *) log "GRID: no run $run (packed, serial, serial2)"; continue ;;
    esac
    SWEEPER_AUTOTUNE_STORE="$S/store_$run" python3 -m sweeper.store export "$S/store_$run.tgz" > /dev/null 2>&1
  done
  for other in packed serial2; do
    [ -f "$S/store_serial.tgz" ] && [ -f "$S/store_$other.tgz" ] || continue
    python3 bench/store_diff.py "$S/store_serial.tgz" "$S/store_$other.tgz" > "$S/grid_store_diff_$other.md" 2>&1
    log "grid store diff serial against $other rc=$?"
  done
  python3 bench/gpu_idle.py "$S"/smi_*.csv > "$S/gpu_idle.md" 2>&1
  log "gpu_idle rc=$?"
  bundle
}

run_topic packing
