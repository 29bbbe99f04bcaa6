import gzip
import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
H200 = FIXTURES / "h200"  # captured on the GPU machine: see tests/fixtures/README.md


def read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as f:
            return f.read()
    return path.read_text()


@pytest.fixture
def h200():
    return H200


@pytest.fixture
def resnet18_record():
    return json.loads(read_text(H200 / "resnet18_result.json.gz"))


@pytest.fixture
def mixnet_record():
    return json.loads(read_text(H200 / "mixnet_l_result.json.gz"))
