#!/usr/bin/env bash
# store_rerun: the same, for a smaller grid whose jobs share shapes (resnet18 batch 32 inference, autotune
# on,off x CUDA graphs off,on): the store's round trip, the order, the second run seeded;
# results: bench/results/autotune_store/.
#     bash bench/gpu_run.sh store_rerun     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

store_rerun() { twice model=resnet18 mode=inference batch_size=32 autotune=on,off cudagraphs=off,on; }

run_topic store_rerun
