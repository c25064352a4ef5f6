"""``cronwheel pipelines get-run`` as a person reads it: the pipeline run's facts as
labelled lines, then its tasks as a tree.

Each task is shown under the task it waits for that comes last in dependency order, so
the tree reads in the order the tasks run; a task that waits for more than one says
``also after: x, y``. Each line gives the task's state (its run's own state while it is
started: ``pending``, ``running``), why it was skipped (``upstream_failed``…), its run id,
and for a fanned-out task the number of its instances after its name and a count of
them by state (``running (98 succeeded, 2 running)``). A task with no row yet is ``waiting``.

On a terminal a line that would be wider than the terminal puts its details on the lines
under the task's name, wrapped, and past half the terminal's width the tree stops
indenting (each task deeper than that says ``after: x``); in a pipe each task is one line
with every detail, so ``grep`` finds a task with all it has.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from cronwheel.cli.tables import text
from cronwheel.core.pipelines.progress import TaskProgress, TreeNode, progress, tree

_LABEL = 17
TIMES = "\u00d7"  # the multiplication sign, after a fanned-out task's name: its instances
_GAP = "  "


def run_lines(
    run: Mapping[str, Any], pipeline: Mapping[str, Any] | None, width: int | None
) -> list[str]:
    """A pipeline run (the API's JSON, with its tasks) and, given the pipeline at the
    run's version, its tasks as a tree; ``width`` None: a pipe (nothing wrapped)."""
    state = str(run.get("state"))
    if run.get("cancel_requested") and state == "running":
        state += ", cancel requested"
    name = pipeline.get("name") if pipeline else None
    version = f"version {run.get('version')}"
    lines = [
        *_fact("pipeline run", run.get("id"), width),
        *_fact("pipeline", f"{name} ({version})" if name else version, width),
        *_fact("pipeline id", run.get("pipeline_id"), width),
        *_fact("state", state, width),
        *_fact("started", run.get("created_at"), width),
        *_fact("started by", run.get("actor"), width),
        *_fact("finished", text(run.get("finished_at")) or "not yet", width),
    ]
    if run.get("trigger_run_id") is not None:
        lines += _fact("trigger run", run["trigger_run_id"], width)
    rows: Sequence[Mapping[str, Any]] = run.get("tasks") or []
    if pipeline is None:
        lines += _fact("tasks", "the pipeline's definition could not be read", width)
        return lines
    tasks = progress(pipeline, rows)
    lines += _fact("tasks", _task_counts(tasks), width)
    lines.append("")
    nodes = list(tree(tasks))
    for i, node in enumerate(nodes):
        has_children = i + 1 < len(nodes) and nodes[i + 1].level > node.level
        lines += node_lines(node, has_children, width)
    return lines


def _task_counts(tasks: Sequence[TaskProgress]) -> str:
    """``5: 2 succeeded, 1 running, 2 waiting``: each task counted once, by its state."""
    found: dict[str, int] = {}
    for task in tasks:
        found[task.state] = found.get(task.state, 0) + 1
    order = ("running", "pending", "started", "succeeded", "dead", "cancelled", "skipped")
    keys = [s for s in order if s in found] + sorted(s for s in found if s not in order)
    return f"{len(tasks)}: " + ", ".join(f"{found[s]} {s}" for s in keys)


def details(task: TaskProgress) -> list[str]:
    """What is said of a task after its name: its state (and why, or its instances by
    state), its run."""
    state = task.state
    if task.reason:
        state += f" ({task.reason})"
    elif task.expanded:
        state += f" ({task.summary()})"
    out = [state]
    if task.run_id is not None:
        out.append(f"run {task.run_id}")
    return out


def title(task: TaskProgress, edge: str = "on_success") -> str:
    """A task's name, with the number of a fanned-out task's instances (``square
    \u00d7100``) and the edge's condition when it is not the default."""
    name = task.name + (f" {TIMES}{len(task.instances)}" if task.expanded else "")
    return name if edge == "on_success" else f"{name} [{edge}]"


def node_lines(node: TreeNode, has_children: bool, width: int | None) -> list[str]:
    """A task's lines in the tree: its name and details on one line if they fit, else
    the details under the name; then what else it waits for, and a message."""
    task = node.task
    levels = node.last[1:]  # a root has no connector
    extra = []
    deepest = None if width is None else max(3, width // 6)
    if deepest is not None and len(levels) >= deepest:
        # A long chain would push its tasks off the screen a step at a time: past half
        # the width the tree stops indenting (what is deeper comes next in the same
        # column), and each task drawn there says what it comes after.
        if len(levels) > deepest:
            levels = (*levels[: deepest - 1], levels[-1])
            extra.append(f"after: {node.parent}")
        more = has_children or not levels[-1]
        base = "".join("   " if last else "│  " for last in levels[:-1])
        prefix = base + ("├─ " if more else "└─ ")
        under = base + ("│  " if more else "   ") + "   "
    else:
        prefix = "".join("   " if last else "│  " for last in levels[:-1])
        if levels:
            prefix += "└─ " if levels[-1] else "├─ "
        under = "".join("   " if last else "│  " for last in levels)
        under += "│  " if has_children else "   "
    name = title(task, node.edge)
    facts = details(task)
    if node.also_after:
        extra.append("also after: " + ", ".join(_edge(p, on) for p, on in node.also_after))
    if task.message:
        extra.append(task.message)
    if width is None:
        return [_GAP.join([prefix + name, *facts, *extra])]
    first = _GAP.join([prefix + name, *facts])
    if len(first) <= width:
        lines = [first]
    elif len(prefix + name) <= width:
        lines = [prefix + name, *_wrapped(under, _GAP.join(facts), width)]
    else:
        # Deep in the tree, a long name with its edge: the edge goes with the details,
        # and a name wider than the room left is folded, never cut.
        lines = _folded(prefix, under, title(task), width)
        facts = [f"[{node.edge}]", *facts] if node.edge != "on_success" else facts
        lines += _wrapped(under, _GAP.join(facts), width)
    for line in extra:
        lines += _wrapped(under, line, width)
    return lines


def _edge(task: str, on: str) -> str:
    return task if on == "on_success" else f"{task} [{on}]"


def _folded(prefix: str, under: str, name: str, width: int) -> list[str]:
    room = max(width - len(prefix), 1)
    lines = [prefix + name[:room]]
    rest = name[room:]
    room = max(width - len(under), 1)
    while rest:
        lines.append(under + rest[:room])
        rest = rest[room:]
    return lines


def _wrapped(indent: str, value: str, width: int) -> list[str]:
    room = max(width - len(indent), 20)
    parts = textwrap.wrap(value, room, break_long_words=False, break_on_hyphens=False)
    return [indent + part for part in parts or [""]]


def _fact(label: str, value: Any, width: int | None) -> list[str]:
    shown = text(value)
    head = f"{label + ':':<{_LABEL}}"
    if width is None or len(head) + len(shown) <= width:
        return [(head + shown).rstrip()]
    parts = textwrap.wrap(
        shown, max(width - _LABEL, 20), break_long_words=False, break_on_hyphens=False
    )
    return [head + parts[0], *(" " * _LABEL + p for p in parts[1:])]
