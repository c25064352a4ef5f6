"""A pipeline's definition: its tasks, the edges between them, and the checks that refuse
a bad one before anything is stored (decision 0025).

A pipeline is a directed acyclic graph. Each task is an action (a handler, a webhook, a
command or a publish, as a job's) with its own policies; an edge ``{"from": "a", "to":
"b", "on": ...}`` makes ``b`` wait for ``a`` and says which of ``a``'s endings let ``b``
run: ``on_success`` (the default), ``on_failure`` (``a`` ended dead: a cleanup task) or
``on_finished`` (either). A task may fan out: ``fan_out: {"max": N}`` makes one instance
of it per item of the list its single parent returned (at most ``N``, at most
:data:`MAX_FAN_OUT`), and its children wait for every instance.

Everything here is pure: :func:`parse_definition` validates user input and raises
:class:`~cronwheel.errors.InvalidInput` naming the field (``tasks.c``, ``edges.2.to``), a
cycle named along its path (``tasks.c → tasks.a → tasks.c``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cronwheel.core.jobspec import (
    CommandSpec,
    ConcurrencySpec,
    HandlerSpec,
    Integer,
    PoolName,
    PublishSpec,
    RetrySpec,
    WebhookSpec,
    _check_http_url,
    invalid_input,
    with_command_timeout,
)
from cronwheel.core.model import DEFAULT_POOL, MAX_NOTIFY_TARGETS
from cronwheel.core.pipelines.model import EdgeCondition as EdgeCondition
from cronwheel.core.pipelines.model import FailurePolicy as FailurePolicy
from cronwheel.errors import InvalidInput

MAX_TASKS = 100
"""The most tasks one pipeline may have: a larger graph is refused at creation."""
MAX_EDGES = 1000
MAX_FAN_OUT = 1000
"""The most instances one fanned-out task may expand into (its ``fan_out.max`` is at most
this; a parent's list longer than the task's ``max`` fails that parent's run)."""

TaskName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")]

_STRICT = ConfigDict(extra="forbid", frozen=True)


class FanOutSpec(BaseModel):
    model_config = _STRICT
    max: Integer = Field(ge=1, le=MAX_FAN_OUT)


class TaskSpec(BaseModel):
    """One task: an action with a job's policies."""

    model_config = _STRICT
    action: Annotated[
        WebhookSpec | HandlerSpec | CommandSpec | PublishSpec, Field(discriminator="type")
    ]
    pool: PoolName = DEFAULT_POOL
    priority: Literal["critical", "high", "normal", "low"] = "normal"
    retry: RetrySpec = Field(default_factory=RetrySpec)  # type: ignore[arg-type]
    timeout_seconds: float = Field(300.0, gt=0, le=7 * 86_400)
    fan_out: FanOutSpec | None = None
    concurrency: ConcurrencySpec | None = None
    """A concurrency key and limit for the task's runs (decision 0031), rendered from a
    fanned-out instance's item, else from the pipeline job's payload."""

    @model_validator(mode="before")
    @classmethod
    def _command_timeout(cls, data: Any) -> Any:
        # A command task's own timeout_seconds is the task's when it gives none.
        return with_command_timeout(data)


class EdgeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    from_: TaskName = Field(alias="from")
    to: TaskName
    on: EdgeCondition = EdgeCondition.ON_SUCCESS


PipelineEvent = Literal["succeeded", "failed", "cancelled"]


class PipelineNotifySpec(BaseModel):
    """A pipeline's notification target: which endings of its runs to POST, and where
    (events ``pipeline_succeeded``, ``pipeline_failed``, ``pipeline_cancelled``)."""

    model_config = _STRICT
    on: Annotated[list[PipelineEvent], Field(min_length=1, max_length=3)]
    url: Annotated[str, Field(max_length=2048)]

    @field_validator("on")
    @classmethod
    def _distinct(cls, events: list[str]) -> list[str]:
        if len(set(events)) != len(events):
            raise ValueError("names an event twice")
        return events

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        return _check_http_url(url)


class PipelineSpec(BaseModel):
    """A pipeline as a user describes it."""

    model_config = _STRICT
    tasks: dict[TaskName, TaskSpec] = Field(min_length=1, max_length=MAX_TASKS)
    edges: list[EdgeSpec] = Field(default_factory=list, max_length=MAX_EDGES)
    failure_policy: FailurePolicy = FailurePolicy.STOP
    notify: list[PipelineNotifySpec] = Field(default_factory=list, max_length=MAX_NOTIFY_TARGETS)


@dataclass(frozen=True, slots=True)
class Definition:
    """A validated pipeline definition: its spec, its tasks in an order where every task
    comes after its prerequisites, and each task's upstream edges."""

    spec: PipelineSpec
    order: tuple[str, ...]
    upstream: Mapping[str, tuple[EdgeSpec, ...]]

    @property
    def roots(self) -> tuple[str, ...]:
        """The tasks that wait for nothing: they start when the pipeline run does."""
        return tuple(t for t in self.order if not self.upstream[t])

    def fingerprint(self) -> str:
        """The definition's content hash: an update that changes nothing makes no new
        version."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The definition as stored and as the API returns it. No targets: no
        ``notify`` key, so a definition stored before targets existed keeps its
        fingerprint."""
        out: dict[str, Any] = self.spec.model_dump(mode="json", by_alias=True)
        if not out["notify"]:
            del out["notify"]
        # Likewise a task without a concurrency key has no ``concurrency`` key (0031).
        for task in out["tasks"].values():
            if task.get("concurrency") is None:
                task.pop("concurrency", None)
        return out


def parse_definition(data: Mapping[str, Any]) -> Definition:
    """Validate a pipeline definition; raise :class:`InvalidInput` naming the first bad
    field, an edge to an unknown task, a task that fans out without exactly one parent,
    or a cycle (with its path)."""
    try:
        spec = PipelineSpec.model_validate(data)
    except ValidationError as exc:
        raise invalid_input(exc) from None
    upstream: dict[str, list[EdgeSpec]] = {name: [] for name in spec.tasks}
    seen: set[tuple[str, str]] = set()
    for i, edge in enumerate(spec.edges):
        for end, name in (("from", edge.from_), ("to", edge.to)):
            if name not in spec.tasks:
                raise InvalidInput(f"edges.{i}.{end}", f"{name!r} is not a task of this pipeline")
        if edge.from_ == edge.to:
            raise InvalidInput(f"edges.{i}", f"tasks.{edge.to} cannot wait for itself")
        if (edge.from_, edge.to) in seen:
            raise InvalidInput(f"edges.{i}", f"{edge.from_} → {edge.to} is given twice")
        seen.add((edge.from_, edge.to))
        upstream[edge.to].append(edge)
    for name, task in spec.tasks.items():
        if task.fan_out is not None and len(upstream[name]) != 1:
            raise InvalidInput(
                f"tasks.{name}.fan_out",
                "a task fans out over its parent's list: it needs exactly one upstream task",
            )
    order = _topological(spec.tasks, spec.edges)
    return Definition(spec, order, {t: tuple(e) for t, e in upstream.items()})


def _topological(tasks: Mapping[str, TaskSpec], edges: Sequence[EdgeSpec]) -> tuple[str, ...]:
    """The tasks in an order where each comes after every task it waits for, or
    InvalidInput naming a cycle along its path."""
    downstream: dict[str, list[str]] = {name: [] for name in tasks}
    for edge in edges:
        downstream[edge.from_].append(edge.to)
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(tasks, WHITE)
    finished: list[str] = []
    for start in tasks:
        if colour[start] != WHITE:
            continue
        # Iterative depth-first search: a deep chain of tasks cannot hit the recursion limit.
        path = [start]
        colour[start] = GREY
        branches = [iter(downstream[start])]
        while branches:
            nxt = next(branches[-1], None)
            if nxt is None:
                done = path.pop()
                colour[done] = BLACK
                finished.append(done)
                branches.pop()
            elif colour[nxt] == GREY:
                cycle = [*path[path.index(nxt) :], nxt]
                raise InvalidInput("edges", "a cycle: " + " → ".join(f"tasks.{t}" for t in cycle))
            elif colour[nxt] == WHITE:
                colour[nxt] = GREY
                path.append(nxt)
                branches.append(iter(downstream[nxt]))
    finished.reverse()
    return tuple(finished)
