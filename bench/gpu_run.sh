#!/usr/bin/env bash
# The GPU runner: one measured topic per call, on a machine with one or more NVIDIA GPUs and
# the project's packages importable (docs/gpu.md). Each topic is a short script of its own,
# bench/gpu/<topic>.sh (its first lines say what it measures and where its results go),
# sharing bench/gpu/lib.sh. Everything lands under $S (default /tmp/gpu); progress goes to
# $S/progress.log (ALLDONE at the end); $S/bundle.tgz packs the results without the compile
# caches and traces.
#     bash bench/gpu_run.sh TOPIC
#     bash bench/gpu_run.sh            # the topics, one line each
# A run longer than one sitting can go to the background:
#     S=/tmp/gpu setsid bash bench/gpu_run.sh busy > /tmp/gpu.log 2>&1 &
here=$(dirname "$0")/gpu
topic=${1:-}
if [ -n "$topic" ] && [ -f "$here/$topic.sh" ] && [ "$topic" != lib ]; then
  exec bash "$here/$topic.sh"
fi
[ -n "$topic" ] && echo "gpu_run.sh: no topic '$topic'" >&2
echo "usage: bash bench/gpu_run.sh TOPIC, one of:" >&2
for f in "$here"/*.sh; do
  [ "$(basename "$f")" = lib.sh ] && continue
  sed -n '2s/^# //p' "$f" | cut -c1-110 >&2
done
exit 2
