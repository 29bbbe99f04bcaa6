# Shared by the bench/h200_*.sh session scripts (source it; do not run it):
#     . "$(dirname "$0")/gpu_session_lib.sh"
# Every run lands under $S (default /tmp/gpu); progress goes to $S/progress.log, which
# the device calls poll.
set -u
S=${S:-/tmp/gpu}
mkdir -p "$S"

log() { echo "[$(date +%T)] $*" | tee -a "$S/progress.log"; }

# $S/bundle.tgz: everything under $S but the compile caches and the profiler traces
# (BUNDLE_KEEP_TRACES=1 keeps the traces). Packed to $S.bundle.tmp first, outside $S: a
# tarball written inside the folder it packs makes tar fail with "file changed as we read
# it" (session 4 lost its bundles that way), and a reader never sees a half-written one.
bundle() {
  local traces=(--exclude='*trace*.json.gz')
  [ "${BUNDLE_KEEP_TRACES:-0}" = 1 ] && traces=()
  tar czf "$S.bundle.tmp" --exclude=cache --exclude=bundle.tgz "${traces[@]}" -C "$(dirname "$S")" "$(basename "$S")" \
    && mv "$S.bundle.tmp" "$S/bundle.tgz"
}

# What the machine was: GPUs, driver and clocks; the CPU (launch-bound figures move with it).
machine_info() {
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv > "$S/nvidia-smi.csv" 2>&1
  lscpu > "$S/lscpu.txt" 2>&1
}

# The GPU's SM and memory clocks, power and P-state every 200 ms into $S/clocks.csv, in
# the background until the machine goes: a launch-bound figure could follow the clocks
# the driver picks for a lightly loaded GPU (idle: 345 MHz).
clock_log() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate,utilization.gpu \
    --format=csv -lms 200 > "$S/clocks.csv" 2>&1 &
}

# Steps more than one session runs. Issue 3: a mixnet_l job (training, fp16, batch 128),
# then its three costliest kernels against `python <kernel>.py` and the phase seconds
# against the 25% target (microbench_check.md).
mixnet_check() {
  python3 -m sweeper hydra/launcher=basic model=mixnet_l hydra.sweep.dir="$S/mixnet" > "$S/mixnet.log" 2>&1
  log "mixnet_l job rc=$?"
  python3 bench/microbench_check.py "$S/mixnet/0" > "$S/microbench_check.md" 2>&1
  log "microbench check rc=$?"
}

# Issue 2: a job into $S/<name>/run, with extra overrides, no microbenchmarks. Every such
# job names its sweep folder "run", so all share one cache folder under /tmp/cache and
# the later ones hit the first one's FX graph cache: the same kernels, timed again in a
# fresh process.
cached_job() {
  local name=$1 model=$2; shift 2
  python3 -m sweeper hydra/launcher=basic model="$model" measure.microbench=false cache_root=/tmp/cache \
    "$@" hydra.sweep.dir="$S/$name/run" > "$S/$name.log" 2>&1
  log "$model job $name rc=$?"
}

# A densenet121 job (batch 16, its default), as cached_job.
densenet_job() {
  local name=$1; shift
  cached_job "$name" densenet121 "$@"
}

# Issue 2's literal procedure: densenet121 job A, `-p` three times on each module it
# captured (run_reference.py), jobs B and C on A's compile (sweeper's spread over as many
# repeats as the harness's runs), then the comparison ($S/compare.md). About 13 minutes.
densenet_vs_reference() {
  densenet_job denA
  python3 bench/run_reference.py --runs 3 "$S/denA/run/0" > "$S/denA_reference.log" 2>&1
  log "reference runs rc=$?"
  densenet_job denB
  densenet_job denC
  python3 bench/compare_reference.py "$S/denA/run/0,$S/denB/run/0,$S/denC/run/0" > "$S/compare.md" 2>&1
  log "compare rc=$?"
}
