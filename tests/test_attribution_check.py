"""The attribution check (bench/attribution_check.py) on a real CPU compile of timm's
resnet18, training: every module a kernel's time is placed on did that kernel's work, by
Inductor's own account of what each kernel computes and the op that launched each library
kernel. And the two faults it was built to catch: resnet18's last ReLU (layer4.1.act2) was
named in every ReLU-backward kernel (the graph's one `0` is tagged with it), and
layer4.0.downsample.0 and layer4.0.conv1, whose backward convolutions run one after the
other, each got the average of both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.beside]  # one real compile (about 45 s alone on 2 cores)


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    out = tmp_path_factory.mktemp("check") / "resnet18.json"
    proc = subprocess.run([sys.executable, "bench/attribution_check.py", "resnet18", "--image-size", "64",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def test_every_module_named_did_the_work(checked):
    got, text = checked
    assert got["checked_ms"] > 0 and got["kernels_read"] > 20
    assert got["right_pct_of_checked"] >= 99.0, text
    assert got["modules_named_without_work"] == 0, got["wrong"]
    assert got["library"]["unchecked_ms"] == 0 and got["library"]["right_ms"] == pytest.approx(got["library"]["placed_ms"])
    assert "on modules that did the work" in text


def test_the_last_relu_gets_only_its_own_backward(checked):
    rows = [r for r in checked[0]["rows"] if r["module"] == "layer4.1.act2" and r["pass"] == "backward"]
    # before: 4.95 launches a step (every ReLU backward of the graph); now its own where(),
    # fused into one batch-norm backward kernel, a share of one launch
    assert rows and sum(r["launches"] for r in rows) < 1.0


def test_two_adjacent_library_calls_get_their_own_times(checked):
    def library_ms(module):
        return sum(r["device_ms"] for r in checked[0]["rows"] if r["module"] == module and r["pass"] == "backward"
                   and r["category"] == "library_mm_conv")

    down, conv1 = library_ms("layer4.0.downsample.0"), library_ms("layer4.0.conv1")
    # a 1x1 convolution's backward against a 3x3 one's of the same channels: far apart, never the average
    assert down > 0 and conv1 > 0 and conv1 > 2 * down
    assert checked[0]["how_ms"].get("provenance (extern calls, the profiler's link to the op)", 0) > 0
