#!/usr/bin/env bash
# The H200 runs behind issue 2's figures (bench/results/h200_issue2.md). Run from the repo
# root on the GPU machine after the set-up in docs/gpu.md (hydra-core, omegaconf and
# antlr4 wheels: the sweeps use Hydra's basic launcher, so Ray is not needed):
#     S=/tmp/gpu setsid bash bench/h200_issue2.sh > /tmp/gpu.log 2>&1 &
# Writes everything under $S and a bundle $S/bundle.tgz (caches left out).
BUNDLE_KEEP_TRACES=1  # this run bundled its traces too
. "$(dirname "$0")/gpu_session_lib.sh"
log start
# 1. CUDA graphs off and on: resnet18 training, batch 32 (by hand: busy ~16% -> ~54%).
python3 -m sweeper hydra/launcher=basic model=resnet18 batch_size=32 cudagraphs=off,on hydra.sweep.dir="$S/resnet18" > "$S/resnet18.log" 2>&1
log "resnet18 done rc=$?"
# 2. mixnet_l (training, fp16 AMP, batch 128, no CUDA graphs) and densenet121 at batch 16.
python3 -m sweeper hydra/launcher=basic model=mixnet_l,densenet121 hydra.sweep.dir="$S/main" > "$S/main.log" 2>&1
log "main done rc=$?"
# 3. The reference harness, 3 fresh-process runs of `python <module>.py -p` per module.
python3 bench/run_reference.py --runs 3 "$S/main/0" "$S/main/1" "$S/resnet18/0" > "$S/reference.log" 2>&1
log "reference done rc=$?"
# 4. Two repeats of each job (warm caches copied in: the FX-graph-cache-hit path), for
#    sweeper's own spread of wall time and busy percentage.
for r in 1 2; do
  for j in 0 1; do mkdir -p "$S/rep$r/$j" && cp -r "$S/main/$j/cache" "$S/rep$r/$j/"; done
  python3 -m sweeper hydra/launcher=basic model=mixnet_l,densenet121 measure.eager=false hydra.sweep.dir="$S/rep$r" > "$S/rep$r.log" 2>&1
  mkdir -p "$S/r18rep$r/0" && cp -r "$S/resnet18/0/cache" "$S/r18rep$r/0/"
  python3 -m sweeper hydra/launcher=basic model=resnet18 batch_size=32 measure.eager=false hydra.sweep.dir="$S/r18rep$r" > "$S/r18rep$r.log" 2>&1
  log "repeat $r done"
done
python3 bench/compare_reference.py "$S/main/0,$S/rep1/0,$S/rep2/0" "$S/main/1,$S/rep1/1,$S/rep2/1" \
  "$S/resnet18/0,$S/r18rep1/0,$S/r18rep2/0" --json="$S/compare.json" > "$S/compare.md" 2>&1
log "compare done rc=$?"
# 5. Fixtures for the CPU tests: resnet18's modules, one kernel file per Triton kind.
python3 - "$S" <<'PY'
import json, shutil, sys
from pathlib import Path
sys.path.insert(0, ".")
from sweeper.analysis.module_source import kernel_definitions
S = Path(sys.argv[1]); fx = S / "fixtures"; fx.mkdir(exist_ok=True)
rec = json.load(open(S / "resnet18/0/result.json"))
for m in rec["modules"]:
    shutil.copy(m["artifact"], fx / f"resnet18_{m['label']}.py")
    kernels = kernel_definitions(Path(m["artifact"]).read_text())
    for prefix in ("triton_poi", "triton_red", "triton_per"):
        for name, path in kernels.items():
            if name.startswith(prefix) and path and not (fx / f"{prefix}.py").exists():
                shutil.copy(path, fx / f"{prefix}.py")
print(sorted(p.name for p in fx.iterdir()))
PY
bundle
log ALLDONE
