"""The package's imports go one way (docs/architecture.md): no module of sweeper/ imports
itself back through others, lazy imports inside functions counted too; the reporting and
analysis layers never import the sweep side (the end of a sweep hands its folder to the
reporting side, sweeper/sweep/summary.close_sweep); analysis and reporting import neither
torch nor Ray. Between the job and the driver: the job process (tasks/) reaches nothing of
the driver's side, not even through a shared module, and no module of sweeper/ or
hydra_plugins/ imports tasks/ (a job runs as `python -m tasks.job`, a process of its own).
Private torch and Ray APIs are reached from one package each."""

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


def graph(*packages: str) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports (lazy imports included)."""
    modules = {}
    for package in packages or ("sweeper",):
        for path in (ROOT / package).rglob("*.py"):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            modules[name] = path
    return {name: {i for i in imports_of(path, name) if i in modules and i != name} for name, path in modules.items()}


# The driver's side: what runs a sweep (the launchers, the sweep's checks and job
# processes, the stores' exchange with each job) and what reads finished ones. The job
# shares with it only the record, the identity, the analysis, the stores' file formats, the
# model names and Inductor's options, and the node's pause files.
DRIVER = ("sweeper.sweep", "sweeper.reporting", "sweeper.stores.exchange", "sweeper.stores.command", "sweeper.stores.export",
          "sweeper.store", "sweeper.history", "sweeper.aggregate", "sweeper.__main__", "hydra_plugins")
JOB_AND_DRIVER = ("sweeper", "tasks", "hydra_plugins")


def driver_side(name: str) -> bool:
    return any(name == d or name.startswith(d + ".") for d in DRIVER)


def reached_from(g: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module `start` imports, directly or through others: module -> the one that
    imports it on the first path found."""
    seen, todo = {start: ""}, [start]
    while todo:
        m = todo.pop()
        for n in sorted(g[m]):
            if n not in seen:
                seen[n] = m
                todo.append(n)
    return seen


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


def test_the_job_reaches_nothing_of_the_driver():
    g = graph(*JOB_AND_DRIVER)
    found = []
    for name in sorted(m for m in g if m == "tasks" or m.startswith("tasks.")):
        via = reached_from(g, name)
        for bad in sorted(m for m in via if driver_side(m)):
            path, m = [bad], bad
            while via[m]:
                m = via[m]
                path.append(m)
            found.append(" -> ".join(reversed(path)))
    assert found == [], "the job process imports the driver's side: " + " ; ".join(found)


def test_nothing_of_sweeper_or_the_launchers_imports_the_job():
    g = graph(*JOB_AND_DRIVER)
    found = [f"{name} -> {d}" for name, deps in sorted(g.items()) if not name.startswith("tasks")
             for d in sorted(deps) if d == "tasks" or d.startswith("tasks.")]
    assert found == [], "imports of tasks/ outside it: " + " ; ".join(found)


def test_the_direction_tests_see_lazy_and_transitive_imports(tmp_path):
    """The checks above would catch the wrong-way imports this tree once had: a lazy one
    inside a function, and one reached through a shared module."""
    pkg = tmp_path / "tasks"
    pkg.mkdir()
    (pkg / "phase.py").write_text("def f():\n    from sweeper.models import x\n")
    found = imports_of(pkg / "phase.py", "tasks.phase")
    assert "sweeper.models" in found
    g = {"tasks.phase": {"sweeper.models"}, "sweeper.models": {"sweeper.sweep.validate"}, "sweeper.sweep.validate": set()}
    via = reached_from(g, "tasks.phase")
    assert [m for m in via if driver_side(m)] == ["sweeper.sweep.validate"]
    assert via["sweeper.sweep.validate"] == "sweeper.models"


def test_the_scheduler_imports_no_ray_nor_the_launchers():
    """sweeper/sweep/scheduler.py holds the sweep's policy apart from where jobs run: neither
    it nor anything it reaches (lazy imports included) imports Ray or hydra_plugins/, so that
    its tests run it against an in-memory executor in milliseconds."""
    g = graph(*JOB_AND_DRIVER)
    reached = reached_from(g, "sweeper.sweep.scheduler")
    assert not [m for m in reached if m.startswith("hydra_plugins")], reached
    paths = {name: ROOT / Path(*name.split(".")).with_suffix(".py") for name in reached}
    paths = {n: p if p.exists() else p.with_suffix("") / "__init__.py" for n, p in paths.items()}
    found = {n: sorted(i for i in imports_of(p, n) if i.split(".")[0] == "ray") for n, p in paths.items()}
    assert {n: f for n, f in found.items() if f} == {}, "Ray imported from the scheduler's side"


# Where the project reaches torch's and Ray's private APIs: one package each, so that a
# release that moves one breaks in one place (sweeper/torch_internals/__init__.py,
# hydra_plugins/sweeper_ray/ray_internals.py).
PRIVATE_HOMES = {"torch": "sweeper/torch_internals/", "ray": "hydra_plugins/sweeper_ray/ray_internals.py"}


def private_uses(path: Path) -> list[str]:
    """`import torch._x`, `from ray._private import y` and `torch._x.y` in a module's code
    (its docstrings and comments aside): "line: name" each."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            names = [f"{node.value.id}.{node.attr}"]
        out += [f"{node.lineno}: {n}" for n in names
                if n.split(".")[0] in PRIVATE_HOMES and len(n.split(".")) > 1
                and n.split(".")[1].startswith("_") and not n.split(".")[1].startswith("__")]  # __version__ is public
    return out


def test_private_torch_and_ray_apis_are_reached_from_their_one_package_only():
    found = {}
    for package in ("sweeper", "tasks", "hydra_plugins"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            uses = [u for u in private_uses(path) if not rel.startswith(PRIVATE_HOMES[u.split(": ")[1].split(".")[0]])]
            if uses:
                found[rel] = uses
    assert found == {}, found
    # the check sees what it looks for
    assert private_uses(ROOT / "sweeper" / "torch_internals" / "inductor_config.py")
    assert private_uses(ROOT / "hydra_plugins" / "sweeper_ray" / "ray_internals.py")
