#!/usr/bin/env bash
# A real nightly history on one GPU, with a real change in what runs (docs/example-nightly).
#     S=/tmp/gpu setsid bash bench/nightly_history.sh > /tmp/nightly.log 2>&1 &
# NIGHTS nights (default 14) of one small grid, each a fresh driver into $S/nightly/nightNN as
# `+sweep=nightly` runs them (the autotune and compile stores on, in their default folders):
#     python -m sweeper +sweep=nightly model=resnet18,convnext_tiny mode=training,inference
#         cudagraphs=off autotune=off batch_size=32 measure.microbench=false
#         measure.module_span_s=2 measure.steady_loop_s=2
#         python=nightly +pythons.nightly=<the night's environment>
# (4 jobs: library convolutions and matmuls, Triton pointwise, reductions and persistent
# reductions; the timed phases shortened so that 14 nights fit one sitting of a lent GPU)
# The jobs run in the Python environment named `nightly`, as a nightly that tests a build
# would. From night CHANGE_AT (default 11) on, that environment is another build: the same
# torch with Triton's alignment specialization off (TORCHINDUCTOR_DIVISIBLE_BY_16=0, set by a
# .pth file of the environment, so every process of that build has it, `history confirm`'s
# too). Why it is realistic: a build whose kernels lose the "divisible by 16" hint is a
# regression of the kind a torch or Triton upgrade brings (wider loads lost, generated
# kernels slower, library kernels untouched), it changes no job's identity (the job still
# names `python=nightly`), and Inductor's own cache keys hold its config, so the compile
# store's blob of the old build misses and the change really runs.
# Then, as far as DEADLINE_S (seconds from the start, default 1500) allows, `history confirm`
# of the first changed night against the last good one and of two unchanged nights, on the
# job CONFIRM_JOB (default convnext_tiny training). The analysis (`history changes`, trend,
# the report) runs on a CPU from the records: $S/nightly_records.tgz (no traces, no modules).
set -u
cd "$(dirname "$0")/.."
S=${S:-/tmp/gpu}
NIGHTS=${NIGHTS:-14}
CHANGE_AT=${CHANGE_AT:-11}
DEADLINE_S=${DEADLINE_S:-1380}
CONFIRM_JOB=${CONFIRM_JOB:-model=convnext_tiny,mode=training}
mkdir -p "$S/nightly"
T0=$(date +%s)
log() { echo "[$(date +%T)] $*" | tee -a "$S/progress.log"; }
left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }

pack() {
  tar czf "$S.records.tmp" --exclude=cache --exclude=traces --exclude=modules --exclude='*trace*.json.gz' \
    --exclude='compile_artifacts.bin' --exclude='compile_seed.bin' --exclude='*.libs.tar.gz' \
    -C "$S" nightly progress.log versions.txt nvidia-smi.csv builds.txt $(cd "$S" && ls confirm_*.md 2>/dev/null) \
    && mv "$S.records.tmp" "$S/nightly_records.tgz"
}

# Two environments of the machine's torch: good, and changed (alignment hint off).
env_of() {
  local env=$1
  [ -x "$env/bin/python" ] && return
  python3 -m venv --without-pip "$env"
  local site
  site=$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  python3 -c 'import os, sys, torch; print(os.path.dirname(os.path.dirname(torch.__file__))); print("\n".join(p for p in sys.path if p.endswith("-packages")))' \
    > "$site/machine.pth"
  [ -n "${PYTHONPATH:-}" ] && echo "${PYTHONPATH//:/$'\n'}" >> "$site/machine.pth"
  if [ "${2:-}" = changed ]; then
    echo 'import os; os.environ.setdefault("TORCHINDUCTOR_DIVISIBLE_BY_16", "0")' > "$site/zz_build.pth"
  fi
}

nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv > "$S/nvidia-smi.csv" 2>&1
python3 -c 'import torch, triton, timm; print("torch", torch.__version__, "triton", triton.__version__, "timm", timm.__version__)' \
  > "$S/versions.txt" 2>&1
env_of "$S/env_good"
env_of "$S/env_changed" changed
for e in good changed; do
  "$S/env_$e/bin/python" -c 'import sys, torch._inductor.config as c, hydra, ray; print(sys.executable, "divisible_by_16", c.triton.divisible_by_16)'
done > "$S/builds.txt" 2>&1
log "builds: $(tr '\n' ' ' < "$S/builds.txt")"

grid=(+sweep=nightly model=resnet18,convnext_tiny mode=training,inference cudagraphs=off autotune=off
      batch_size=32 measure.microbench=false measure.module_span_s=2 measure.steady_loop_s=2 python=nightly)
for n in $(seq 1 "$NIGHTS"); do
  night=$(printf 'night%02d' "$n")
  [ -f "$S/nightly/$night/summary.json" ] && continue  # a resumed run keeps finished nights
  if [ "$(left)" -lt 120 ]; then log "deadline: $night and after not run"; break; fi
  env=$S/env_good; [ "$n" -ge "$CHANGE_AT" ] && env=$S/env_changed
  t=$(date +%s)
  python3 -m sweeper "${grid[@]}" +pythons.nightly="$env/bin/python" hydra.sweep.dir="$S/nightly/$night" \
    > "$S/nightly/$night.log" 2>&1
  log "$night ($(basename "$env")) rc=$? wall_s=$(( $(date +%s) - t ))"
  pack
done

confirm() {  # confirm NEW OLD NAME
  if [ "$(left)" -lt 240 ]; then log "deadline: confirm $3 not run"; return; fi
  local t=$(date +%s)
  timeout $(( $(left) - 30 )) python3 -m sweeper.history confirm "$S/nightly/$1" "$S/nightly/$2" --job "$CONFIRM_JOB" \
    --python "$S/env_good/bin/python" --python "$S/env_changed/bin/python" --out "$S/confirm_$3" > "$S/confirm_$3.md" 2>&1
  log "confirm $3 ($1 against $2) rc=$? wall_s=$(( $(date +%s) - t ))"
  cp "$S/confirm_$3/confirm.csv" "$S/confirm_$3.csv.md" 2>/dev/null
  pack
}
last_good=$(printf 'night%02d' $(( CHANGE_AT - 1 )))
first_bad=$(printf 'night%02d' "$CHANGE_AT")
confirm "$first_bad" "$last_good" changed
confirm "$last_good" "$(printf 'night%02d' $(( CHANGE_AT - 2 )))" unchanged
log ALLDONE
