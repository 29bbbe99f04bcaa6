#!/usr/bin/env bash
# Every GPU run of the third H200 session (issues 2, 3, 5 and 6), on a two-GPU H200
# machine, from a copy of the repo after the set-up in docs/gpu.md. It outlives one device
# call, so start it in the background and poll $S/progress.log:
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session3.sh > /tmp/gpu.log 2>&1 &
# Everything lands under $S; $S/bundle.tgz holds it all but the compile caches and traces,
# $S/traces.tgz the example sweep's traces.
. "$(dirname "$0")/gpu_session_lib.sh"
machine_info
log start

# 1. Issue 5's example sweep through the Ray launcher on both GPUs: mixnet_l and
#    densenet121 with CUDA graphs off and on, resnet18 with max-autotune off and on
#    (conf/sweep/example.yaml). Microbenchmarks are on (issue 3). Its two cudagraphs=off
#    jobs are issue 2's mixnet_l (training, fp16, batch 128) and densenet121 (batch 16).
python3 -m sweeper +sweep=example hydra.sweep.dir="$S/example" > "$S/example.log" 2>&1
log "example sweep rc=$?"
job_dir() {  # the job folder of one case of the example sweep
  python3 -c "import json,sys; s=json.load(open('$S/example/summary.json'))
print(next(j['dir'] for j in s['jobs'] if '+case=$1' in j['overrides']))"
}
MIX=$(job_dir mixnet_l-graphs_off); DEN=$(job_dir densenet121-graphs_off)
log "mixnet_l job $MIX, densenet121 job $DEN"

# 2. Two tracks, one per GPU. The reference harness three times on the modules each job
#    captured (issue 2); then, on GPU 0, issue 3's kernel check (python <kernel>.py on the
#    costliest three kernels, and the speed target); on GPU 1, issue 6's OOM sweep and the
#    autotune store measurement (issue 3).
track_a() {
  CUDA_VISIBLE_DEVICES=0 python3 bench/run_reference.py --runs 3 "$MIX" > "$S/mixnet_reference.log" 2>&1
  log "A: mixnet_l reference rc=$?"
  CUDA_VISIBLE_DEVICES=0 python3 bench/microbench_check.py "$MIX" > "$S/microbench_check.md" 2>&1
  log "A: microbench check rc=$?"
}
track_b() {
  CUDA_VISIBLE_DEVICES=1 python3 bench/run_reference.py --runs 3 "$DEN" > "$S/densenet_reference.log" 2>&1
  log "B: densenet121 reference rc=$?"
  CUDA_VISIBLE_DEVICES=1 python3 -m sweeper model=resnet18 batch_size=32,100000 hydra.sweep.dir="$S/oom" > "$S/oom.log" 2>&1
  log "B: oom sweep rc=$? (1 expected: one job failed)"
  CUDA_VISIBLE_DEVICES=1 python3 -m sweeper model=resnet18 mode=inference batch_size=32 autotune=on cudagraphs=off,on \
    autotune_store="$S/store" hydra.sweep.dir="$S/store_sweep" > "$S/store_sweep.log" 2>&1
  log "B: autotune store sweep rc=$?"
  python3 bench/autotune_store_check.py "$S/store_sweep" > "$S/autotune_store.md" 2>&1
}
track_a &
track_b &
wait
python3 bench/compare_reference.py "$MIX" "$DEN" --json="$S/compare.json" > "$S/compare.md" 2>&1
log "compare rc=$?"
bundle
tar czf "$S/traces.tgz" -C "$S" $(cd "$S" && find example -name '*trace*.json.gz' | head -200) 2>/dev/null
ls -la "$S"/*.tgz >> "$S/progress.log"
log ALLDONE
