"""Where each task of a pipeline run stands, as a person reads it: the CLI's tree
(``cronwheel pipelines get-run``) and the dashboard's graph are drawn from this.

A pipeline run's task rows say only what started, was skipped or failed; the definition
says what else there is (a task with no row still waits) and how the tasks hang
together. Everything here is pure and works on plain mappings (the API's JSON, the SDK's
models dumped), so the CLI can use it without the engine or the web framework.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

WAITING = "waiting"
"""A task with no row: a prerequisite has not ended yet."""

SUMMARY_ORDER = ("succeeded", "running", "pending", "started", "dead", "cancelled", "skipped")
"""The order of the states in a fan-out's summary: done, moving, then what went wrong."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One task instance's row: its index, the state shown and its run (if it has one)."""

    index: int
    state: str
    run_id: int | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TaskProgress:
    """One task of the definition in a pipeline run."""

    name: str
    depth: int
    """The longest path from a root task: the dashboard's column."""
    parents: tuple[tuple[str, str], ...]
    """``(upstream task, edge condition)`` in the definition's edge order."""
    state: str
    """``waiting``, ``pending``, ``running`` (its run's own state while it is started),
    ``succeeded``, ``dead``, ``cancelled`` or ``skipped``; for a fanned-out task, over
    its instances (running while any runs, dead when any failed)."""
    reason: str | None
    message: str | None
    fan_out: bool
    instances: tuple[Instance, ...]

    @property
    def run_id(self) -> int | None:
        """The task's run, when it has exactly one."""
        return self.instances[0].run_id if len(self.instances) == 1 else None

    @property
    def expanded(self) -> bool:
        """A fanned-out task that became instances (not one row skipped or failed for
        its whole)."""
        return self.fan_out and any(i.run_id is not None for i in self.instances)

    def counts(self) -> list[tuple[str, int]]:
        """How many instances are in each state, in :data:`SUMMARY_ORDER`."""
        found: dict[str, int] = {}
        for instance in self.instances:
            found[instance.state] = found.get(instance.state, 0) + 1
        ordered = [s for s in SUMMARY_ORDER if s in found]
        ordered += sorted(s for s in found if s not in SUMMARY_ORDER)
        return [(s, found[s]) for s in ordered]

    def summary(self) -> str:
        """``98 succeeded, 2 running`` for an expanded fan-out; empty otherwise."""
        if not self.expanded:
            return ""
        return ", ".join(f"{n} {state}" for state, n in self.counts())


def shown_state(row: Mapping[str, Any]) -> str:
    """A task row's state as a person wants it: a started task is as its run is."""
    state = str(row.get("state"))
    if state == "started":
        return str(row.get("run_state") or state)
    return state


def _overall(instances: Sequence[Instance]) -> str:
    states = {i.state for i in instances}
    for moving in ("running", "pending", "started"):
        if moving in states:
            return moving
    for failed in ("dead", "cancelled"):
        if failed in states:
            return failed
    if states == {"skipped"}:
        return "skipped"
    return "succeeded"


def dependency_order(
    tasks: Sequence[str], edges: Sequence[Mapping[str, Any]]
) -> tuple[list[str], dict[str, int]]:
    """The tasks in an order where each comes after its prerequisites, and each task's
    depth: the longest path from a root.

    Ties go by where a task first appears in the edges, then by name: the edges are a
    list, kept in the order they were written on both stores, whereas the tasks' keys
    come back from PostgreSQL's ``jsonb`` in an order of its own."""
    parents: dict[str, list[str]] = {t: [] for t in tasks}
    children: dict[str, list[str]] = {t: [] for t in tasks}
    first_seen: dict[str, int] = {}
    for i, edge in enumerate(edges):
        if edge.get("from") in parents and edge.get("to") in parents:
            parents[edge["to"]].append(edge["from"])
            children[edge["from"]].append(edge["to"])
            first_seen.setdefault(edge["from"], 2 * i)
            first_seen.setdefault(edge["to"], 2 * i + 1)
    ranked = sorted(tasks, key=lambda t: (first_seen.get(t, len(edges) * 2), t))
    position = {t: i for i, t in enumerate(ranked)}
    waiting = {t: len(parents[t]) for t in tasks}
    ready = [t for t in ranked if not waiting[t]]
    order: list[str] = []
    while ready:
        ready.sort(key=position.__getitem__)
        here = ready.pop(0)
        order.append(here)
        for child in children[here]:
            waiting[child] -= 1
            if not waiting[child]:
                ready.append(child)
    # A definition the API returned has no cycle; anything left (a damaged one) still shows.
    order += [t for t in ranked if t not in order]
    depth: dict[str, int] = {}
    for task in order:
        depth[task] = max((depth.get(p, 0) + 1 for p in parents[task]), default=0)
    return order, depth


def progress(
    definition: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> list[TaskProgress]:
    """Every task of ``definition`` (its ``tasks`` and ``edges``) in dependency order,
    with where it stands by the pipeline run's task ``rows``."""
    specs: Mapping[str, Any] = definition.get("tasks") or {}
    edges: Sequence[Mapping[str, Any]] = definition.get("edges") or []
    order, depth = dependency_order(list(specs), edges)
    by_task: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_task.setdefault(str(row.get("task")), []).append(row)
    out = []
    for name in order:
        mine = sorted(by_task.get(name, []), key=lambda r: int(r.get("instance") or 0))
        instances = tuple(
            Instance(int(r.get("instance") or 0), shown_state(r), r.get("run_id"), r.get("reason"))
            for r in mine
        )
        spec = specs.get(name) or {}
        parents = tuple(
            (str(e["from"]), str(e.get("on") or "on_success")) for e in edges if e.get("to") == name
        )
        single = mine[0] if len(mine) == 1 else None
        out.append(
            TaskProgress(
                name=name,
                depth=depth[name],
                parents=parents,
                state=_overall(instances) if instances else WAITING,
                reason=single.get("reason") if single else None,
                message=single.get("message") if single else None,
                fan_out=bool(spec.get("fan_out")) if isinstance(spec, Mapping) else False,
                instances=instances,
            )
        )
    return out


def layers(tasks: Sequence[TaskProgress]) -> list[list[TaskProgress]]:
    """The tasks by depth: a column each, roots first (the dashboard's graph)."""
    out: list[list[TaskProgress]] = []
    for task in tasks:
        while len(out) <= task.depth:
            out.append([])
        out[task.depth].append(task)
    return out


@dataclass(frozen=True, slots=True)
class TreeNode:
    """A task's place in the tree: under the parent that comes last in dependency order
    (so it reads after every task it waits for, as it runs), the others named."""

    task: TaskProgress
    level: int
    last: tuple[bool, ...]
    """For each level down to this one, whether the node there is its parent's last
    child: what draws ``├─``, ``└─`` and the ``│`` that continues a branch."""
    edge: str
    """The condition of the edge from its parent in the tree (``on_success`` for a root)."""
    also_after: tuple[tuple[str, str], ...]
    parent: str | None = None
    """The task it sits under (None for a root)."""


def tree(tasks: Sequence[TaskProgress]) -> Iterator[TreeNode]:
    """``tasks`` (in dependency order) as a tree, depth first: each task under its last
    parent in that order; roots in order."""
    position = {t.name: i for i, t in enumerate(tasks)}
    home: dict[str, tuple[str, str] | None] = {}
    children: dict[str | None, list[TaskProgress]] = {}
    for task in tasks:
        known = [p for p in task.parents if p[0] in position]
        parent = max(known, key=lambda p: position[p[0]]) if known else None
        home[task.name] = parent
        children.setdefault(parent[0] if parent else None, []).append(task)

    def walk(parent: str | None, level: int, last: tuple[bool, ...]) -> Iterator[TreeNode]:
        mine = children.get(parent, [])
        for i, task in enumerate(mine):
            at = (*last, i == len(mine) - 1)
            edge = home[task.name]
            others = tuple(p for p in task.parents if edge is None or p[0] != edge[0])
            yield TreeNode(
                task, level, at, edge[1] if edge else "on_success", others, parent=parent
            )
            yield from walk(task.name, level + 1, at)

    yield from walk(None, 0, ())
