#!/usr/bin/env bash
# On the GPU machine, between calls of a long background run: wait up to $1 seconds (or until
# the run's progress log says ALLDONE), then copy what it packed to $OUT.
# bash bench/device/poll.sh SECONDS PROGRESS_LOG FILE...
end=$(( $(date +%s) + $1 )); log=$2; shift 2
while [ "$(date +%s)" -lt "$end" ] && ! grep -q ALLDONE "$log" 2>/dev/null; do sleep 10; done
cat "$log" 2>/dev/null
for f in "$@"; do [ -f "$f" ] && cp "$f" "$OUT/"; done
