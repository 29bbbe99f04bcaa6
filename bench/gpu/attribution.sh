#!/usr/bin/env bash
# attribution: bench/attribution_check.py on mixnet_l (b128) and densenet121 (b16) training
# (MODELS="model:batch ..."), CUDA graphs off and on, all at once, and one sweeper job of the
# first; results: bench/results/model_code/attribution_check_*.md.
#     bash bench/gpu_run.sh attribution     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The attribution check (bench/attribution_check.py) on each of $MODELS (default mixnet_l:128
# and densenet121:16, model:batch) training, CUDA graphs off and on, all at once (the check
# needs no timing of its own: it reads what Inductor computes and where the profiler puts
# each kernel); and one sweeper job of the first model (CUDA graphs off) whose record's
# model code places library kernels by the profiler's links. Results under $S/attribution/.
attribution() {
  mkdir -p "$S/attribution"
  local pids=()
  for mb in ${MODELS:-mixnet_l:128 densenet121:16}; do
    local m=${mb%%:*} b=${mb##*:}
    for g in off on; do
      local flag=""; [ $g = on ] && flag=--cudagraphs
      python3 bench/attribution_check.py "$m" --device cuda --batch "$b" $flag \
        --json "$S/attribution/${m}_graphs_$g.json" > "$S/attribution/${m}_graphs_$g.md" 2> "$S/attribution/${m}_graphs_$g.err" &
      pids+=($!)
    done
  done
  local first=${MODELS:-mixnet_l:128}; first=${first%% *}
  if [ "${ATTR_JOB:-1}" = 1 ] && python3 -c "import ray, hydra" 2>/dev/null; then  # the job's own placement too
    python3 -m sweeper model="${first%%:*}" batch_size="${first##*:}" measure.microbench=false \
      hydra.sweep.dir="$S/attribution/job" > "$S/attribution/job.log" 2>&1 &
    pids+=($!)
  fi
  for p in "${pids[@]}"; do wait "$p"; log "attribution pid $p rc=$?"; done
  [ -d "$S/attribution/job" ] && drop_traces "$S/attribution/job"
  bundle
}

run_topic attribution
