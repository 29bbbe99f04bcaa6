#!/usr/bin/env bash
# Session 7's third H200 call: issue 2's CUDA-graphs check again with this session's
# module loop (modules timed in turn; under cudagraphs=on the module view is skipped
# before the rounds). resnet18 training, batch 32, cudagraphs off then on, no
# microbenchmarks: the step-level busy percentage should rise with graphs on (hand-run:
# about 16% to 54%; session 2: bench/results/h200_session2.md).
#     cp -r . /tmp/repo && cd /tmp/repo && S=/tmp/gpu setsid bash bench/h200_session7c.sh > /tmp/gpu.log 2>&1 &
. "$(dirname "$0")/gpu_session_lib.sh"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
machine_info
log start
python3 -m sweeper hydra/launcher=basic model=resnet18 batch_size=32 cudagraphs=off,on measure.microbench=false \
  hydra.sweep.dir="$S/graphs" > "$S/graphs.log" 2>&1
log "resnet18 cudagraphs off,on rc=$?"
python3 -m sweeper.aggregate "$S/graphs" > "$S/graphs_aggregate.log" 2>&1
log "aggregate rc=$?"; bundle
log ALLDONE
