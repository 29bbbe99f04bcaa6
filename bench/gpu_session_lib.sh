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
