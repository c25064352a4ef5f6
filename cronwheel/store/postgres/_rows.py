"""PostgreSQL rows ↔ model objects, and model objects → batch parameters.

asyncpg already gives aware UTC datetimes for ``timestamptz`` and, with the codecs the
store registers, ``str`` for ``uuid`` and decoded JSON for ``jsonb``; what is left here is
enums, policies, and splitting batches into the parallel arrays ``unnest`` reads.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from asyncpg import Record

from cronwheel.core import lifecycle
from cronwheel.core.model import (
    ApiKey,
    Attempt,
    AttemptOutcome,
    AuditEntry,
    ClaimedRun,
    Concurrency,
    Delivery,
    Job,
    JobState,
    LastRun,
    MisfirePolicy,
    NewRun,
    Notification,
    NotificationState,
    NotifyEvent,
    Overlap,
    Priority,
    RetryPolicy,
    Role,
    Run,
    StoredResponse,
    Tenant,
    WorkerInfo,
    shard_key,
)
from cronwheel.store import _decode as decode
from cronwheel.store._batch import SHARED_FIELDS, by_identity, templates
from cronwheel.store.base import Completion, JobAdvance

# One encoder for every call: json.dumps with options would build a new one each time,
# which is most of the cost of preparing a batch of 10,000 jobs.
_encode = json.JSONEncoder(separators=(",", ":")).encode


def dumps(value: Any) -> str:
    return _encode(value)


def is_uuid(value: str) -> bool:
    """Whether ``value`` can be a job id; anything else is simply not found."""
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def is_run_id(value: int) -> bool:
    """Whether ``value`` fits a ``bigint`` id; anything else is simply not found."""
    return -(2**63) <= value < 2**63


def _columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows → one list per column: the parallel arrays that ``unnest`` zips back."""
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]


def job_columns(jobs: Sequence[Job]) -> list[list[Any]]:
    """The arrays of ``CREATE_JOBS`` ($13-$36): per job its id, name, payload, shard key and
    template (see :func:`cronwheel.store._batch.templates`, from 0); per template the
    columns its jobs share. Each distinct set of shared columns is encoded, sent and
    decoded (JSON included) once, not once per job."""
    shared, picks = templates(jobs)
    return [
        [j.id for j in jobs],
        [j.name for j in jobs],
        # None is SQL NULL, not the JSON null: both read back as None.
        by_identity([j.payload for j in jobs], _dumps_or_none),
        [shard_key(j.id) for j in jobs],
        picks,
        *_columns([_template_row(template) for template in shared], len(SHARED_FIELDS)),
    ]


def _dumps_or_none(value: Any) -> str | None:
    return None if value is None else dumps(value)


def _template_row(job: Job) -> tuple[Any, ...]:
    """A template's columns ($18-$36), read off one of its jobs: JSON as text, enums as
    their values."""
    return (
        job.tenant_id,
        dumps(job.schedule),
        dumps(job.action),
        job.pool,
        int(job.priority),
        dumps(job.retry.to_dict()),
        job.timeout_seconds,
        dumps(job.misfire.to_dict()),
        job.overlap.value,
        job.jitter_seconds,
        job.catchup_seconds,
        job.delivery.value,
        job.state.value,
        job.version,
        job.next_fire_at,
        job.last_fire_at,
        job.created_at,
        job.updated_at,
        notify_text(job),
    )


def notify_text(job: Job) -> str | None:
    """A job's notification targets as the store keeps them: JSON text, NULL for none
    (the state-changing statements look for a NULL, not for an empty list)."""
    return dumps([dict(t) for t in job.notify]) if job.notify else None


def job_definition(job: Job) -> tuple[Any, ...]:
    """``UPDATE_JOB``'s $2-$18: every column an update may change, JSON as objects."""
    return (
        job.name,
        job.schedule,
        job.action,
        job.pool,
        job.payload,
        int(job.priority),
        job.retry.to_dict(),
        job.timeout_seconds,
        job.misfire.to_dict(),
        job.overlap.value,
        job.jitter_seconds,
        job.catchup_seconds,
        job.delivery.value,
        job.state.value,
        job.next_fire_at,
        job.last_fire_at,
        job.updated_at,
    )


def _run_shared(r: NewRun) -> tuple[Any, ...]:
    """A new run's columns but its job, in the order of the statements' arrays."""
    return (
        r.tenant_id,
        r.scheduled_for,
        r.available_at,
        r.state.value,
        r.pool,
        int(r.priority),
        r.max_attempts,
        r.job_version,
        r.reason,
        r.overlap.value,
    )


def new_run_columns(runs: Sequence[NewRun]) -> list[list[Any]]:
    """The 11 arrays of a batch of new runs ($1-$11 of INSERT_RUNS and MATERIALIZE_RUNS):
    the job, then :func:`_run_shared`'s columns."""
    return _columns([(r.job_id, *_run_shared(r)) for r in runs], 11)


def new_run_keys(runs: Sequence[NewRun]) -> list[list[Any]]:
    """The runs' concurrency keys and limits (0019), one element each: two arrays more in
    the statements that insert runs, never another statement."""
    return [[r.concurrency_key for r in runs], [r.concurrency_limit for r in runs]]


def concurrency_text(job: Job) -> str | None:
    """A job's concurrency as the store keeps it: JSON text, NULL for none."""
    return None if job.concurrency is None else dumps(job.concurrency.to_dict())


def new_run_template_columns(runs: Sequence[NewRun]) -> list[list[Any]]:
    """``CREATE_JOBS``' $1-$12: the distinct run columns but the job ($1-$10, one element
    per template), then per run its job id and template (from 0). A bulk create's runs
    share everything but their job (same instant, pool, policy...): each run costs two
    array elements to encode instead of eleven."""
    index: dict[tuple[Any, ...], int] = {}
    picks = [index.setdefault(_run_shared(r), len(index)) for r in runs]
    return [*_columns(list(index), 10), [r.job_id for r in runs], picks]


def target_columns(runs: Sequence[NewRun], advances: Sequence[JobAdvance]) -> list[list[Any]]:
    """``MATERIALIZE_RUNS``' $12-$18: every job of the batch once, with its advance if it
    has one, in ascending id order (the order their rows are locked in)."""
    targets: dict[str, JobAdvance | None] = {r.job_id: None for r in runs}
    targets.update((a.job_id, a) for a in advances)
    rows = [
        (job_id, False, None, None, None, None, None)
        if a is None
        else (
            job_id,
            True,
            a.version,
            a.expected_next_fire_at,
            a.next_fire_at,
            a.last_fire_at,
            a.state.value,
        )
        for job_id, a in sorted(targets.items(), key=lambda item: item[0].lower())
    ]
    return _columns(rows, 7)


def completion_columns(completions: Sequence[Completion]) -> list[list[Any]]:
    """The 18 arrays of ``COMPLETE_RUNS``, by ascending run id: the order rows are locked."""
    rows = [
        (
            c.run_id,
            c.fence,
            c.worker_id,
            c.state.value,
            c.outcome.value,
            c.started_at,
            c.finished_at,
            c.lag_seconds,
            c.error_class,
            c.error_message,
            c.available_at,
            c.reason,
            c.http_status,
            c.progress,
            c.progress_message,
            c.checkpoint,
            c.result,
            c.output,
        )
        for c in sorted(completions, key=lambda c: c.run_id)
    ]
    return _columns(rows, 18)


def job(row: Record) -> Job:
    return Job(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        schedule=row["schedule"],
        action=row["action"],
        pool=row["pool"],
        payload=row["payload"],
        priority=Priority(row["priority"]),
        retry=RetryPolicy.from_dict(row["retry"]),
        timeout_seconds=row["timeout_seconds"],
        misfire=MisfirePolicy.from_dict(row["misfire"]),
        overlap=Overlap(row["overlap"]),
        jitter_seconds=row["jitter_seconds"],
        catchup_seconds=row["catchup_seconds"],
        delivery=Delivery(row["delivery"]),
        notify=tuple(row["notify"] or ()),
        concurrency=(
            None if row["concurrency"] is None else Concurrency.from_dict(row["concurrency"])
        ),
        state=JobState(row["state"]),
        version=row["version"],
        next_fire_at=row["next_fire_at"],
        last_fire_at=row["last_fire_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def notification(row: Record) -> Notification:
    return Notification(
        id=row["id"],
        tenant_id=row["tenant_id"],
        event_id=row["event_id"],
        event=NotifyEvent(row["event"]),
        job_id=row["job_id"],
        job_name=row["job_name"],
        run_id=row["run_id"],
        scheduled_for=row["scheduled_for"],
        attempt=row["attempt"],
        error=row["error"],
        occurred_at=row["occurred_at"],
        target=row["target"],
        url=row["url"],
        state=NotificationState(row["state"]),
        tries=row["tries"],
        next_at=row["next_at"],
        last_error=row["last_error"],
        finished_at=row["finished_at"],
        pipeline_run_id=row["pipeline_run_id"],
    )


def run(row: Record) -> Run:
    return Run(
        row["id"],
        row["tenant_id"],
        row["job_id"],
        row["scheduled_for"],
        row["available_at"],
        decode.RUN_STATES[row["state"]],
        row["pool"],
        decode.PRIORITIES[row["priority"]],
        row["attempt"],
        row["max_attempts"],
        row["fence"],
        row["job_version"],
        row["created_at"],
        row["lease_owner"],
        row["lease_expires_at"],
        row["cancel_requested"],
        row["started_at"],
        row["finished_at"],
        row["reason"],
        row["last_error"],
        decode.OVERLAPS[row["overlap"]],
        row["payload"],
        row["progress"],
        row["progress_message"],
        row["progress_at"],
        row["checkpoint"],
        row["checkpoint_at"],
        None if row["pipeline_run_id"] is None else str(row["pipeline_run_id"]),
        row["task"],
        row["task_spec"],
        row["inputs"],
        row["result"],
        # Some reads name their columns and leave these out: a run read so has no key.
        row.get("concurrency_key"),
        row.get("concurrency_limit"),
    )


def last_run(row: Record) -> LastRun:
    return LastRun(
        id=row["id"],
        state=decode.RUN_STATES[row["state"]],
        scheduled_for=row["scheduled_for"],
        finished_at=row["finished_at"],
        attempt=row["attempt"],
        reason=row["reason"],
        last_error=row["last_error"],
    )


def claimed(row: Record) -> ClaimedRun:
    """A row of ``CLAIM_RUNS``: the run's columns plus its job's own, prefixed ``job_``
    (the retry policy and the action as text: cache keys), made what the run executes
    with by :func:`lifecycle.claimed_run` (a task's own ``task_spec`` is a run column)."""
    return lifecycle.claimed_run(
        run(row),
        job_name=row["job_name"],
        action=decode.action(row["job_action"]),
        payload=row["job_payload"],
        retry=decode.retry_policy(row["job_retry"]),
        timeout_seconds=row["job_timeout_seconds"],
        delivery=decode.DELIVERIES[row["job_delivery"]],
        traceparent=row["job_traceparent"],
    )


def attempt(row: Record) -> Attempt:
    return Attempt(
        id=row["id"],
        tenant_id=row["tenant_id"],
        run_id=row["run_id"],
        job_id=row["job_id"],
        attempt=row["attempt"],
        worker_id=row["worker_id"],
        fence=row["fence"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        outcome=AttemptOutcome(row["outcome"]),
        lag_seconds=row["lag_seconds"],
        error_class=row["error_class"],
        error_message=row["error_message"],
        http_status=row["http_status"],
        output=row["output"],
    )


def audit(row: Record) -> AuditEntry:
    return AuditEntry(
        id=row["id"],
        tenant_id=row["tenant_id"],
        entity=row["entity"],
        entity_id=row["entity_id"],
        action=row["action"],
        actor=row["actor"],
        at=row["at"],
        details=row["details"],
    )


def tenant(row: Record) -> Tenant:
    return Tenant(
        id=row["id"],
        name=row["name"],
        created_at=row["created_at"],
        max_jobs=row["max_jobs"],
        max_creates_per_second=row["max_creates_per_second"],
        claim_weight=row["claim_weight"],
        max_running=row["max_running"],
    )


def api_key(row: Record) -> ApiKey:
    return ApiKey(
        id=row["id"],
        tenant_id=row["tenant_id"],
        key_hash=row["key_hash"],
        role=Role(row["role"]),
        created_at=row["created_at"],
        name=row["name"],
        revoked_at=row["revoked_at"],
    )


def response(row: Record) -> StoredResponse:
    return StoredResponse(
        tenant_id=row["tenant_id"],
        key=row["key"],
        request_hash=row["request_hash"],
        status=row["status"],
        body=row["response"],  # the JSON null decodes to None like any other value
        created_at=row["created_at"],
    )


def worker_params(worker: WorkerInfo) -> tuple[Any, ...]:
    """``REGISTER_WORKER``'s $1-$10; pools and commands as lists, brokers as a mapping:
    the JSON jsonb keeps."""
    return (
        worker.id,
        worker.tenant_id,
        worker.host,
        list(worker.pools),
        worker.capacity,
        worker.in_flight,
        worker.started_at,
        worker.last_seen_at,
        dict(worker.brokers),
        list(worker.commands),
    )


def worker(row: Record) -> WorkerInfo:
    return WorkerInfo(
        id=row["id"],
        tenant_id=row["tenant_id"],
        host=row["host"],
        pools=tuple(row["pools"]),
        capacity=row["capacity"],
        in_flight=row["in_flight"],
        started_at=row["started_at"],
        last_seen_at=row["last_seen_at"],
        brokers=dict(row["brokers"]),
        commands=tuple(row["commands"]),
    )
