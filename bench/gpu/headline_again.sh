#!/usr/bin/env bash
# headline_again: the command again after a first run finished across sittings: the store export $IMPORT
# imported and the first run's sweep_folder.tgz $RESUME unpacked under $S/first, then the
# command into $S/run2 (RUNS=2: also $S/run3, on the same machine, so with the compile store
# run2 filled), each after its dry run, stopped UNTIL_S seconds after the start if given; then
# bench/headline.py over all and `history compare --kernels` of each against the first;
# results: bench/results/headline/.
#     bash bench/gpu_run.sh headline_again     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The command again after a first run finished across sittings: that run's folder ($RESUME,
# its sweep_folder.tgz) and the store it left ($IMPORT), then the command into a new folder
# $RUNS times (default 1; run2, run3, ...: on this machine the second of them also finds
# the compile store the first filled), stopped UNTIL_S seconds after the start if given;
# then bench/headline.py over all of them and each one's kernel compare with the first.
headline_again() {
  local end=0 first="$S/first" dirs=()
  [ -n "${UNTIL_S:-}" ] && end=$(( $(date +%s) + UNTIL_S ))
  store_import "$IMPORT"
  mkdir -p "$first" && tar xzf "$RESUME" -C "$first"
  log "first run's folder $RESUME unpacked rc=$?"
  dirs+=("$first/$(tar tzf "$RESUME" | head -1 | cut -d/ -f1)")
  for n in $(seq 2 $(( 1 + ${RUNS:-1} ))); do
    [ "$end" -gt 0 ] && [ "$(date +%s)" -ge "$end" ] && break
    "${headline_cmd[@]}" hydra.sweep.dir="$S/run$n" dry_run=true > "$S/run${n}_dry_run.log" 2>&1
    run_until "$end" "$S/run$n.log" "${headline_cmd[@]}" hydra.sweep.dir="$S/run$n"
    drop_traces "$S/run$n"
    dirs+=("$S/run$n")
    bundle
  done
  python3 bench/headline.py "${dirs[@]}" > "$S/headline.md" 2>&1
  log "headline.py rc=$?"
  for d in "${dirs[@]:1}"; do
    python3 -m sweeper.history compare "$d" "${dirs[0]}" --kernels --out "$S/compare_$(basename "$d")" \
      > "$S/compare_$(basename "$d").md" 2>&1
    log "compare $(basename "$d") rc=$?"
  done
  store_export
  bundle
}

run_topic headline_again
