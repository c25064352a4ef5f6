"""How a task that starts becomes a run: the columns a store writes for it (decision
0025). Shared by both stores, so a task's run looks the same on each."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cronwheel.core.model import Priority
from cronwheel.core.pipelines.engine import StartTask

if TYPE_CHECKING:
    from cronwheel.core.pipelines.definition import Definition

_PRIORITIES = {p.name.lower(): p for p in Priority}


@dataclass(frozen=True, slots=True)
class TaskRun:
    """A task instance's run, ready to insert: JSON columns as text."""

    task: str
    instance: int
    pool: str
    priority: int
    max_attempts: int
    task_spec: str
    inputs: str
    payload: str | None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None


def has_keys(definition: Definition, starts: list[StartTask]) -> bool:
    """Whether any of ``starts`` is of a task with a concurrency key: only then does a
    store read the job's payload to render them."""
    return any(definition.spec.tasks[s.task].concurrency is not None for s in starts)


def task_runs(
    definition: Definition, starts: list[StartTask], job_payload: Any = None
) -> list[TaskRun]:
    """The runs of ``starts``: each carries its task's action, retry policy and timeout
    (``task_spec``, which stands in for its job's at claim), and its inputs; a task with
    a concurrency key, the key rendered from the instance's item (a fanned-out task's),
    else from ``job_payload`` (decision 0031)."""
    out = []
    specs: dict[str, str] = {}
    for start in starts:
        task = definition.spec.tasks[start.task]
        spec = specs.get(start.task)
        if spec is None:
            spec = specs[start.task] = json.dumps(
                {
                    "action": task.action.model_dump(mode="json", exclude_none=True),
                    "retry": task.retry.policy().to_dict(),
                    "timeout_seconds": task.timeout_seconds,
                },
                separators=(",", ":"),
            )
        payload: Any = json.dumps(start.payload) if start.has_payload else None
        key, limit = None, None
        if task.concurrency is not None:
            policy = task.concurrency.policy()
            key = policy.render(start.payload if start.has_payload else job_payload)
            limit = policy.limit
        out.append(
            TaskRun(
                task=start.task,
                instance=start.instance,
                pool=task.pool,
                priority=int(_PRIORITIES[task.priority]),
                max_attempts=task.retry.max_attempts,
                task_spec=spec,
                inputs=json.dumps(start.inputs),
                payload=payload,
                concurrency_key=key,
                concurrency_limit=limit,
            )
        )
    return out


Reseal = Callable[[str, Mapping[str, Any]], Mapping[str, Any] | None]


def resealed_definition(
    tenant_id: str, definition: Mapping[str, Any], reseal: Reseal
) -> dict[str, Any] | None:
    """A stored definition with each task's action, and each notification target's URL,
    sealed again by ``reseal``; None if nothing changed. (A target's URL goes through
    ``reseal`` as a webhook action's would: ``{"type": "webhook", "url": url}``.)"""
    tasks = dict(definition.get("tasks") or {})
    changed = False
    for name, task in tasks.items():
        action = reseal(tenant_id, task["action"])
        if action is not None:
            tasks[name] = {**task, "action": dict(action)}
            changed = True
    targets = [dict(t) for t in definition.get("notify") or ()]
    for target in targets:
        resealed = reseal(tenant_id, {"type": "webhook", "url": str(target.get("url") or "")})
        if resealed is not None:
            target["url"] = resealed["url"]
            changed = True
    if not changed:
        return None
    out = {**definition, "tasks": tasks}
    if targets:
        out["notify"] = targets
    return out


def resealed_spec(
    tenant_id: str, task_spec: Mapping[str, Any], reseal: Reseal
) -> dict[str, Any] | None:
    """A task run's ``task_spec`` with its action sealed again; None if unchanged."""
    action = reseal(tenant_id, task_spec["action"])
    return None if action is None else {**task_spec, "action": dict(action)}
