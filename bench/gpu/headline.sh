#!/usr/bin/env bash
# headline: the mission's command as a user types it (python -m sweeper model=mixnet_l,densenet121
# autotune=on,off) on every GPU, from a cold start (no autotune or compile store, fresh
# caches), then the same command again, each after its dry run; bench/headline.py and a
# history compare of the two; results: bench/results/headline/.
#     bash bench/gpu_run.sh headline     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

headline() { twice model=mixnet_l,densenet121 autotune=on,off; }

run_topic headline
