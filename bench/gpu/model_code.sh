#!/usr/bin/env bash
# model_code: mixnet_l (b128) and densenet121 (b16) training, autotune off (MODELS, AUTOTUNE=on,off to
# change), cold then again (the second from the compile store; RUNS=cold for the first only),
# each followed by bench/model_code_check.py; results: bench/results/model_code/.
#     bash bench/gpu_run.sh model_code     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

model_code() {
  rm -rf ~/.cache/sweeper/autotune ~/.cache/sweeper/compile outputs
  local prev=""
  for run in ${RUNS:-cold warm}; do
    local t0=$(date +%s)
    python3 -m sweeper model="${MODELS:-mixnet_l,densenet121}" autotune="${AUTOTUNE:-off}" measure.microbench=false \
      hydra.sweep.dir="$S/$run" > "$S/$run.log" 2>&1
    log "$run rc=$? wall_s=$(( $(date +%s) - t0 ))"
    python3 bench/model_code_check.py "$S/$run" $prev > "$S/check_$run.md" 2>&1
    log "check $run rc=$?"
    prev="$S/cold"
    bundle
  done
  [ -d "$S/warm" ] && python3 bench/model_code_check.py "$S/cold" "$S/warm" > "$S/check.md" 2>&1
  mkdir -p "$S/trace_sample"
  cp -r "$S/cold/0/traces" "$S/cold/0/modules" "$S/trace_sample/" 2>/dev/null
  drop_traces "$S/cold"; drop_traces "$S/warm"
  tar czf "$S/sample_trace.tgz" -C "$S" trace_sample 2>/dev/null; rm -rf "$S/trace_sample"
  bundle
}

run_topic model_code
