#!/usr/bin/env bash
# data_path: bench/data_path.py: resnet18 inference, autotune on and off, two jobs a GPU, cold then warm,
# without and with a storage folder (storage_path): the bytes through the driver, where each
# warm job's compile came from; results: bench/results/data_path/.
#     bash bench/gpu_run.sh data_path     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# bench/data_path.py on the GPU: resnet18 b32 inference ($MODEL), autotune on and off, two
# jobs a GPU, cold then warm from the compile store, with the driver's disk and with a
# storage folder (hydra.launcher.storage_path); the stores and scratch folders left out of
# the bundle, the records kept.
data_path() {
  rm -rf ~/.cache/sweeper/autotune ~/.cache/sweeper/compile "$S/data_path"
  local t0=$(date +%s)
  python3 bench/data_path.py --model "${MODEL:-resnet18}" --no-tiny --set mode=inference --set batch_size=32 \
    --set autotune=on,off --set hydra.launcher.jobs_per_gpu=2 --set measure.microbench=false \
    --keep "$S/data_path" --out "$S/data_path.md" > "$S/data_path.log" 2>&1
  log "data_path rc=$? wall_s=$(( $(date +%s) - t0 ))"
  rm -rf "$S"/data_path/*/compile_store "$S"/data_path/*/autotune_store "$S"/data_path/*/scratch \
    "$S"/data_path/storage/storage/compile_store
  drop_traces "$S/data_path"
  machine_info
  bundle
}

run_topic data_path
