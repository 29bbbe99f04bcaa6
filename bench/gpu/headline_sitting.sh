#!/usr/bin/env bash
# headline_sitting: one sitting of the mission's command (python -m sweeper model=mixnet_l,densenet121
# autotune=on,off) into one sweep folder ($SWEEP, default $S/headline), so that a later
# sitting resumes it: first the store export $IMPORT if given (python -m sweeper.store import)
# and the sweep folder $RESUME (a sweep_folder.tgz an earlier sitting made) unpacked where
# $SWEEP is, then the dry run, then the sweep, stopped with SIGTERM (as Ctrl-C) after
# $DEADLINE_S seconds if given; then the store exported to $S/store.tgz and the sweep folder
# (no traces, modules or caches) packed to $S/sweep_folder.tgz, for the next sitting; results:
# bench/results/headline/.
#     bash bench/gpu_run.sh headline_sitting     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

headline_sitting() {
  local sweep=${SWEEP:-$S/headline} deadline=${DEADLINE_S:-0}
  [ -n "${IMPORT:-}" ] && store_import "$IMPORT"
  if [ -n "${RESUME:-}" ]; then
    mkdir -p "$(dirname "$sweep")" && tar xzf "$RESUME" -C "$(dirname "$sweep")"
    log "sweep folder $RESUME unpacked rc=$?"
  fi
  python3 -m sweeper.store show > "$S/store_before.txt" 2>&1
  "${headline_cmd[@]}" hydra.sweep.dir="$sweep" dry_run=true > "$S/dry_run.log" 2>&1
  run_until $([ "$deadline" -gt 0 ] && echo $(( $(date +%s) + deadline )) || echo 0) "$S/sitting.log" \
    "${headline_cmd[@]}" hydra.sweep.dir="$sweep"
  store_export
  drop_traces "$sweep"
  tar czf "$S/sweep_folder.tgz" --exclude=cache -C "$(dirname "$sweep")" "$(basename "$sweep")"
  bundle
}

run_topic headline_sitting
