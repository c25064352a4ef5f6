"""What the API answers: pydantic models that ``/openapi.json`` documents, built from the
engine's dataclasses. Times are ISO 8601 with ``+00:00`` (pydantic would write ``Z``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

from cronwheel.core.model import (
    ApiKey,
    Attempt,
    AttemptOutcome,
    AuditEntry,
    Backoff,
    ClaimedRun,
    Delivery,
    Job,
    JobState,
    LastRun,
    MisfireMode,
    Notification,
    Overlap,
    Priority,
    Role,
    Run,
    RunState,
    Tenant,
    WorkerInfo,
)
from cronwheel.core.pipelines.definition import FailurePolicy
from cronwheel.core.pipelines.model import Pipeline, PipelineRun, PipelineState, PipelineVersion
from cronwheel.security.redact import mask_action, mask_url
from cronwheel.security.sealing import Sealer, SecretsKeyMissing, SecretUnreadable, open_action
from cronwheel.web.notices import Notice


def rfc3339(moment: datetime) -> str:
    """``moment`` as RFC 3339 has it: in its own offset when that is whole minutes, in
    UTC otherwise (a zone's local mean time before 1900 or so, +00:09:21 in Paris, which
    RFC 3339 and most parsers cannot read)."""
    offset = moment.utcoffset()
    if offset is not None and offset.seconds % 60:
        moment = moment.astimezone(UTC)
    return moment.isoformat()


Instant = Annotated[
    datetime,
    PlainSerializer(rfc3339, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
PriorityName = Literal["critical", "high", "normal", "low"]
T = TypeVar("T")


def fields(source: object, model: type[BaseModel], *skip: str) -> dict[str, Any]:
    """The attributes of ``source`` that ``model`` has a field for, but ``skip``."""
    return {name: getattr(source, name) for name in model.model_fields if name not in skip}


def priority_name(priority: Priority) -> PriorityName:
    name: PriorityName = priority.name.lower()  # type: ignore[assignment]
    return name


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class RetryOut(_Out):
    max_attempts: int
    backoff: Backoff
    initial_delay: float
    max_delay: float
    budget_seconds: float | None


class MisfireOut(_Out):
    mode: MisfireMode
    limit: int


class LastRunOut(_Out):
    """How a job's newest finished run ended."""

    id: int
    state: RunState
    scheduled_for: Instant
    finished_at: Instant
    attempt: int
    reason: str | None = Field(description="Why it ended so: every dead run has one.")
    last_error: str | None

    @classmethod
    def of(cls, last: LastRun) -> LastRunOut:
        return cls(**fields(last, cls))


class NoticeOut(_Out):
    """Something to know that is not an error, e.g. ``no_live_worker``: no live worker
    serves the pool, so runs wait."""

    code: str
    message: str

    @classmethod
    def of(cls, notice: Notice) -> NoticeOut:
        return cls(code=notice.code, message=notice.message)


NOTICES_DOC = "What to know that is not an error (e.g. code `no_live_worker`); may be empty."


class JobOut(_Out):
    """A job definition and where it is in its life."""

    id: str
    tenant_id: str
    name: str
    schedule: dict[str, Any]
    action: dict[str, Any]
    pool: str
    payload: Any
    priority: PriorityName
    retry: RetryOut
    timeout_seconds: float
    misfire: MisfireOut
    overlap: Overlap
    jitter_seconds: float
    catchup_seconds: float
    delivery: Delivery
    state: JobState
    version: int
    next_fire_at: Instant | None
    last_fire_at: Instant | None
    created_at: Instant
    updated_at: Instant
    last_run: LastRunOut | None = Field(
        None,
        description="The newest finished run (succeeded, dead, cancelled or skipped), by"
        " finish time; null while none has finished (or retention deleted it).",
    )
    notify: list[dict[str, Any]] = Field(
        default_factory=list,
        description='Notification targets: each {"on": [events], "url": ...}.',
    )
    concurrency: dict[str, Any] | None = Field(
        None,
        description='Its concurrency key template and limit, {"key": ..., "limit": n}: at most'
        " limit of the tenant's runs whose keys render the same run at once; null: none.",
    )
    notices: list[NoticeOut] = Field(default_factory=list, description=NOTICES_DOC)

    @classmethod
    def of(cls, job: Job, notices: Sequence[Notice] = ()) -> JobOut:
        skip = (
            *("priority", "retry", "misfire", "last_run", "notices", "action", "notify"),
            "concurrency",
        )
        return cls(
            **fields(job, cls, *skip),
            # A password in a target's URL is shown masked, as in a webhook action's.
            notify=[{**t, "url": mask_url(str(t["url"]))} for t in job.notify],
            # Secret headers and a URL's password are shown masked; workers send them.
            action=mask_action(job.action),
            priority=priority_name(job.priority),
            retry=RetryOut(**job.retry.to_dict()),
            misfire=MisfireOut(**job.misfire.to_dict()),
            last_run=None if job.last_run is None else LastRunOut.of(job.last_run),
            notices=[NoticeOut.of(n) for n in notices],
            concurrency=None if job.concurrency is None else job.concurrency.to_dict(),
        )


class ProgressOut(_Out):
    """How far a run got, as its handler last said."""

    fraction: float = Field(description="From 0.0 to 1.0.")
    message: str | None
    at: Instant = Field(description="When it was stored.")

    @classmethod
    def of(cls, run: Run) -> ProgressOut | None:
        if run.progress is None or run.progress_at is None:
            return None
        return cls(fraction=run.progress, message=run.progress_message, at=run.progress_at)


class CheckpointOut(_Out):
    """Where a run's next attempt resumes, as its handler last said."""

    state: Any = Field(description="What the handler gave ``ctx.checkpoint`` (any JSON).")
    at: Instant = Field(description="When it was stored.")

    @classmethod
    def of(cls, run: Run) -> CheckpointOut | None:
        if run.checkpoint_at is None:
            return None
        return cls(state=run.checkpoint, at=run.checkpoint_at)


class RunOut(_Out):
    """One occurrence of a job, with its lease and fence."""

    id: int
    tenant_id: str
    job_id: str
    scheduled_for: Instant
    available_at: Instant
    state: RunState
    pool: str
    priority: PriorityName
    attempt: int
    max_attempts: int
    fence: int
    job_version: int
    lease_owner: str | None
    lease_expires_at: Instant | None
    cancel_requested: bool
    started_at: Instant | None
    finished_at: Instant | None
    reason: str | None
    last_error: str | None
    idempotency_key: str
    payload: Any = Field(
        description="The run's own payload, given when it was enqueued; null: its job's payload."
    )
    created_at: Instant
    progress: ProgressOut | None = Field(
        None, description="The last progress an attempt reported; null if none did."
    )
    checkpoint: CheckpointOut | None = Field(
        None,
        description="The last checkpoint an attempt stored (the next attempt resumes from"
        " it); null if none did.",
    )
    concurrency_key: str | None = Field(
        None,
        description="Its concurrency key, rendered from its payload when it was created"
        " (scoped to its tenant); null: none.",
    )
    concurrency_limit: int | None = Field(None, description="Its key's limit; null: none.")
    notices: list[NoticeOut] = Field(default_factory=list, description=NOTICES_DOC)

    @classmethod
    def of(cls, run: Run, notices: Sequence[Notice] = ()) -> RunOut:
        return cls(
            **fields(run, RunOut, "priority", "notices", "progress", "checkpoint"),
            priority=priority_name(run.priority),
            progress=ProgressOut.of(run),
            checkpoint=CheckpointOut.of(run),
            notices=[NoticeOut.of(n) for n in notices],
        )


class AttemptOut(_Out):
    """One execution try of a run."""

    id: int
    run_id: int
    job_id: str
    attempt: int
    worker_id: str | None
    fence: int
    started_at: Instant | None
    finished_at: Instant
    lag_seconds: float | None
    outcome: AttemptOutcome
    error_class: str | None
    error_message: str | None
    http_status: int | None = Field(
        None,
        description="The HTTP status the webhook target answered; null for a handler, or"
        " for a request that got no answer (timeout, connection refused).",
    )
    output: CommandOutputOut | None = Field(
        None,
        description="What a command left: its exit and the last 64 KiB of its stdout and"
        " stderr, secrets redacted; null for other actions.",
    )

    @classmethod
    def of(cls, attempt: Attempt) -> AttemptOut:
        return cls(**fields(attempt, cls, "output"), output=CommandOutputOut.parse(attempt.output))


class CommandOutputOut(_Out):
    """How a command ended, and the end of what it wrote (docs/actions.md)."""

    exit_code: int | None = Field(description="Null when a signal ended it.")
    signal: str | None = Field(None, description="The signal that ended it (SIGKILL…).")
    stdout: str = ""
    stderr: str = ""

    @classmethod
    def parse(cls, text: str | None) -> CommandOutputOut | None:
        if text is None:
            return None
        try:
            found = json.loads(text)
            return cls(
                **{k: found.get(k) for k in ("exit_code", "signal")},
                stdout=str(found.get("stdout") or ""),
                stderr=str(found.get("stderr") or ""),
            )
        except (ValueError, TypeError, AttributeError):
            return None


class RunDetailOut(RunOut):
    """A run with its history of attempts."""

    attempts: list[AttemptOut]

    @classmethod
    def with_attempts(
        cls, run: Run, attempts: list[Attempt], notices: Sequence[Notice] = ()
    ) -> RunDetailOut:
        base = RunOut.of(run, notices).model_dump()
        return cls(**base, attempts=[AttemptOut.of(a) for a in attempts])


class Page(_Out, Generic[T]):
    """A page of a list; pass ``next_cursor`` back as ``cursor`` for the next one."""

    items: list[T]
    next_cursor: str | None


class JobItems(_Out):
    items: list[JobOut]


class BackfillOut(_Out):
    """What a backfill did: of the schedule's ``occurrences`` in the range (the first
    and the last of them), ``created`` had no run and got one."""

    occurrences: int
    created: int
    first: Instant | None
    last: Instant | None


class RunIdsOut(_Out):
    """The runs just enqueued, in the order of their payloads."""

    run_ids: list[int]


class NotificationOut(_Out):
    """One event of a run for one notification target, and how its delivery goes."""

    id: int
    event_id: str = Field(description="The id the target deduplicates on.")
    event: str
    job_id: str
    job_name: str
    run_id: int
    scheduled_for: Instant
    attempt: int
    error: str | None
    occurred_at: Instant
    target: int = Field(description="The target's index in the job's notify list.")
    url: str
    state: str = Field(description="pending, delivered or dead.")
    tries: int
    next_at: Instant
    last_error: str | None
    finished_at: Instant | None

    @classmethod
    def of(cls, n: Notification) -> NotificationOut:
        return cls(
            **fields(n, cls, "event", "state", "url"),
            event=n.event.value,
            state=n.state.value,
            url=mask_url(n.url),
        )


class ReplayedOut(_Out):
    replayed: list[int]


class ClaimedOut(_Out):
    """A run a remote worker now holds, with what it needs to execute it."""

    run: RunOut
    job_name: str
    action: dict[str, Any]
    payload: Any
    timeout_seconds: float
    lease_expires_at: Instant | None

    @classmethod
    def of(cls, claimed: ClaimedRun, sealer: Sealer | None = None) -> ClaimedOut:
        """``sealer``: opens the action's encrypted headers for the worker that sends the
        request; one it cannot open is shown masked (the run then fails at the target,
        as it would in a cronwheel worker without the key)."""
        try:
            action = dict(open_action(claimed.action, claimed.run.tenant_id, sealer))
        except (SecretsKeyMissing, SecretUnreadable):
            action = mask_action(claimed.action)
        return cls(
            run=RunOut.of(claimed.run),
            job_name=claimed.job_name,
            action=action,
            payload=claimed.payload,
            timeout_seconds=claimed.timeout_seconds,
            lease_expires_at=claimed.run.lease_expires_at,
        )


class ClaimOut(_Out):
    runs: list[ClaimedOut]


class HeartbeatOut(_Out):
    extended: list[int]
    lost: list[int]
    cancel_requested: list[int]


class WorkerOut(_Out):
    """A worker seen recently (its last claim or heartbeat)."""

    id: str
    shared: bool
    """True for an in-process worker (``cronwheel worker``, ``cronwheel dev``): it serves
    every tenant's pools, and only a system admin sees its host and load."""
    host: str | None
    pools: list[str]
    capacity: int
    in_flight: int | None
    started_at: Instant
    last_seen_at: Instant
    commands: list[str] = Field(
        description="The patterns of the executables it runs for command actions (none:"
        " it runs no command). Shown to every tenant: what the operator allows tenants to"
        " run is the offer a command job is checked against."
    )
    brokers: dict[str, str] = Field(
        description="The brokers it publishes to: name → kind (nats, rabbitmq, redis),"
        " never their URLs."
    )

    @classmethod
    def of(cls, worker: WorkerInfo, shown_id: str) -> WorkerOut:
        """One of the tenant's own remote workers, in full."""
        return cls(
            **fields(worker, cls, "id", "pools", "shared", "commands", "brokers"),
            id=shown_id,
            shared=False,
            pools=list(worker.pools),
            commands=list(worker.commands),
            brokers=dict(worker.brokers),
        )

    @classmethod
    def of_shared(cls, worker: WorkerInfo, *, full: bool) -> WorkerOut:
        """A worker every tenant shares; without ``full``, its host and load (which tell
        about the infrastructure and about other tenants' work) are left out."""
        return cls(
            id=worker.id,
            shared=True,
            host=worker.host if full else None,
            pools=list(worker.pools),
            capacity=worker.capacity,
            in_flight=worker.in_flight if full else None,
            started_at=worker.started_at,
            last_seen_at=worker.last_seen_at,
            commands=list(worker.commands),
            brokers=dict(worker.brokers),
        )


class WorkerItems(_Out):
    items: list[WorkerOut]


class TenantOut(_Out):
    id: str
    name: str
    max_jobs: int | None
    max_creates_per_second: float | None
    claim_weight: float
    max_running: int | None
    created_at: Instant

    @classmethod
    def of(cls, tenant: Tenant) -> TenantOut:
        return cls(**fields(tenant, cls))


class AuditOut(_Out):
    """One change: who (``actor``) did what (``action``) to which entity, when."""

    id: int
    tenant_id: str
    entity: str
    entity_id: str
    action: str
    actor: str
    at: Instant
    details: dict[str, Any] | None

    @classmethod
    def of(cls, entry: AuditEntry) -> AuditOut:
        details = None if entry.details is None else dict(entry.details)
        return cls(**fields(entry, cls, "details"), details=details)


class KeyOut(_Out):
    """An API key's record; never its token."""

    id: str
    tenant_id: str
    role: Role
    name: str | None
    created_at: Instant
    revoked_at: Instant | None

    @classmethod
    def of(cls, key: ApiKey) -> KeyOut:
        return cls(**fields(key, cls))


class NewKeyOut(_Out):
    """A key just created: the only answer that ever shows its token."""

    id: str
    token: str
    tenant_id: str
    role: Role
    name: str | None
    created_at: Instant


class StatusOut(_Out):
    status: str


class FireOut(_Out):
    """One fire time of a schedule preview."""

    at: Instant = Field(description="The instant, in UTC.")
    local: Instant = Field(description="The wall time in the schedule's zone, with its offset.")
    offset: str = Field(description="The zone's UTC offset then: `+01:00`.")
    dst: Literal["moved", "shifted", "merged", "repeated"] | None = Field(
        description="What DST did to it: `moved` (its wall time fell in a spring-forward gap;"
        " it fires when the gap ends), `shifted` (in a gap, fired with the offset before it),"
        " `merged` (its wall time happens twice; it fires once), `repeated` (it fires both"
        " times), or null."
    )
    offset_changed: bool = Field(
        description="The offset differs from the previous fire's: a DST change in between."
    )


class PreviewOut(_Out):
    """What a schedule will do: its next fire times and the schedule in words."""

    fires: list[FireOut]
    description: str
    timezone: str = Field(description="The zone of `local` (UTC but for cron).")


class ProblemItemOut(_Out):
    index: int | None = None
    field: str | None
    reason: str


class ProblemOut(_Out):
    """An error (RFC 9457 problem details)."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
    errors: list[ProblemItemOut] | None = None


def dump(model: BaseModel) -> Any:
    """A model as the JSON value sent on the wire."""
    return model.model_dump(mode="json")


class PipelineOut(_Out):
    """A pipeline at one of its versions: its definition (``tasks``, ``edges``,
    ``failure_policy``, as decision 0025 describes them) and where it is."""

    id: str
    tenant_id: str
    name: str
    version: int = Field(description="The version shown (the latest unless asked).")
    latest_version: int = Field(description="The version an update's If-Match must name.")
    state: PipelineState
    fingerprint: str = Field(description="The definition's content hash (SHA-256).")
    tasks: dict[str, Any]
    edges: list[dict[str, Any]]
    failure_policy: FailurePolicy
    notify: list[dict[str, Any]] = Field(
        default_factory=list, description="Targets told how its runs end (url masked)."
    )
    created_at: Instant
    updated_at: Instant

    @classmethod
    def of(cls, pipeline: Pipeline) -> PipelineOut:
        return cls(
            **fields(pipeline, cls, "tasks", "edges", "failure_policy", "notify"),
            **_definition(pipeline.definition),
        )


class PipelineVersionOut(_Out):
    """One immutable version of a pipeline's definition, who stored it and when."""

    version: int
    fingerprint: str
    actor: str
    created_at: Instant
    tasks: dict[str, Any]
    edges: list[dict[str, Any]]
    failure_policy: FailurePolicy
    notify: list[dict[str, Any]] = Field(
        default_factory=list, description="Targets told how its runs end (url masked)."
    )

    @classmethod
    def of(cls, version: PipelineVersion) -> PipelineVersionOut:
        return cls(
            **fields(version, cls, "tasks", "edges", "failure_policy", "notify"),
            **_definition(version.definition),
        )


def _definition(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A stored definition as it may be shown: each webhook task's secret headers and URL
    password masked, as a job's (the stored definition is unchanged)."""
    tasks = {
        name: {**task, "action": mask_action(task["action"])}
        for name, task in definition["tasks"].items()
    }
    return {
        "tasks": tasks,
        "edges": definition["edges"],
        "failure_policy": definition["failure_policy"],
        "notify": [{**t, "url": mask_url(str(t["url"]))} for t in definition.get("notify", [])],
    }


class PipelineTaskOut(_Out):
    """One task instance of a pipeline run that started or was skipped (a task not
    listed still waits for its prerequisites)."""

    task: str
    instance: int = Field(description="0, or the item's index for a fanned-out task.")
    state: str = Field(description="started, succeeded, dead, cancelled or skipped.")
    run_id: int | None = Field(description="Its run (GET /v1/runs/{id}); null if skipped.")
    run_state: str | None = Field(description="Its run's own state (pending, running…).")
    reason: str | None = Field(description="Why it was skipped (upstream_failed…).")
    message: str | None
    updated_at: Instant | None


class PipelineRunOut(_Out):
    """A pipeline run at the version it started with, and its tasks (decision 0025)."""

    id: str
    tenant_id: str
    pipeline_id: str
    version: int
    job_id: str = Field(description="The job whose runs its tasks' runs are.")
    state: str = Field(description="running, succeeded, failed or cancelled.")
    cancel_requested: bool
    trigger_run_id: int | None = Field(description="The job run that started it, if one did.")
    actor: str
    created_at: Instant
    finished_at: Instant | None
    tasks: list[PipelineTaskOut] = Field(description="Empty in lists; read one for its tasks.")

    @classmethod
    def of(cls, run: PipelineRun) -> PipelineRunOut:
        return cls(
            **fields(run, cls, "tasks"),
            tasks=[PipelineTaskOut(**fields(t, PipelineTaskOut)) for t in run.tasks],
        )
