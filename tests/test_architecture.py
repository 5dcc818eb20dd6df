"""The package's shape, read from its source: no import circle (function-local imports included, so
none can hide one), packages that import only downward, each of job/'s packages indexing its
modules in its docstring, and docs/architecture.md naming every module there is. A module's size
is its concern's, not a count's: no line limit."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

PACKAGES = ("orchestrator", "workloads")
# The floors, from the ground up: a package may import its own floor and those below it.
FLOORS = ["core", "config", "job", "launch", "results", "analysis", "report", "cli"]


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The project's modules this file imports, at any depth of the file (functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import mod` names a module; `from mod import name` names its module
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name not in PACKAGES:
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(path, set(mods)) - {name} for name, path in mods.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_in_the_package():
    cycle = find_cycle(graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def floor(module: str) -> int | None:
    parts = module.split(".")
    return FLOORS.index(parts[1]) if len(parts) > 1 and parts[1] in FLOORS else None


def test_packages_import_only_their_own_floor_and_below():
    upward = []
    for module, targets in graph().items():
        here = floor(module)
        for target in targets:
            there = floor(target)
            if here is not None and there is not None and there > here:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports from a lower floor to a higher one: " + ", ".join(sorted(upward))


def test_core_imports_nothing_above_it():
    for module, targets in graph().items():
        if module.startswith("orchestrator.core"):
            assert all(t.startswith("orchestrator.core") for t in targets), (module, targets)


def test_each_job_package_indexes_its_modules_and_no_other():
    """job/ and each package in it: its docstring names every module it holds (`name.py`) and every
    package (`name/`), and nothing it does not hold."""
    for init in sorted((ROOT / "orchestrator" / "job").rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        here = init.parent
        held = {p.name for p in here.glob("*.py") if p.name != "__init__.py"}
        held |= {f"{p.parent.name}/" for p in here.glob("*/__init__.py")}
        named = set(re.findall(r"^`(\w+\.py|\w+/)`", doc, re.M))
        assert named == held, (here.relative_to(ROOT).as_posix(), sorted(held - named), sorted(named - held))


def test_architecture_doc_names_every_module_and_no_other():
    """Each package's paragraph (`` `core/`: ... ``) names its modules as `name.py`."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`(orchestrator/[\w/]+\.py)`", doc))
    for paragraph in doc.split("\n\n"):
        if m := re.match(r"`([\w/]+)/`:", paragraph):
            named |= {f"orchestrator/{m.group(1)}/{name}" for name in re.findall(r"`(\w+\.py)`", paragraph)}
    actual = {
        p.relative_to(ROOT).as_posix()
        for p in modules().values()
        if p.name not in ("__init__.py", "__main__.py") and p.parts[-2] != "workloads"
    }
    assert not named - actual, (
        f"docs/architecture.md names modules that do not exist: {sorted(named - actual)}"
    )
    assert not actual - named, f"docs/architecture.md does not name: {sorted(actual - named)}"
