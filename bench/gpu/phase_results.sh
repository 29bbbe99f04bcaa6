#!/usr/bin/env bash
# phase_results: the same sweep (resnet18 b32 inference, autotune on and off, two jobs a GPU, microbenchmarks
# on) by the job code of before its typed phase results (the tree $OLD_TREE, a `git archive`
# tarball) and by this one, each cold with its own stores, then this one again warm;
# bench/record_shapes.py compares the records job by job ($S/record_shapes.md,
# $S/record_shapes_warm.md); results: bench/results/phase_results/.
#     bash bench/gpu_run.sh phase_results     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

phase_results() {
  local grid=(model=resnet18 mode=inference batch_size=32 autotune=on,off hydra.launcher.jobs_per_gpu=2)
  local old=/tmp/old_tree
  rm -rf "$old" && mkdir -p "$old" && tar xzf "${OLD_TREE:?a git archive of the code before}" -C "$old"
  for run in before after after_warm; do
    local t0=$(date +%s) dir=$PWD path=$PYTHONPATH stores=$S/stores_${run%_warm}
    [ "$run" = before ] && { dir=$old; path=$old:$PYTHONPATH; }  # the old tree first on the path, for the jobs too
    (cd "$dir" && PYTHONPATH=$path python3 -c 'import tasks.phases as p; print("job code:", p.__file__)') > "$S/$run.log" 2>&1
    (cd "$dir" && PYTHONPATH=$path python3 -m sweeper "${grid[@]}" autotune_store="$stores/autotune" \
      compile_store="$stores/compile" hydra.sweep.dir="$S/$run") >> "$S/$run.log" 2>&1
    log "$run rc=$? wall_s=$(( $(date +%s) - t0 ))"
    drop_traces "$S/$run"
    bundle
  done
  python3 bench/record_shapes.py "$S/before" "$S/after" --out "$S/record_shapes.md" > /dev/null 2>&1
  log "record_shapes rc=$?"
  python3 bench/record_shapes.py "$S/after" "$S/after_warm" --out "$S/record_shapes_warm.md" > /dev/null 2>&1
  log "record_shapes warm rc=$?"
  rm -rf "$S"/stores_*
  machine_info
  bundle
}

run_topic phase_results
