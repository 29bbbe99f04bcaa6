#!/usr/bin/env bash
# What every GPU topic (bench/gpu/<topic>.sh, run by bench/gpu_run.sh) shares: $S (default
# /tmp/gpu) where everything lands, the progress log, the bundle, the machine's versions, and
# the helpers the topics run their sweeps with. Sourced, not run.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
S=${S:-/tmp/gpu}
mkdir -p "$S"

# the mission's command, as a user types it
headline_cmd=(python3 -m sweeper model=mixnet_l,densenet121 autotune=on,off)

log() { echo "[$(date +%T)] $*" | tee -a "$S/progress.log"; }

# $S/bundle.tgz: everything under $S but compile caches and profiler traces. Packed outside
# $S first: a tarball written inside the folder it packs makes tar fail ("file changed as
# we read it"), and a reader never sees a half-written one.
bundle() {
  tar czf "$S.bundle.tmp" --exclude=cache --exclude=bundle.tgz --exclude='*trace*.json.gz' --exclude='traces' \
    -C "$(dirname "$S")" "$(basename "$S")" && mv "$S.bundle.tmp" "$S/bundle.tgz"
}

# A sweep folder's profiler traces and compiled-module copies, removed before it is packed
# (the records keep what the analysis needs; bundles stay a few MB).
drop_traces() { find "$1" \( -name traces -o -name modules \) -prune -exec rm -rf {} +; }

machine_info() {
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv > "$S/nvidia-smi.csv" 2>&1
  python3 -c 'import torch, triton, timm; print("torch", torch.__version__, "triton", triton.__version__, "timm", timm.__version__)' \
    > "$S/versions.txt" 2>&1
}

# A sweep on one GPU, one job at a time: gpu_sweep GPU NAME OVERRIDES...
gpu_sweep() {
  local gpu=$1 name=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpu python3 -m sweeper hydra.launcher.jobs_per_gpu=1 measure.microbench=false "$@" \
    hydra.sweep.dir="$S/$name" > "$S/$name.log" 2>&1
  log "$name rc=$?"
}

# A job of one model into $S/<name>/run, no microbenchmarks; every such job shares one
# compile cache (/tmp/cache), so later ones time the first one's kernels in a fresh process.
cached_job() {
  local name=$1 model=$2; shift 2
  python3 -m sweeper hydra.launcher.jobs_per_gpu=1 model="$model" measure.microbench=false cache_root=/tmp/cache \
    "$@" hydra.sweep.dir="$S/$name/run" > "$S/$name.log" 2>&1
  log "$model job $name rc=$?"
}

# A command run twice as a user would: a cold start (no autotune store, no earlier sweep),
# then again, each after its dry run; then bench/headline.py and a kernel compare of the two.
twice() {
  rm -rf ~/.cache/sweeper/autotune ~/.cache/sweeper/compile outputs  # nothing tuned, compiled or run before
  for run in first second; do
    python3 -m sweeper "$@" dry_run=true > "$S/${run}_dry_run.log" 2>&1
    local t0=$(date +%s)
    python3 -m sweeper "$@" > "$S/$run.log" 2>&1
    log "$run rc=$? wall_s=$(( $(date +%s) - t0 ))"
    ls -d outputs/*/* > "$S/sweeps.txt"
    mkdir -p "$S/outputs" && cp -r outputs/. "$S/outputs/"
    drop_traces "$S/outputs"
    bundle
  done
  python3 bench/headline.py $(cat "$S/sweeps.txt") > "$S/headline.md" 2>&1
  log "headline.py rc=$?"
  python3 -m sweeper.history compare $(tac "$S/sweeps.txt") --kernels --out "$S/compare" > "$S/compare.md" 2>&1
  log "compare rc=$?"
  bundle
}

# Run a sweep command, stopping it with SIGTERM (as Ctrl-C) once the clock passes $1 (epoch
# seconds; 0: no limit): run_until END LOG CMD...; logs its rc and wall time.
run_until() {
  local end=$1 out=$2; shift 2
  local t0=$(date +%s)
  "$@" > "$out" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$end" -gt 0 ] && [ "$(date +%s)" -ge "$end" ]; then
      log "deadline: stopping the sweep (SIGTERM, as Ctrl-C) after $(( $(date +%s) - t0 ))s"
      kill -TERM "$pid"
      break
    fi
    sleep 5
  done
  wait "$pid"
  log "$(basename "$out" .log) rc=$? wall_s=$(( $(date +%s) - t0 ))"
}

store_import() {
  python3 -m sweeper.store import "$1" > "$S/store_import.log" 2>&1
  log "store import rc=$?"
}

store_export() {
  python3 -m sweeper.store export "$S/store.tgz" > "$S/store_export.log" 2>&1
  log "store export rc=$? $(tail -1 "$S/store_export.log")"
  python3 -m sweeper.store show > "$S/store_after.txt" 2>&1
}

# One sweep with nvidia-smi's utilization read every second while it runs, after its dry
# run: smi_run NAME END OVERRIDES... (the command is python3 -m sweeper OVERRIDES; END as
# run_until's); its folder is $S/NAME.
smi_run() {
  local name=$1 end=$2; shift 2
  [ "$end" -gt 0 ] && [ "$(date +%s)" -ge "$end" ] && { log "$name not started: past the deadline"; return; }
  python3 -m sweeper "$@" hydra.sweep.dir="$S/$name" dry_run=true > "$S/${name}_dry_run.log" 2>&1
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -l 1 \
    > "$S/smi_$name.csv" 2>&1 &
  local smi=$!
  run_until "$end" "$S/$name.log" python3 -m sweeper "$@" hydra.sweep.dir="$S/$name"
  kill "$smi" 2>/dev/null
  drop_traces "$S/$name"
  bundle
}

# A topic's run: the machine's versions, then the topic, between its start and ALLDONE lines.
run_topic() {
  machine_info
  log "start $1"
  "$1"
  log ALLDONE
}
