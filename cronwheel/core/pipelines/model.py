"""A stored pipeline and its versions (decision 0025): plain frozen dataclasses, no I/O.

A pipeline is the named thing a tenant edits; each change of its definition adds an
immutable :class:`PipelineVersion`, and the pipeline's ``version`` names the one it shows
(its latest, unless a given version was asked for).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from cronwheel.core.model import JSON, new_id


class EdgeCondition(StrEnum):
    """An edge's condition (the definition's ``on``, cronwheel.core.pipelines.definition):
    which ending of the upstream task lets the downstream one run."""

    ON_SUCCESS = "on_success"
    ON_FAILURE = "on_failure"
    ON_FINISHED = "on_finished"


class FailurePolicy(StrEnum):
    """What a pipeline run does after a task has failed for good (ended dead)."""

    STOP = "stop"
    """Start no new task; the tasks already running finish; the run ends ``failed``."""
    CONTINUE = "continue"
    """Run every task whose edges still allow it; the run ends ``failed`` all the same."""


class PipelineState(StrEnum):
    """A pipeline is live until deleted; a deleted one keeps its versions for audit and
    frees its name."""

    ACTIVE = "active"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A pipeline at one of its versions.

    ``definition`` is :meth:`~cronwheel.core.pipelines.definition.Definition.to_dict` of a
    validated definition, ``fingerprint`` its content hash. ``latest_version`` is the
    version the next update must name; ``updated_at`` is when the latest version (or the
    deletion) was written.
    """

    id: str
    tenant_id: str
    name: str
    version: int
    definition: Mapping[str, JSON]
    fingerprint: str
    created_at: datetime
    updated_at: datetime
    latest_version: int
    state: PipelineState = PipelineState.ACTIVE


@dataclass(frozen=True, slots=True)
class PipelineVersion:
    """One immutable version of a pipeline's definition: who wrote it, and when."""

    pipeline_id: str
    version: int
    definition: Mapping[str, JSON]
    fingerprint: str
    created_at: datetime
    actor: str


@dataclass(frozen=True, slots=True)
class PipelineTask:
    """One task instance of a pipeline run that started or was skipped: a task with no
    such row still waits for its prerequisites."""

    task: str
    instance: int
    state: str
    """``started`` (its run exists), ``succeeded``, ``dead``, ``cancelled`` or ``skipped``."""
    run_id: int | None
    reason: str | None = None
    message: str | None = None
    updated_at: datetime | None = None
    run_state: str | None = None
    """Its run's own state (``pending``, ``running``…), when read with the run."""


@dataclass(frozen=True, slots=True)
class PipelineRun:
    """One execution of a pipeline at the version it started with (decision 0025)."""

    id: str
    tenant_id: str
    pipeline_id: str
    version: int
    job_id: str
    """The job whose runs the tasks' runs are: the trigger job, or the pipeline's own."""
    state: str
    """``running``, ``succeeded``, ``failed`` or ``cancelled``."""
    actor: str
    created_at: datetime
    finished_at: datetime | None = None
    cancel_requested: bool = False
    trigger_run_id: int | None = None
    tasks: tuple[PipelineTask, ...] = ()
    """Every task row, in task order then instance, when read one at a time."""


@dataclass(frozen=True, slots=True)
class PipelineRunStart:
    """What the store needs to start a pipeline run: the definition is the version's,
    already validated."""

    id: str
    tenant_id: str
    pipeline_id: str
    version: int
    definition: Mapping[str, JSON]
    job_id: str
    job_version: int
    actor: str
    now: datetime
    trigger_run_id: int | None = None

    @classmethod
    def of(
        cls,
        pipeline: Pipeline,
        *,
        job_id: str,
        job_version: int,
        actor: str,
        now: datetime,
        trigger_run_id: int | None = None,
    ) -> PipelineRunStart:
        """A new pipeline run of ``pipeline`` at the version it shows, as runs of the
        job ``job_id``."""
        return cls(
            id=new_id(),
            tenant_id=pipeline.tenant_id,
            pipeline_id=pipeline.id,
            version=pipeline.version,
            definition=pipeline.definition,
            job_id=job_id,
            job_version=job_version,
            actor=actor,
            now=now,
            trigger_run_id=trigger_run_id,
        )
