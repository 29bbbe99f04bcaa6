#!/usr/bin/env bash
# busy: the busy figure against NVML's utilization: bench/nvml_probe.py, four jobs of four models
# (resnet50 b128 training; convnext_tiny and resnext50_32x4d b16 training;
# vit_small_patch16_224 b8 inference, CUDA graphs on and off), `-p` once on the modules of
# three of them, then the example grid (python -m sweeper +sweep=example, into $S/example);
# results: bench/results/busy/. REFERENCE=0 leaves the `-p` runs out (category shares do not
# depend on the busy figure's divisor).
#     bash bench/gpu_run.sh busy     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

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

run_topic busy
