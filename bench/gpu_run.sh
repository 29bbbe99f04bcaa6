#!/usr/bin/env bash
# The GPU runner: one measured topic per call, on a machine with one or more NVIDIA GPUs
# and the project's packages importable (docs/gpu.md). Everything lands under $S
# (default /tmp/gpu); progress goes to $S/progress.log; $S/bundle.tgz packs the results
# without the compile caches and traces.
#     bash bench/gpu_run.sh TOPIC
# Topics (results under bench/results/<topic>/, each write-up says what it showed):
#   fidelity      densenet121 (training, batch 16) job A, `python <module>.py -p` three
#                 times on each module it captured, jobs B and C on A's compile, then
#                 bench/compare_reference.py: sweeper against PyTorch's harness ($S/compare.md)
#   microbench    a mixnet_l job (training, batch 128), then bench/microbench_check.py: its
#                 costliest kernels against `python <kernel>.py` and the phases' cost
#   scaling       bench/gpu_scaling.py: one sweep on one GPU, then on every GPU
#   launch_speed  bench/core_probe.py: the host's launch speed per core and over time
#   busy   the busy figure against NVML's utilization: bench/nvml_probe.py, four jobs of
#          four models (resnet50 b128 training; convnext_tiny and resnext50_32x4d b16
#          training; vit_small_patch16_224 b8 inference, CUDA graphs on and off), `-p` once
#          on the modules of three of them, then the example grid (python -m sweeper
#          +sweep=example, into $S/example); results: bench/results/busy/.
#          REFERENCE=0 leaves the `-p` runs out (category shares do not depend on the busy
#          figure's divisor).
#   nightly  the same four-job sweep (resnet18, resnet50, convnext_tiny, vit_small_patch16_224;
#          batch 32 inference; the Ray launcher on every GPU) three times, each compared
#          with the one before (python -m sweeper.history compare --fail-on-regression),
#          then a fourth with bench/gpu_load.py's matmul loop on every GPU, compared with
#          --kernels; results: bench/results/nightly/.
#   headline  the mission's command as a user types it (python -m sweeper
#          model=mixnet_l,densenet121 autotune=on,off) on every GPU, from a cold start (no
#          autotune or compile store, fresh caches), then the same command again, each after
#          its dry run; bench/headline.py and a history compare of the two; results:
#          bench/results/headline/.
#   headline_model  the same for one of its models (MODEL, default mixnet_l): python -m
#          sweeper model=$MODEL autotune=on,off, cold then again.
#   data_path  bench/data_path.py: resnet18 inference, autotune on and off, two jobs a GPU, cold
#          then warm, without and with a storage folder (storage_path): the bytes through the
#          driver, where each warm job's compile came from; results: bench/results/data_path/.
#   phase_results  the same sweep (resnet18 b32 inference, autotune on and off, two jobs a
#          GPU, microbenchmarks on) by the job code of before its typed phase results (the
#          tree $OLD_TREE, a `git archive` tarball) and by this one, each cold with its own
#          stores, then this one again warm; bench/record_shapes.py compares the records job by
#          job ($S/record_shapes.md, $S/record_shapes_warm.md); results:
#          bench/results/phase_results/.
#   roofline  bench/roofs_check.py (the matmul peak per dtype and the copy bandwidth against the
#          datasheet, and their reuse), then mixnet_l b128 and densenet121 b16 training with
#          autotune off ($MODELS), cut at $SWEEP_S seconds (420), and bench/roofline_check.py:
#          each job against the roofs and the sweep's ranking ($S/ranking.md); results:
#          bench/results/roofline/.
#   builds  two Python environments of the machine's torch in one sweep (python=a,b), four
#          models (MODELS=...; SEEDS=0,1 repeats each pair), then `history compare
#          --between python`; results: bench/results/builds/.
#   headline_sitting  one sitting of the mission's command (python -m sweeper
#          model=mixnet_l,densenet121 autotune=on,off) into one sweep folder ($SWEEP, default
#          $S/headline), so that a later sitting resumes it: first the store export $IMPORT
#          if given (python -m sweeper.store import) and the sweep folder $RESUME (a
#          sweep_folder.tgz an earlier sitting made) unpacked where $SWEEP is, then the dry
#          run, then the sweep, stopped with SIGTERM (as Ctrl-C) after $DEADLINE_S seconds if
#          given; then the store exported to $S/store.tgz and the sweep folder (no traces,
#          modules or caches) packed to $S/sweep_folder.tgz, for the next sitting;
#          results: bench/results/headline/.
#   headline_again  the command again after a first run finished across sittings: the
#          store export $IMPORT imported and the first run's sweep_folder.tgz $RESUME
#          unpacked under $S/first, then the command into $S/run2 (RUNS=2: also $S/run3, on
#          the same machine, so with the compile store run2 filled), each after its dry run,
#          stopped UNTIL_S seconds after the start if given; then bench/headline.py over all
#          and `history compare --kernels` of each against the first; results:
#          bench/results/headline/.
#   warm_default  one default job (MODEL, default densenet121; autotune off, no
#          microbenchmarks) cold then again, the second's compile from the compile store the
#          first filled: what its kernels still benchmark at their first launch and why (the
#          record's compile_benchmarks); results: bench/results/compile_store/.
#   store_rerun  the same, for a smaller grid whose jobs share shapes (resnet18 batch 32
#          inference, autotune on,off x CUDA graphs off,on): the store's round trip, the
#          order, the second run seeded; results: bench/results/autotune_store/.
#   packing  one GPU kept busy (hydra.launcher.jobs_per_gpu): the store export $IMPORT
#          (default tests/fixtures/h200/headline_store.tgz) imported, then the mission's
#          command packed (auto) into $S/packed_run2 (the store-imported second run of a
#          fresh machine), packed into $S/packed_night (every compile from the compile
#          store the packed run filled), one job a GPU (jobs_per_gpu=1) into
#          $S/serial_night and packed without pausing the other jobs while one times
#          (pause_while_timing=false; UNPAUSED=0 leaves it out) into $S/unpaused_night;
#          each after its dry run, with nvidia-smi's utilization at 1 s ($S/smi_<run>.csv);
#          then `history compare --kernels` of each packed run against the one-job night,
#          and bench/gpu_idle.py. GRID="packed serial serial2" (any of them, in order) adds
#          a cold max-autotune grid (GRID_MODELS, default resnet18, e.g. resnet18,resnet50;
#          b32 inference, autotune on,off x CUDA graphs off,on; a store of each run's own, no
#          compile store) packed, one job a GPU, and one job a GPU again, and
#          bench/store_diff.py of the one-job store against each other; NIGHTS=0 runs the
#          grid only (no store import, none of the mission's command's runs);
#          stopped UNTIL_S seconds after the start if given; results:
#          bench/results/packing/.
#   model_code  mixnet_l (b128) and densenet121 (b16) training, autotune off (MODELS,
#          AUTOTUNE=on,off to change), cold then again (the second from the compile store;
#          RUNS=cold for the first only),
#          each followed by bench/model_code_check.py; results: bench/results/model_code/.
#   attribution  bench/attribution_check.py on mixnet_l (b128) and densenet121 (b16) training
#          (MODELS="model:batch ..."), CUDA graphs off and on, all at once, and one sweeper job
#          of the first; results: bench/results/model_code/attribution_check_*.md.
#   example_report  docs/example-report from a GPU run of today's code: the mission's command
#          (python -m sweeper model=mixnet_l,densenet121 autotune=on,off) into $S/example, on an
#          H200 first importing the committed H200 autotune store ($IMPORT, default
#          tests/fixtures/h200/headline_store.tgz: the store's keys hold the GPU model, so on
#          another GPU every max-autotune compile is cold, about 66 minutes of job time: run
#          headline_sitting across sittings instead, then bench/example_report.py over its
#          folder), stopped at $DEADLINE_S if given; then `python bench/example_report.py
#          headline --records $S/example --out $S/example-report`; results: docs/example-report
#          (copy $S/example-report over it) and bench/results/headline/.
#   isolation_check  bench/isolation_check.py: MODEL (resnet50) at BATCH (64), the LAYERS
#          (layer1.0,layer2.0,layer3.0) each compiled by default and with max-autotune, and each
#          of their convolutions alone, eager (the library call) and with max-autotune: does
#          the regret table's benchmark-only win hold when timed again outside the model
#          ($S/isolation_check.md, .json); results: bench/results/autotune_advice/.
#   autotune_aa  max-autotune's run-to-run noise layer by layer: MODEL (default resnet50) in MODE
#          (inference) at BATCH (64), autotune on and off, each twice (seed=0,1), one job at a
#          time (the second autotune=on job seeded from the store the first filled: its
#          decisions from the store on a GPU), cold otherwise (a store of its own, no compile
#          store; STORE_FROM=<an earlier run's store folder> seeds both); then
#          bench/autotune_findings.py over it ($S/autotune_findings.md: one verdict, regret
#          table and advice for the pair of settings, their repeats' median against their
#          spread); results: bench/results/autotune_advice/.
#   autotune_parts  max-autotune's two parts apart (python -m sweeper +sweep=autotune_parts: off, on,
#          the templates alone, the kernel configs alone) on MODEL (default resnet50) in MODE
#          (inference) at BATCH (64), cold (a store of its own, no compile store), packed as
#          the launcher chooses; then bench/autotune_findings.py over it ($S/autotune_findings.md:
#          each pair's verdict, where it loses, what to turn on and that part's own job checked);
#          results: bench/results/autotune_advice/.
# A run longer than one sitting can go to the background:
#     S=/tmp/gpu setsid bash bench/gpu_run.sh busy > /tmp/gpu.log 2>&1 &
set -u
cd "$(dirname "$0")/.."
S=${S:-/tmp/gpu}
mkdir -p "$S"

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

fidelity() {
  cached_job denA densenet121
  python3 bench/run_reference.py --runs 3 "$S/denA/run/0" > "$S/denA_reference.log" 2>&1
  log "reference runs rc=$?"
  cached_job denB densenet121
  cached_job denC densenet121
  python3 bench/compare_reference.py "$S/denA/run/0,$S/denB/run/0,$S/denC/run/0" > "$S/compare.md" 2>&1
  log "compare rc=$?"
  bundle
}

microbench() {
  python3 -m sweeper hydra.launcher.jobs_per_gpu=1 model=mixnet_l hydra.sweep.dir="$S/mixnet" > "$S/mixnet.log" 2>&1
  log "mixnet_l job rc=$?"
  python3 bench/microbench_check.py "$S/mixnet/0" > "$S/microbench_check.md" 2>&1
  log "microbench check rc=$?"
  bundle
}

scaling() {
  python3 bench/gpu_scaling.py --out-dir "$S/scaling" model=resnet18,resnet34 autotune=on,off mode=inference \
    batch_size=32 > "$S/scaling.md" 2>&1
  log "scaling rc=$?"
  bundle
}

launch_speed() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate,utilization.gpu \
    --format=csv -lms 200 > "$S/clocks.csv" 2>&1 &
  python3 bench/core_probe.py > "$S/core_probe.md" 2>&1
  log "core probe rc=$?"
  python3 bench/launch_windows.py "$S/core_probe.md" > "$S/launch_windows.md" 2>&1
  log "launch windows rc=$?"
  bundle
}

busy() {
  CUDA_VISIBLE_DEVICES=0 python3 bench/nvml_probe.py > "$S/nvml_probe.md" 2> "$S/nvml_probe.err"
  log "nvml_probe rc=$?"
  local second=$(( $(nvidia-smi -L | wc -l) > 1 ? 1 : 0 ))  # two tracks on two GPUs, else one after the other
  {
    gpu_sweep 0 resnet50 model=resnet50 batch_size=128
    gpu_sweep 0 vit model=vit_small_patch16_224 batch_size=8 mode=inference cudagraphs=on,off
    if [ "${REFERENCE:-1}" = 1 ]; then
      CUDA_VISIBLE_DEVICES=0 python3 bench/run_reference.py --runs 1 "$S/vit/1" > "$S/vit_reference.log" 2>&1
      log "vit -p rc=$?"
    fi
  } &
  {
    gpu_sweep $second small model=convnext_tiny,resnext50_32x4d batch_size=16
    if [ "${REFERENCE:-1}" = 1 ]; then
      CUDA_VISIBLE_DEVICES=$second python3 bench/run_reference.py --runs 1 "$S/small/0" "$S/small/1" \
        > "$S/small_reference.log" 2>&1
      log "convnext/resnext -p rc=$?"
    fi
  } &
  wait
  for d in resnet50 vit small; do python3 -m sweeper.aggregate "$S/$d" > "$S/${d}_aggregate.log" 2>&1; done
  if [ "${REFERENCE:-1}" = 1 ]; then
    python3 bench/compare_reference.py "$S/small/0" "$S/small/1" "$S/vit/1" > "$S/compare.md" 2>&1
    log "compare rc=$?"
  fi
  bundle
  python3 -m sweeper +sweep=example hydra.sweep.dir="$S/example" > "$S/example.log" 2>&1
  log "example rc=$?"
  python3 bench/busy_check.py "$S/example" "$S/resnet50" "$S/vit" "$S/small" > "$S/busy_jobs.md" 2>&1
  log "busy_check rc=$?"
  bundle
}

nightly() {
  local grid=(model=resnet18,resnet50,convnext_tiny,vit_small_patch16_224 batch_size=32 mode=inference
              measure.microbench=false)
  for n in 1 2 3 4; do
    local load=""
    if [ $n = 4 ]; then
      python3 bench/gpu_load.py --seconds 900 > "$S/gpu_load.log" 2>&1 &
      load=$!
      sleep 20  # the load is running before the sweep starts
    fi
    python3 -m sweeper "${grid[@]}" hydra.sweep.dir="$S/nightly/night$n" > "$S/night$n.log" 2>&1
    log "night$n rc=$?"
    [ -n "$load" ] && { pkill -P "$load"; kill "$load"; }
    if [ $n -gt 1 ]; then
      python3 -m sweeper.history compare "$S/nightly/night$n" --fail-on-regression --out "$S/compare$n" \
        $([ $n = 4 ] && echo --kernels) > "$S/compare$n.md" 2>&1
      log "compare night$n rc=$?"
    fi
    bundle
  done
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

headline() { twice model=mixnet_l,densenet121 autotune=on,off; }
headline_model() { twice model="${MODEL:-mixnet_l}" autotune=on,off; }

# Two Python environments of the machine's one torch (a second virtualenv that sees the
# machine's packages): one sweep pairing them on the same GPU, and the builds' compare.
builds() {
  # a venv of its own that sees the machine's packages through a .pth file (where torch lies
  # need not be the interpreter's system site-packages: --system-site-packages missed it)
  python3 -m venv --without-pip "$S/env_b"
  python3 -c 'import os, sys, torch; print(os.path.dirname(os.path.dirname(torch.__file__))); print("\n".join(p for p in sys.path if p.endswith("-packages")))' \
    > "$("$S/env_b/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/machine.pth"
  python3 -m sweeper model="${MODELS:-resnet18,resnet50,convnext_tiny,vit_small_patch16_224}" seed="${SEEDS:-0}" \
    batch_size=32 mode=inference python=a,b +pythons.a="$(command -v python3)" +pythons.b="$S/env_b/bin/python" measure.microbench=false \
    hydra.sweep.dir="$S/builds" > "$S/builds.log" 2>&1
  log "builds sweep rc=$?"
  python3 -m sweeper.history compare "$S/builds" --between python --kernels --top 5 > "$S/builds_compare.md" 2>&1
  log "compare rc=$?"
  drop_traces "$S/builds"
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

headline_cmd=(python3 -m sweeper model=mixnet_l,densenet121 autotune=on,off)

headline_sitting() {
  local sweep=${SWEEP:-$S/headline} deadline=${DEADLINE_S:-0}
  [ -n "${IMPORT:-}" ] && store_import "$IMPORT"
  if [ -n "${RESUME:-}" ]; then
    mkdir -p "$(dirname "$sweep")" && tar xzf "$RESUME" -C "$(dirname "$sweep")"
    log "sweep folder $RESUME unpacked rc=$?"
  fi
  python3 -m sweeper.store show > "$S/store_before.txt" 2>&1
  "${headline_cmd[@]}" hydra.sweep.dir="$sweep" dry_run=true > "$S/dry_run.log" 2>&1
  run_until $([ "$deadline" -gt 0 ] && echo $(( $(date +%s) + deadline )) || echo 0) "$S/sitting.log" \
    "${headline_cmd[@]}" hydra.sweep.dir="$sweep"
  store_export
  drop_traces "$sweep"
  tar czf "$S/sweep_folder.tgz" --exclude=cache -C "$(dirname "$sweep")" "$(basename "$sweep")"
  bundle
}

# The command again after a first run finished across sittings: that run's folder ($RESUME,
# its sweep_folder.tgz) and the store it left ($IMPORT), then the command into a new folder
# $RUNS times (default 1; run2, run3, ...: on this machine the second of them also finds
# the compile store the first filled), stopped UNTIL_S seconds after the start if given;
# then bench/headline.py over all of them and each one's kernel compare with the first.
headline_again() {
  local end=0 first="$S/first" dirs=()
  [ -n "${UNTIL_S:-}" ] && end=$(( $(date +%s) + UNTIL_S ))
  store_import "$IMPORT"
  mkdir -p "$first" && tar xzf "$RESUME" -C "$first"
  log "first run's folder $RESUME unpacked rc=$?"
  dirs+=("$first/$(tar tzf "$RESUME" | head -1 | cut -d/ -f1)")
  for n in $(seq 2 $(( 1 + ${RUNS:-1} ))); do
    [ "$end" -gt 0 ] && [ "$(date +%s)" -ge "$end" ] && break
    "${headline_cmd[@]}" hydra.sweep.dir="$S/run$n" dry_run=true > "$S/run${n}_dry_run.log" 2>&1
    run_until "$end" "$S/run$n.log" "${headline_cmd[@]}" hydra.sweep.dir="$S/run$n"
    drop_traces "$S/run$n"
    dirs+=("$S/run$n")
    bundle
  done
  python3 bench/headline.py "${dirs[@]}" > "$S/headline.md" 2>&1
  log "headline.py rc=$?"
  for d in "${dirs[@]:1}"; do
    python3 -m sweeper.history compare "$d" "${dirs[0]}" --kernels --out "$S/compare_$(basename "$d")" \
      > "$S/compare_$(basename "$d").md" 2>&1
    log "compare $(basename "$d") rc=$?"
  done
  store_export
  bundle
}

warm_default() { twice model="${MODEL:-densenet121}" autotune=off measure.microbench=false; }
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
roofline() {
  [ -s "$S/roofs.md" ] || python3 bench/roofs_check.py > "$S/roofs.md" 2>&1
  log "roofs rc=$?"
  rm -rf ~/.cache/sweeper/autotune ~/.cache/sweeper/compile outputs
  local t0=$(date +%s)
  timeout "${SWEEP_S:-420}" python3 -m sweeper model="${MODELS:-mixnet_l,densenet121}" autotune=off \
    measure.microbench=false hydra.sweep.dir="$S/pair" > "$S/pair.log" 2>&1
  log "pair rc=$? wall_s=$(( $(date +%s) - t0 ))"
  python3 -m sweeper.aggregate "$S/pair" >> "$S/pair.log" 2>&1  # again, should the timeout have cut the sweep's own
  python3 bench/roofline_check.py "$S/pair" > "$S/ranking.md" 2>&1
  log "ranking rc=$?"
  drop_traces "$S/pair"
  bundle
}
store_rerun() { twice model=resnet18 mode=inference batch_size=32 autotune=on,off cudagraphs=off,on; }

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

autotune_parts() {
  local m=${MODEL:-resnet50}
  python3 -m sweeper +sweep=autotune_parts model="$m" mode="${MODE:-inference}" batch_size="${BATCH:-64}" \
    autotune_store="$S/store" compile_store=off "yes=true" hydra.sweep.dir="$S/parts" > "$S/parts.log" 2>&1
  log "autotune_parts $m rc=$?"
  python3 bench/autotune_findings.py "$S/parts" > "$S/autotune_findings.md" 2>&1
  drop_traces "$S/parts"
  bundle
}

isolation_check() {
  python3 bench/isolation_check.py --model "${MODEL:-resnet50}" --batch "${BATCH:-64}" \
    --layers "${LAYERS:-layer1.0,layer2.0,layer3.0}" --json "$S/isolation_check.json" \
    > "$S/isolation_check.md" 2> "$S/isolation_check.err"
  log "isolation_check rc=$?"
  bundle
}

example_report() {
  if nvidia-smi -L | grep -q H200; then
    store_import "${IMPORT:-tests/fixtures/h200/headline_store.tgz}"
  else
    log "not an H200: the committed store does not seed this GPU's compiles (cold, about 66 min of job time)"
  fi
  local t0=$(date +%s) deadline=${DEADLINE_S:-0}
  "${headline_cmd[@]}" hydra.sweep.dir="$S/example" dry_run=true > "$S/example_dry_run.log" 2>&1
  run_until $([ "$deadline" -gt 0 ] && echo $(( t0 + deadline )) || echo 0) "$S/example.log" \
    "${headline_cmd[@]}" hydra.sweep.dir="$S/example"
  log "mission command rc=$? wall_s=$(( $(date +%s) - t0 ))"
  python3 bench/example_report.py headline --records "$S/example" --out "$S/example-report" \
    > "$S/example_report.log" 2>&1
  log "example report rc=$?"
  drop_traces "$S/example"
  tar czf "$S/example_records.tgz" -C "$S" example 2>/dev/null
  bundle
}

autotune_aa() {
  local m=${MODEL:-resnet50}
  if [ -n "${STORE_FROM:-}" ]; then  # an earlier run's store folder: every autotune=on job seeded
    mkdir -p "$S/store" && cp -r "$STORE_FROM"/. "$S/store/"
    log "store from $STORE_FROM"
  fi
  python3 -m sweeper model="$m" mode="${MODE:-inference}" batch_size="${BATCH:-64}" autotune=on,off seed=0,1 \
    hydra.launcher.jobs_per_gpu=1 autotune_store="$S/store" compile_store=off "yes=true" hydra.sweep.dir="$S/aa" \
    > "$S/aa.log" 2>&1
  log "autotune_aa $m rc=$?"
  python3 bench/autotune_findings.py "$S/aa" > "$S/autotune_findings.md" 2>&1
  drop_traces "$S/aa"
  bundle
}

machine_info
log "start ${1:-}"
case "${1:-}" in
  fidelity|microbench|scaling|launch_speed|busy|nightly|headline|headline_model|headline_sitting|headline_again|store_rerun|warm_default|builds|packing|model_code|roofline|data_path|phase_results|attribution|autotune_parts|autotune_aa|example_report|isolation_check) "$1" ;;
  *) echo "usage: bash bench/gpu_run.sh fidelity|microbench|scaling|launch_speed|busy|nightly|headline|headline_model|headline_sitting|headline_again|store_rerun|warm_default|builds|packing|model_code|roofline|data_path|phase_results|attribution|autotune_parts|autotune_aa|example_report|isolation_check" >&2; exit 2 ;;
esac
log ALLDONE
