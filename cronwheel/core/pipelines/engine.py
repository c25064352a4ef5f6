"""What a pipeline run does next: the pure rule that turns its tasks' states into the
tasks to start, the tasks to skip and the run's ending (decision 0025).

The stores call :func:`plan` inside the transaction that records a task's ending, under
the pipeline run's row lock, and write what it returns in that same transaction: a task
is started by inserting its row keyed by ``(pipeline run, task, instance)``, so it
starts once however many completions, crashes and racing processes reach this point.
Nothing here does I/O; every input is a plain mapping, so the rule is tested alone
(``tests/unit/test_pipeline_engine.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from cronwheel.core.pipelines.model import EdgeCondition, FailurePolicy

if TYPE_CHECKING:  # a store plans with a parsed definition; parsing is pydantic's, not here
    from cronwheel.core.pipelines.definition import Definition


class TaskState(StrEnum):
    """Where one task instance of a pipeline run stands. A task with no row yet waits."""

    STARTED = "started"
    """Its run exists (pending, running, or waiting for a retry)."""
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    """Its run ended dead (or a fan-out could not expand): a failure."""
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    """It will never run; the row's reason says why."""


FINISHED = frozenset({TaskState.SUCCEEDED, TaskState.DEAD, TaskState.CANCELLED, TaskState.SKIPPED})
FAILED = frozenset({TaskState.DEAD, TaskState.CANCELLED})


class PipelineRunState(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


REASON_UPSTREAM_FAILED = "upstream_failed"
"""An ``on_success`` (or ``on_finished``) prerequisite can no longer succeed."""
REASON_UPSTREAM_SUCCEEDED = "upstream_succeeded"
"""An ``on_failure`` (cleanup) task whose upstream task did not fail."""
REASON_UPSTREAM_SKIPPED = "upstream_skipped"
REASON_PIPELINE_STOPPED = "pipeline_stopped"
"""``failure_policy: stop``: a task failed unhandled, so nothing new starts."""
REASON_PIPELINE_CANCELLED = "pipeline_cancelled"
REASON_FAN_OUT_EMPTY = "fan_out_empty"
REASON_FAN_OUT_INVALID = "fan_out_invalid"


@dataclass(frozen=True, slots=True)
class TaskRow:
    """A stored task instance: its state, reason and (once it succeeded) its result."""

    state: TaskState
    reason: str | None = None
    result: Any = None


@dataclass(frozen=True, slots=True)
class StartTask:
    """A task instance to start now: its run gets ``inputs`` (``ctx.inputs``) and, for
    an instance of a fanned-out task, its item as the run's payload."""

    task: str
    instance: int
    inputs: Mapping[str, Any]
    payload: Any = None
    has_payload: bool = False


@dataclass(frozen=True, slots=True)
class SkipTask:
    task: str
    instance: int
    reason: str
    state: TaskState = TaskState.SKIPPED
    """SKIPPED, or DEAD for a fan-out whose parent's result cannot be expanded."""
    message: str | None = None


@dataclass(slots=True)
class Plan:
    start: list[StartTask] = field(default_factory=list)
    skip: list[SkipTask] = field(default_factory=list)
    ending: PipelineRunState | None = None
    """The pipeline run's final state once every task has finished; None: it goes on."""
    failed: list[str] = field(default_factory=list)
    """With a ``failed`` ending: the tasks whose failure nothing handled (``tasks.b``)."""


Rows = Mapping[tuple[str, int], TaskRow]


def _task_state(mine: list[TaskRow]) -> TaskState | None:
    """One task's state over its instances: None while it waits or runs. A fanned-out
    task succeeded when every instance did, failed when any failed."""
    if not mine:
        return None
    if any(row.state is TaskState.STARTED for row in mine):
        return None
    if len(mine) == 1:
        return mine[0].state
    if any(row.state in FAILED for row in mine):
        return TaskState.DEAD
    return TaskState.SUCCEEDED


def _result(task: str, definition: Definition, by_task: Mapping[str, list[TaskRow]]) -> Any:
    """A finished task's result as its children see it: a fanned-out task's instances'
    results as a list in instance order."""
    mine = by_task.get(task, [])
    if definition.spec.tasks[task].fan_out is None:
        return mine[0].result if mine else None
    return [row.result for row in mine]


def _edge_met(condition: EdgeCondition, upstream: TaskState) -> bool:
    if condition is EdgeCondition.ON_SUCCESS:
        return upstream is TaskState.SUCCEEDED
    if condition is EdgeCondition.ON_FAILURE:
        return upstream in FAILED
    return upstream in FAILED or upstream is TaskState.SUCCEEDED


def _handled(definition: Definition, task: str) -> bool:
    """A failure of ``task`` is handled when some edge out of it fires on failure."""
    return any(
        edge.from_ == task and edge.on is not EdgeCondition.ON_SUCCESS
        for edge in definition.spec.edges
    )


def unhandled_failure(definition: Definition, rows: Rows) -> bool:
    return any(
        row.state in FAILED and not _handled(definition, name) for (name, _), row in rows.items()
    )


def plan(definition: Definition, rows: Rows, *, cancelled: bool = False) -> Plan:
    """What to do now, given every stored task row of a pipeline run (``rows`` keyed by
    ``(task, instance)``). Tasks are visited in dependency order, so a skip decided here
    is seen by the tasks after it in the same call: skips propagate in one plan."""
    out = Plan()
    known: dict[tuple[str, int], TaskRow] = dict(rows)
    # Each task's rows in instance order, grouped once: a fan-in over 1,000 instances
    # plans once per instance's ending, so a scan of every row per task would be quadratic.
    by_task: dict[str, list[TaskRow]] = {}
    for (name, _), row in sorted(known.items()):
        by_task.setdefault(name, []).append(row)

    def record(task: str, instance: int, row: TaskRow) -> None:
        known[(task, instance)] = row
        by_task.setdefault(task, []).append(row)

    stop = cancelled or (
        definition.spec.failure_policy is FailurePolicy.STOP
        and unhandled_failure(definition, known)
    )
    for task in definition.order:
        if task in by_task:
            continue
        edges = definition.upstream[task]
        states = [_task_state(by_task.get(edge.from_, [])) for edge in edges]
        skip_reason = None
        for edge, state in zip(edges, states, strict=True):
            if state is None or _edge_met(edge.on, state):
                continue
            if state is TaskState.SKIPPED:
                skip_reason = REASON_UPSTREAM_SKIPPED
            elif state is TaskState.SUCCEEDED:
                skip_reason = REASON_UPSTREAM_SUCCEEDED
            else:
                skip_reason = REASON_UPSTREAM_FAILED
            break
        if skip_reason is None and any(state is None for state in states):
            continue  # still waiting for a prerequisite
        if skip_reason is None and stop:
            skip_reason = REASON_PIPELINE_CANCELLED if cancelled else REASON_PIPELINE_STOPPED
        if skip_reason is not None:
            out.skip.append(SkipTask(task, 0, skip_reason))
            record(task, 0, TaskRow(TaskState.SKIPPED, skip_reason))
            continue
        inputs = {
            edge.from_: _result(edge.from_, definition, by_task)
            if state is TaskState.SUCCEEDED
            else None
            for edge, state in zip(edges, states, strict=True)
        }
        fan_out = definition.spec.tasks[task].fan_out
        if fan_out is None:
            out.start.append(StartTask(task, 0, inputs))
            record(task, 0, TaskRow(TaskState.STARTED))
            continue
        parent = edges[0].from_
        items = inputs[parent]
        problem = None
        if not isinstance(items, list):
            problem = f"tasks.{parent} returned {type(items).__name__}, not a list to fan out over"
        elif len(items) > fan_out.max:
            problem = (
                f"tasks.{parent} returned {len(items)} items; tasks.{task}.fan_out.max is "
                f"{fan_out.max}"
            )
        if problem is not None:
            out.skip.append(SkipTask(task, 0, REASON_FAN_OUT_INVALID, TaskState.DEAD, problem))
            record(task, 0, TaskRow(TaskState.DEAD, REASON_FAN_OUT_INVALID))
            continue
        assert isinstance(items, list)
        if not items:
            out.skip.append(SkipTask(task, 0, REASON_FAN_OUT_EMPTY))
            record(task, 0, TaskRow(TaskState.SKIPPED, REASON_FAN_OUT_EMPTY))
            continue
        for i, item in enumerate(items):
            out.start.append(StartTask(task, i, {}, item, has_payload=True))
            record(task, i, TaskRow(TaskState.STARTED))
    if all(t in by_task for t in definition.order) and all(
        row.state in FINISHED for row in known.values()
    ):
        if cancelled:
            out.ending = PipelineRunState.CANCELLED
        elif unhandled_failure(definition, known):
            out.ending = PipelineRunState.FAILED
            out.failed = sorted(
                {
                    f"tasks.{name}"
                    for (name, _), row in known.items()
                    if row.state in FAILED and not _handled(definition, name)
                }
            )
        else:
            out.ending = PipelineRunState.SUCCEEDED
    return out


def needed_results(definition: Definition, rows: Rows) -> set[str]:
    """The tasks whose results :func:`plan` may read now: the succeeded prerequisites of
    tasks that have not started. A store loads only these (a fan-in's 1,000 results are
    read once, when the last instance ends, not at every instance's ending)."""
    by_task: dict[str, list[TaskRow]] = {}
    for (name, _), row in rows.items():
        by_task.setdefault(name, []).append(row)
    need = set()
    for task in definition.order:
        if task in by_task:
            continue
        for edge in definition.upstream[task]:
            if _task_state(by_task.get(edge.from_, [])) is TaskState.SUCCEEDED:
                need.add(edge.from_)
    return need


RUN_ENDINGS = {
    "succeeded": TaskState.SUCCEEDED,
    "dead": TaskState.DEAD,
    "cancelled": TaskState.CANCELLED,
    "skipped": TaskState.SKIPPED,
}
"""A task's state once its run ended in each of the run's final states."""


def ending_targets(definition: Definition, ending: PipelineRunState) -> list[tuple[int, str]]:
    """The pipeline's notification targets (index, url) that asked for ``ending``."""
    return [
        (i, target.url)
        for i, target in enumerate(definition.spec.notify)
        if ending.value in target.on
    ]


def ending_event_id(pipeline_run_id: str, state: str, at: datetime) -> str:
    """The event id of a pipeline run's ending: a retried task can end the same pipeline
    run again later, a new event with an id of its own."""
    return f"pipeline:{pipeline_run_id}:{state}:{at.isoformat()}"


def downstream(definition: Definition, task: str) -> set[str]:
    """Every task that waits, directly or not, for ``task``."""
    below: set[str] = set()
    frontier = [task]
    while frontier:
        here = frontier.pop()
        for edge in definition.spec.edges:
            if edge.from_ == here and edge.to not in below:
                below.add(edge.to)
                frontier.append(edge.to)
    return below
