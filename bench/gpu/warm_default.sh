#!/usr/bin/env bash
# warm_default: one default job (MODEL, default densenet121; autotune off, no microbenchmarks) cold then
# again, the second's compile from the compile store the first filled: what its kernels still
# benchmark at their first launch and why (the record's compile_benchmarks); results:
# bench/results/compile_store/.
#     bash bench/gpu_run.sh warm_default     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

warm_default() { twice model="${MODEL:-densenet121}" autotune=off measure.microbench=false; }

run_topic warm_default
