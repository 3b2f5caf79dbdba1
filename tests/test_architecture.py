"""The house rules of docs/architecture.md, checked on the source: imports run one way, with no cycles (a
function-level import counts), each heavy framework stays in its room, every project error derives from
SpanqaError, and no module declares a logger it never uses."""

from __future__ import annotations

import ast
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from spanqa.errors import SpanqaError

ROOT = Path(__file__).resolve().parents[1]
#: The repository's top-level folders, installed under one name: spanqa.ingest, spanqa.retriever, ...
LINKED = ("ingest", "retriever", "reader", "workers")
PACKAGES = ("spanqa", *LINKED)
# The floor: what every layer may import (no project imports of its own beyond the floor).
FLOOR = {
    "spanqa",
    "spanqa.settings",
    "spanqa.types",
    "spanqa.errors",
    "spanqa.text",
    "spanqa.scoring",
    "spanqa.onnx_export",
}
# Per area, the project modules it may import besides its own and the floor's.
ALLOWED = {
    "spanqa.retriever": (),
    "spanqa.reader": (),
    "spanqa.ingest": ("spanqa.retriever",),
    "spanqa.core": ("spanqa.ingest", "spanqa.retriever", "spanqa.reader"),  # pipeline, runtime, evaluation
    "spanqa.workers": ("spanqa.ingest", "spanqa.retriever", "spanqa.reader", "spanqa.core"),
    "spanqa.server": ("spanqa.ingest", "spanqa.retriever", "spanqa.reader", "spanqa.core", "spanqa.workers"),
    "spanqa.cli": (
        "spanqa.ingest",
        "spanqa.retriever",
        "spanqa.reader",
        "spanqa.core",
        "spanqa.workers",
        "spanqa.server",
    ),
}
# Third-party frameworks that one room alone may import.
FRAMEWORK_ROOMS = {"click": "spanqa.cli", "celery": "spanqa.workers", "fastapi": "spanqa.server"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["spanqa", *parts] if parts[0] in LINKED else parts)


def _source_files() -> Iterator[Path]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).parts
            if package == "spanqa" and relative[1] in LINKED:
                continue  # the links to the top-level folders: read there, once
            if "versions" not in path.parts:  # migration scripts are loaded by Alembic, not imported
                yield path


MODULES = {_module_name(p): p for p in _source_files()}


def _imports(path: Path) -> set[str]:
    """Every module named by an import anywhere in ``path`` (top level, in functions, under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            # ``from package import module`` imports the module
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return found


def _project_imports(path: Path) -> set[str]:
    own = _module_name(path)
    return {name for name in _imports(path) if name in MODULES and name != own}


def _area(module: str) -> str:
    if module in FLOOR:
        return "floor"
    for room in ("spanqa.cli", "spanqa.server", *(f"spanqa.{name}" for name in LINKED)):
        if module == room or module.startswith(f"{room}."):
            return room
    return "spanqa.core"


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_checks_see_the_project() -> None:
    assert {
        "spanqa.cli.root",
        "spanqa.retriever.index.base",
        "spanqa.ingest.db",
        "spanqa.workers.tasks",
    } <= set(MODULES)
    # Nothing imports a top-level name the wheel does not install.
    stray = [
        f"{module} imports {name}"
        for module, path in MODULES.items()
        for name in _imports(path)
        if name.split(".")[0] in LINKED
    ]
    assert not stray, "\n".join(stray)


def test_no_import_cycle_between_project_modules() -> None:
    graph = {module: _project_imports(path) for module, path in MODULES.items()}
    assert _find_cycle(graph) is None, f"import cycle: {' -> '.join(_find_cycle(graph) or [])}"


def test_cycle_finder_finds_a_cycle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_imports_run_one_way() -> None:
    wrong = []
    for module, path in MODULES.items():
        area = _area(module)
        for target in _project_imports(path):
            target_area = _area(target)
            if target_area in ("floor", area):
                continue
            if area == "floor" or target_area not in ALLOWED.get(area, ()):
                wrong.append(f"{module} ({area}) imports {target} ({target_area})")
    assert not wrong, "\n".join(sorted(wrong))


def test_frameworks_stay_in_their_rooms() -> None:
    wrong = []
    for module, path in MODULES.items():
        for name in _imports(path):
            room = FRAMEWORK_ROOMS.get(name.split(".")[0])
            if room is not None and not module.startswith(room):
                wrong.append(f"{module} imports {name} (only {room} may)")
    assert not wrong, "\n".join(sorted(wrong))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_project_exceptions_derive_from_the_root(module: str) -> None:
    if module == "spanqa.ingest.migrations.env" or module.endswith(".__main__"):
        pytest.skip("a script: run by Alembic, or by python -m")
    loaded = importlib.import_module(module)
    outside = [
        name
        for name, value in vars(loaded).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == module
        and not issubclass(value, SpanqaError)
    ]
    assert not outside, f"{module}: {outside} do not derive from spanqa.errors.SpanqaError"


def test_no_module_declares_a_logger_it_never_uses() -> None:
    unused = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = any(
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "logger" for t in node.targets)
            for node in tree.body
        )
        used = any(
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "logger"
            for node in ast.walk(tree)
        )
        if declared and not used:
            unused.append(module)
    assert not unused, f"loggers never used: {unused}"
