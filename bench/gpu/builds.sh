#!/usr/bin/env bash
# builds: two Python environments of the machine's torch in one sweep (python=a,b), four models
# (MODELS=...; SEEDS=0,1 repeats each pair), then `history compare --between python`; results:
# bench/results/builds/.
#     bash bench/gpu_run.sh builds     (S=/tmp/gpu: where it lands; setsid ... & for a long run)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Two Python environments of the machine's one torch (a second virtualenv that sees the
# machine's packages): one sweep pairing them on the same GPU, and the builds' compare.
builds() {
  # a venv of its own that sees the machine's packages through a .pth file (where torch lies
  # need not be the interpreter's system site-packages: --system-site-packages missed it)
  python3 -m venv --without-pip "$S/env_b"
  python3 -c 'import os, sys, torch; print(os.path.dirname(os.path.dirname(torch.__file__))); print("\n".join(p for p in sys.path if p.endswith("-packages")))' \
    > "$("$S/env_b/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/machine.pth"
  python3 -m sweeper model="${MODELS:-resnet18,resnet50,convnext_tiny,vit_small_patch16_224}" seed="${SEEDS:-0}" \
    batch_size=32 mode=inference python=a,b +pythons.a="$(command -v python3)" +pythons.b="$S/env_b/bin/python" measure.microbench=false \
    hydra.sweep.dir="$S/builds" > "$S/builds.log" 2>&1
  log "builds sweep rc=$?"
  python3 -m sweeper.history compare "$S/builds" --between python --kernels --top 5 > "$S/builds_compare.md" 2>&1
  log "compare rc=$?"
  drop_traces "$S/builds"
  bundle
}

run_topic builds
