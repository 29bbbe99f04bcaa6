"""Copy a GPU job's compiled modules and one kernel file per Triton kind into a folder,
for tests/fixtures:  python bench/collect_fixtures.py JOB_DIR DEST"""

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.analysis.module_source import kernel_definitions  # noqa: E402

job, dest = Path(sys.argv[1]), Path(sys.argv[2])
dest.mkdir(parents=True, exist_ok=True)
for module in sorted((job / "modules").glob("*.py")):
    shutil.copy(module, dest / module.name)
    for name, path in kernel_definitions(module.read_text()).items():
        for prefix in ("triton_poi", "triton_red", "triton_per"):
            if name.startswith(prefix) and path and not (dest / f"{prefix}.py").exists():
                shutil.copy(path, dest / f"{prefix}.py")
print(sorted(p.name for p in dest.iterdir()))
