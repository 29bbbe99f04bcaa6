#!/usr/bin/env bash
# One lent GPU's sitting for the issue on real GPU runs, in the background:
#     TOTAL_S=1380 setsid bash bench/device/session.sh > /tmp/session.log 2>&1 &
# On an H200 first the flagship (bench/gpu_run.sh example_report: the committed H200 autotune
# store imported, the mission's command, the example report), stopped at FLAG_S seconds;
# on any GPU then the real nightly history (bench/nightly_history.sh) in the time left.
# Each leaves a tarball: /tmp/gpu/flag/bundle.tgz, /tmp/gpu/night/nightly_records.tgz.
cd "$(dirname "$0")/../.."
T0=$(date +%s)
TOTAL_S=${TOTAL_S:-1380}
mkdir -p /tmp/gpu
if nvidia-smi -L | grep -q H200; then
  S=/tmp/gpu/flag DEADLINE_S=${FLAG_S:-480} bash bench/gpu_run.sh example_report
fi
S=/tmp/gpu/night DEADLINE_S=$(( TOTAL_S - ($(date +%s) - T0) )) NIGHTS=${NIGHTS:-12} CHANGE_AT=${CHANGE_AT:-8} \
  bash bench/nightly_history.sh
echo SESSIONDONE >> /tmp/gpu/night/progress.log
