"""The package's rooms and what each may import (docs/architecture.md, decision 0039).

Every import inside ``cronwheel/`` is read from the source (module level, inside
functions and under ``TYPE_CHECKING`` alike: a type-only import is still a dependency of
the folder) and checked against :data:`MAY_IMPORT`. A new folder must be given its place
here before it can be imported from anywhere, a new module at the package root fails,
and so does any cycle between rooms.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "cronwheel"

ROOT_MODULES = {"__init__", "__main__", "_version", "errors"}
"""What may sit at the package's root: the public facade, ``python -m cronwheel``, and
the two leaves every room may use (the exception tree and the version)."""

FACADE = {"cronwheel", "cronwheel.__main__"}
"""``import cronwheel`` and ``python -m cronwheel`` put the public surface together: they
may import any room, and no room imports them."""

_BELOW_STORE = {"leaf", "schedule", "core", "security", "observability"}
_SERVICES = _BELOW_STORE | {"store", "actions", "engine", "control"}

MAY_IMPORT: dict[str, set[str]] = {
    # The domain: pure, no I/O, no framework. Schedules are their own small library.
    "leaf": set(),
    "schedule": {"leaf"},
    "core": {"leaf", "schedule"},
    # Cross-cutting concerns that the domain's users share; they name no store.
    "security": {"leaf", "schedule", "core"},
    "observability": {"leaf", "schedule", "core", "security"},
    # The store, and what runs on it.
    "store": _BELOW_STORE,
    "actions": _BELOW_STORE,
    "engine": _BELOW_STORE | {"store", "actions"},
    "control": _BELOW_STORE | {"store"},
    # The faces.
    "sdk": {"leaf", "observability"},
    "web": _BELOW_STORE | {"store", "control"},
    "dashboard": _BELOW_STORE | {"store", "control", "web"},
    "api": _BELOW_STORE | {"store", "control", "web", "dashboard"},
    "console": _SERVICES,
    "cli": _SERVICES | {"sdk", "web", "dashboard", "api", "console"},
}

SIBLINGS_APART = [("cronwheel.store.postgres", "cronwheel.store.sqlite")]
"""Folders that must not import each other: each store backend stands alone on the
store's interface and shared helpers."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def where(module: str) -> str:
    path = MODULES[module]
    return (
        str(path.relative_to(PACKAGE.parent)) if path.is_relative_to(PACKAGE.parent) else str(path)
    )


def room_of(module: str) -> str:
    parts = module.split(".")
    if module in FACADE:
        return "facade"
    if len(parts) == 2 and MODULES.get(module, Path()).name != "__init__.py":
        return "leaf"
    return parts[1]


def imports_of(module: str) -> Iterator[tuple[int, str]]:
    """(line, module) for every cronwheel module ``module`` imports."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_package else -1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            # ``from cronwheel.x import y`` imports the module cronwheel.x.y when there is
            # one, and otherwise y from cronwheel.x.
            names = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source
                for alias in node.names
            ]
        found = set()
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("cronwheel") and name not in found:
                found.add(name)
                yield node.lineno, name


def edges() -> list[tuple[str, int, str]]:
    return [(m, line, target) for m in MODULES for line, target in imports_of(m) if target != m]


def test_the_package_root_holds_only_the_facade_and_its_leaves() -> None:
    at_root = {p.stem for p in PACKAGE.glob("*.py")}
    assert at_root <= ROOT_MODULES, (
        f"{sorted(at_root - ROOT_MODULES)} at cronwheel/'s root: put it in the room it "
        "belongs to (tests/unit/test_layering.py lists them)"
    )


def test_every_folder_has_its_place_in_the_layering() -> None:
    rooms = {room_of(m) for m in MODULES} - {"facade"}
    assert rooms == set(MAY_IMPORT), (
        f"rooms without a place in MAY_IMPORT: {sorted(rooms - set(MAY_IMPORT))}; "
        f"places without a room: {sorted(set(MAY_IMPORT) - rooms)}"
    )


def test_each_room_imports_only_the_rooms_below_it() -> None:
    wrong = []
    for module, line, target in edges():
        mine, theirs = room_of(module), room_of(target)
        if mine == "facade" or mine == theirs:
            continue
        if theirs == "facade" or theirs not in MAY_IMPORT.get(mine, set()):
            wrong.append(f"{where(module)}:{line}: {mine} → {target}")
    assert not wrong, "imports against the layering (tests/unit/test_layering.py):\n" + "\n".join(
        wrong
    )


def test_no_cycle_between_rooms() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, _, target in edges():
        mine, theirs = room_of(module), room_of(target)
        if mine != theirs and "facade" not in (mine, theirs):
            graph[mine].add(theirs)
    assert find_cycle(graph) is None, f"rooms import each other in a circle: {find_cycle(graph)}"


def test_the_store_backends_do_not_import_each_other() -> None:
    wrong = [
        f"{module} → {target}"
        for module, _, target in edges()
        for a, b in SIBLINGS_APART
        for mine, theirs in ((a, b), (b, a))
        if module.startswith(mine) and target.startswith(theirs)
    ]
    assert not wrong, "\n".join(wrong)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that returns to its start, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"c"}}, None),
        ({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": {"b"}}, ["b", "c", "b"]),
    ],
)
def test_find_cycle_finds_what_it_should(
    graph: dict[str, set[str]], cycle: list[str] | None
) -> None:
    assert find_cycle(graph) == cycle


def test_the_checker_sees_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The rules would pass vacuously if no import were read: core → store must show.
    fake = {**MODULES, "cronwheel.core.fake": tmp_path / "fake.py"}
    (tmp_path / "fake.py").write_text("from cronwheel.store.base import Store\n")
    monkeypatch.setattr(sys.modules[__name__], "MODULES", fake)
    found = [(m, t) for m, _, t in edges() if m == "cronwheel.core.fake"]
    assert found == [("cronwheel.core.fake", "cronwheel.store.base")]
    with pytest.raises(AssertionError, match=r"core → cronwheel\.store\.base"):
        test_each_room_imports_only_the_rooms_below_it()


def test_the_engine_loops_name_the_seams_they_use_not_the_whole_store() -> None:
    # Decision 0041: each loop declares the store protocol it needs (mypy holds its calls
    # to it); importing the whole Store would hide what a loop depends on.
    wrong = []
    for module in MODULES:
        if room_of(module) != "engine":
            continue
        tree = ast.parse(MODULES[module].read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "cronwheel.store.base":
                wrong += [f"{module}: Store" for a in node.names if a.name == "Store"]
    assert not wrong, wrong
