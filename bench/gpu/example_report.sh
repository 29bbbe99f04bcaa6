#!/usr/bin/env bash
# example_report: docs/example-report from a GPU run of today's code: the mission's command (python -m sweeper
# model=mixnet_l,densenet121 autotune=on,off) into $S/example, on an H200 first importing the
# committed H200 autotune store ($IMPORT, default tests/fixtures/h200/headline_store.tgz: the
# store's keys hold the GPU model, so on another GPU every max-autotune compile is cold, about
# 66 minutes of job time: run headline_sitting across sittings instead, then
# bench/example_report.py over its folder), stopped at $DEADLINE_S if given; then `python
# bench/example_report.py headline --records $S/example --out $S/example-report`; results:
# docs/example-report (copy $S/example-report over it) and bench/results/headline/.
#     bash bench/gpu_run.sh example_report     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

example_report() {
  if nvidia-smi -L | grep -q H200; then
    store_import "${IMPORT:-tests/fixtures/h200/headline_store.tgz}"
  else
    log "not an H200: the committed store does not seed this GPU's compiles (cold, about 66 min of job time)"
  fi
  local t0=$(date +%s) deadline=${DEADLINE_S:-0}
  "${headline_cmd[@]}" hydra.sweep.dir="$S/example" dry_run=true > "$S/example_dry_run.log" 2>&1
  run_until $([ "$deadline" -gt 0 ] && echo $(( t0 + deadline )) || echo 0) "$S/example.log" \
    "${headline_cmd[@]}" hydra.sweep.dir="$S/example"
  log "mission command rc=$? wall_s=$(( $(date +%s) - t0 ))"
  python3 bench/example_report.py headline --records "$S/example" --out "$S/example-report" \
    > "$S/example_report.log" 2>&1
  log "example report rc=$?"
  drop_traces "$S/example"
  tar czf "$S/example_records.tgz" -C "$S" example 2>/dev/null
  bundle
}

run_topic example_report
