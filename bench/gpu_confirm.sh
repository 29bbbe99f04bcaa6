#!/usr/bin/env bash
# The GPU's state in a job's record, and `history confirm` on a GPU: no Ray, no Hydra (a
# job folder from a job.json, as the launcher writes it). Everything lands under $S.
#   S=/tmp/gpu bash bench/gpu_confirm.sh
# 1. bench/gpu_state_capture.py: NVML's answers a stretch over a heating matmul loop;
# 2. one job (resnet18 b32 inference, bench/gpu_confirm_base.json) by python -m tasks.job:
#    its record's timings.steady_loop.gpu_rounds and gpu_state;
# 3. confirm: that job with CUDA graphs on against off (two settings), and off against off
#    (A/A), 10 rounds each in turn.
set -uo pipefail
S=${S:-/tmp/gpu}; DEVICE=${DEVICE:-cuda}; IMAGE=${IMAGE:-224}
mkdir -p "$S/jobs"
[ "$DEVICE" = cuda ] && timeout 150 python3 bench/gpu_state_capture.py --seconds ${HEAT_S:-40} --out "$S/gpu_state.json" 2>&1 | tail -5
for j in off on; do
  mkdir -p "$S/jobs/$j"
  python3 - "$S/jobs/$j" "$j" "$DEVICE" "$IMAGE" <<'PY'
import json, sys
c = json.load(open("bench/gpu_confirm_base.json"))
c.update(cudagraphs=sys.argv[2] == "on", device=sys.argv[3], image_size=int(sys.argv[4]))
json.dump({"job_id": sys.argv[2], "overrides": [f"cudagraphs={sys.argv[2]}"], "config": c}, open(sys.argv[1] + "/job.json", "w"))
PY
done
timeout 240 python3 -m tasks.job "$S/jobs/off" > "$S/jobs/off/job.log" 2>&1; echo "job: exit $?"
grep -a "GPU state\|NVML\|status" "$S/jobs/off/job.log" | tail -4
python3 - "$S/jobs/off/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); t = r["timings"].get("steady_loop") or {}
print("status", r["status"], r.get("reason")); print("gpu_state", json.dumps(t.get("gpu_state"))[:600])
print("gpu_rounds", len(t.get("gpu_rounds") or []), json.dumps((t.get("gpu_rounds") or [None])[0]))
PY
rm -f "$S/jobs/off/result.json"  # confirm the job.json folders, both afresh
for pair in "on off" "off off"; do
  set -- $pair
  timeout 200 python3 -m sweeper.history confirm "$S/jobs/$1" "$S/jobs/$2" --rounds 10 --out "$S/confirm_$1_$2" 2>&1 | grep -v "phase" | tail -4
done
