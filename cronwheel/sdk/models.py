"""What the API answers, as typed objects (see docs/api.md). Unknown fields are kept, so
an SDK older than its server still works."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class NoticeInfo(_Wire):
    """Something to know that is not an error, e.g. ``no_live_worker``."""

    code: str
    message: str


class LastRunInfo(_Wire):
    """How a job's newest finished run ended."""

    id: int
    state: str
    scheduled_for: datetime
    finished_at: datetime
    attempt: int
    reason: str | None = None
    last_error: str | None = None


class JobInfo(_Wire):
    id: str
    tenant_id: str
    name: str
    schedule: dict[str, Any]
    action: dict[str, Any]
    pool: str
    payload: Any = None
    priority: str
    retry: dict[str, Any]
    timeout_seconds: float
    misfire: dict[str, Any]
    overlap: str
    jitter_seconds: float
    catchup_seconds: float
    delivery: str
    state: str
    version: int
    next_fire_at: datetime | None = None
    last_fire_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    last_run: LastRunInfo | None = None
    """The newest finished run; None while none has finished (or from an older server)."""
    notices: list[NoticeInfo] = []
    concurrency: dict[str, Any] | None = None
    """Its concurrency key template and limit, ``{"key", "limit"}``; None: none."""


class AttemptInfo(_Wire):
    id: int
    run_id: int
    job_id: str
    attempt: int
    worker_id: str | None = None
    fence: int
    started_at: datetime | None = None
    finished_at: datetime
    lag_seconds: float | None = None
    outcome: str
    error_class: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    """What a webhook target answered; None for a handler (or from an older server)."""
    output: CommandOutputInfo | None = None
    """What a command left (its exit, the end of its stdout and stderr); None for other
    actions (or from an older server)."""


class CommandOutputInfo(_Wire):
    """How a command ended, and the last 64 KiB of each of its streams."""

    exit_code: int | None = None
    signal: str | None = None
    stdout: str = ""
    stderr: str = ""


class ProgressInfo(_Wire):
    """How far a run got, as its handler last said (``ctx.progress``)."""

    fraction: float
    message: str | None = None
    at: datetime
    """When it was stored."""


class CheckpointInfo(_Wire):
    """Where a run's next attempt resumes (``ctx.checkpoint``)."""

    state: Any = None
    at: datetime
    """When it was stored."""


class RunInfo(_Wire):
    id: int
    tenant_id: str
    job_id: str
    scheduled_for: datetime
    available_at: datetime
    state: str
    pool: str
    priority: str | int
    attempt: int
    max_attempts: int
    fence: int
    idempotency_key: str
    reason: str | None = None
    last_error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    payload: Any = None
    """The run's own payload, given when it was enqueued; None: its job's payload."""
    progress: ProgressInfo | None = None
    """The last progress an attempt reported; None if none did (or an older server)."""
    checkpoint: CheckpointInfo | None = None
    """The last checkpoint an attempt stored; None if none did (or an older server)."""
    attempts: list[AttemptInfo] | None = None
    notices: list[NoticeInfo] = []
    concurrency_key: str | None = None
    """Its rendered concurrency key; None: none (or an older server)."""
    concurrency_limit: int | None = None


class BackfillInfo(_Wire):
    """What a backfill did: of the schedule's ``occurrences`` in the range (the first
    and the last of them), ``created`` had no run and got one."""

    occurrences: int
    created: int
    first: datetime | None = None
    last: datetime | None = None


class NotificationInfo(_Wire):
    """One event of a run for one notification target (``GET /v1/notifications``)."""

    id: int
    event_id: str
    event: str
    job_id: str
    job_name: str
    run_id: int
    attempt: int
    url: str
    state: str
    tries: int
    next_at: datetime
    last_error: str | None = None
    occurred_at: datetime


class Page(_Wire, Generic[T]):
    items: list[T]
    next_cursor: str | None = None


class KeyInfo(_Wire):
    id: str
    tenant_id: str
    role: str
    name: str | None = None
    created_at: datetime
    token: str | None = None
    """Only in the answer to a create: the secret is shown once."""


class AuditInfo(_Wire):
    """One audit log entry: who (``actor``) did what (``action``) to which entity, when."""

    id: int
    tenant_id: str
    entity: str
    entity_id: str
    action: str
    actor: str
    at: datetime
    details: dict[str, Any] | None = None


class TenantInfo(_Wire):
    id: str
    name: str
    max_jobs: int | None = None
    max_creates_per_second: float | None = None
    claim_weight: float = 1.0
    max_running: int | None = None
    created_at: datetime


class PipelineInfo(_Wire):
    """A pipeline at one of its versions (decision 0025)."""

    id: str
    tenant_id: str
    name: str
    version: int
    latest_version: int
    state: str
    fingerprint: str
    tasks: dict[str, Any]
    edges: list[dict[str, Any]]
    failure_policy: str
    created_at: datetime
    updated_at: datetime
    notify: list[dict[str, Any]] = []
    """Its notification targets (how its runs end), URLs with passwords masked."""

    @property
    def definition(self) -> dict[str, Any]:
        """The definition alone, as :meth:`~cronwheel.sdk.Client.update_pipeline` takes it."""
        return {
            "tasks": self.tasks,
            "edges": self.edges,
            "failure_policy": self.failure_policy,
            "notify": self.notify,
        }


class PipelineVersionInfo(_Wire):
    """One immutable version of a pipeline's definition."""

    version: int
    fingerprint: str
    actor: str
    created_at: datetime
    tasks: dict[str, Any]
    edges: list[dict[str, Any]]
    failure_policy: str
    notify: list[dict[str, Any]] = []


class PipelineTaskInfo(_Wire):
    """One task instance of a pipeline run that started, or was skipped or failed without
    a run; a task of the definition with no such row still waits for its prerequisites."""

    task: str
    instance: int
    """0, or the item's index for an instance of a fanned-out task."""
    state: str
    """``started`` (its run exists), ``succeeded``, ``dead``, ``cancelled`` or ``skipped``."""
    run_id: int | None = None
    """Its run (:meth:`~cronwheel.sdk.Client.get_run`); None if it never had one."""
    run_state: str | None = None
    """Its run's own state (``pending``, ``running``…)."""
    reason: str | None = None
    """Why it was skipped or failed without a run (``upstream_failed``…)."""
    message: str | None = None
    updated_at: datetime | None = None


class PipelineRunInfo(_Wire):
    """One execution of a pipeline at the version it started with (decision 0025)."""

    id: str
    tenant_id: str
    pipeline_id: str
    version: int
    job_id: str
    """The job whose runs its tasks' runs are."""
    state: str
    """``running``, ``succeeded``, ``failed`` or ``cancelled``."""
    cancel_requested: bool = False
    trigger_run_id: int | None = None
    actor: str
    created_at: datetime
    finished_at: datetime | None = None
    tasks: list[PipelineTaskInfo] = []
    """Every task row when read one at a time; empty in lists."""
