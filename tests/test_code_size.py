"""The size rules the project keeps (docs/architecture.md, "Size rules"): no module of
sweeper/, tasks/ or hydra_plugins/ over 300 lines, no function over 60. A module that grows
past them is split by what its parts are, not trimmed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("sweeper", "tasks", "hydra_plugins")
MAX_FILE_LINES = 300
MAX_FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_packages_have_modules_to_check():
    assert len(_modules()) > 100  # the rules below hold of the real tree, not of an empty glob


def test_no_module_is_over_300_lines():
    long = {str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}, f"modules over {MAX_FILE_LINES} lines: {long}"


def test_no_function_is_over_60_lines():
    long = {}
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if node.end_lineno - first + 1 > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.name}"] = node.end_lineno - first + 1
    assert long == {}, f"functions over {MAX_FUNCTION_LINES} lines: {long}"
