#!/usr/bin/env bash
# headline_model: the same for one of its models (MODEL, default mixnet_l): python -m sweeper model=$MODEL
# autotune=on,off, cold then again.
#     bash bench/gpu_run.sh headline_model     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

headline_model() { twice model="${MODEL:-mixnet_l}" autotune=on,off; }

run_topic headline_model
