"""The package's imports go one way (docs/architecture.md): no module of sweeper/ imports
itself back through others, lazy imports inside functions counted too; the reporting and
analysis layers never import the sweep side (the end of a sweep hands its folder to the
reporting side, sweeper/sweep/summary.close_sweep); analysis and reporting import neither
torch nor Ray."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imports_of(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text())
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            out.add(name)
            out |= {f"{name}.{a.name}" for a in node.names}  # `from sweeper.sweep import stores`
    return out


def graph() -> dict[str, set[str]]:
    modules = {}
    for path in (ROOT / "sweeper").rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        modules[name] = path
    return {name: {i for i in imports_of(path, name) if i in modules and i != name} for name, path in modules.items()}


def test_no_import_circle_in_sweeper():
    g = graph()
    state, stack, circles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(g[m]):
            if state.get(n) == "open":
                circles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m)
    assert circles == [], " ; ".join(" -> ".join(c) for c in circles)


def test_reporting_and_analysis_never_import_the_sweep_side_torch_or_ray():
    for name, deps in graph().items():
        if name.startswith(("sweeper.reporting", "sweeper.analysis")):
            assert not [d for d in deps if d.startswith("sweeper.sweep")], name
    for path in [*(ROOT / "sweeper" / "reporting").rglob("*.py"), *(ROOT / "sweeper" / "analysis").rglob("*.py")]:
        found = imports_of(path, "x.y")
        assert not {i for i in found if i.split(".")[0] in ("torch", "ray")}, path
