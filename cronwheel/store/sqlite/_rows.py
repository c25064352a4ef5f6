"""SQLite rows ↔ model objects. Instants are integer microseconds since the epoch (UTC)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwheel.core.model import (
    ApiKey,
    Attempt,
    AttemptOutcome,
    AuditEntry,
    Concurrency,
    Job,
    LastRun,
    Notification,
    NotificationState,
    NotifyEvent,
    Role,
    Run,
    StoredResponse,
    Tenant,
    WorkerInfo,
    shard_key,
)
from cronwheel.store import _decode as decode
from cronwheel.store._batch import SHARED_FIELDS, by_identity, templates

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def us(instant: datetime) -> int:
    """An aware datetime as integer microseconds since the epoch."""
    if instant.tzinfo is None:
        raise ValueError(f"naive datetime {instant!r}: cronwheel stores instants, give a timezone")
    return (instant - EPOCH) // _MICROSECOND


def us_or_none(instant: datetime | None) -> int | None:
    return None if instant is None else us(instant)


def dt(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


def dt_or_none(value: int | None) -> datetime | None:
    return None if value is None else dt(value)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def job_params(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "tenant_id": job.tenant_id,
        "name": job.name,
        "schedule": dumps(job.schedule),
        "action": dumps(job.action),
        "pool": job.pool,
        "payload": dumps(job.payload),
        "priority": int(job.priority),
        "retry": dumps(job.retry.to_dict()),
        "timeout_seconds": job.timeout_seconds,
        "misfire": dumps(job.misfire.to_dict()),
        "overlap": job.overlap.value,
        "jitter_seconds": job.jitter_seconds,
        "catchup_seconds": job.catchup_seconds,
        "delivery": job.delivery.value,
        "state": job.state.value,
        "version": job.version,
        "next_fire_at": us_or_none(job.next_fire_at),
        "last_fire_at": us_or_none(job.last_fire_at),
        "shard_key": job.shard_key,
        "created_at": us(job.created_at),
        "updated_at": us(job.updated_at),
        "traceparent": job.traceparent,
        # NULL, not [], for none: the state-changing statements look for a NULL.
        "notify": dumps([dict(t) for t in job.notify]) if job.notify else None,
        "concurrency": concurrency_text(job),
    }


def concurrency_text(job: Job) -> str | None:
    """A job's concurrency as the store keeps it: JSON text, NULL for none (0019)."""
    return None if job.concurrency is None else dumps(job.concurrency.to_dict())


# The columns of :func:`job_rows`: each job's own, then those it may share (see
# cronwheel.store._batch).
JOB_ROW_COLUMNS = (
    "id",
    "name",
    "payload",
    "shard_key",
    "traceparent",
    "concurrency",
    *SHARED_FIELDS,
)


def job_rows(jobs: Sequence[Job]) -> list[tuple[Any, ...]]:
    """The jobs' values in :data:`JOB_ROW_COLUMNS`' order, as :func:`job_params` has them.
    What jobs share is encoded once per template, and each payload once per object."""
    shared, picks = templates(jobs)
    encoded = [_shared_values(template) for template in shared]
    payloads = by_identity([j.payload for j in jobs], dumps)
    return [
        (j.id, j.name, payload, shard_key(j.id), j.traceparent, concurrency_text(j)) + encoded[pick]
        for j, payload, pick in zip(jobs, payloads, picks, strict=True)
    ]


def _shared_values(template: Job) -> tuple[Any, ...]:
    params = job_params(template)
    return tuple(params[column] for column in SHARED_FIELDS)


def job(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        # What jobs share is decoded once per distinct text (a scheduler reads thousands
        # of jobs a tick); the payload, which a caller may change, is each job's own.
        schedule=decode.schedule(row["schedule"]),
        action=decode.action(row["action"]),
        pool=row["pool"],
        payload=json.loads(row["payload"]),
        priority=decode.PRIORITIES[row["priority"]],
        retry=decode.retry_policy(row["retry"]),
        timeout_seconds=row["timeout_seconds"],
        misfire=decode.misfire_policy(row["misfire"]),
        overlap=decode.OVERLAPS[row["overlap"]],
        jitter_seconds=row["jitter_seconds"],
        catchup_seconds=row["catchup_seconds"],
        delivery=decode.DELIVERIES[row["delivery"]],
        notify=tuple(json.loads(row["notify"])) if row["notify"] else (),
        concurrency=(
            None
            if row["concurrency"] is None
            else Concurrency.from_dict(json.loads(row["concurrency"]))
        ),
        state=decode.JOB_STATES[row["state"]],
        version=row["version"],
        next_fire_at=dt_or_none(row["next_fire_at"]),
        last_fire_at=dt_or_none(row["last_fire_at"]),
        created_at=dt(row["created_at"]),
        updated_at=dt(row["updated_at"]),
    )


def notification(row: sqlite3.Row) -> Notification:
    return Notification(
        id=row["id"],
        tenant_id=row["tenant_id"],
        event_id=row["event_id"],
        event=NotifyEvent(row["event"]),
        job_id=row["job_id"],
        job_name=row["job_name"],
        run_id=row["run_id"],
        scheduled_for=dt(row["scheduled_for"]),
        attempt=row["attempt"],
        error=row["error"],
        occurred_at=dt(row["occurred_at"]),
        target=row["target"],
        url=row["url"],
        state=NotificationState(row["state"]),
        tries=row["tries"],
        next_at=dt(row["next_at"]),
        last_error=row["last_error"],
        finished_at=dt_or_none(row["finished_at"]),
        pipeline_run_id=row["pipeline_run_id"],
    )


def run(row: sqlite3.Row) -> Run:
    return Run(
        row["id"],
        row["tenant_id"],
        row["job_id"],
        dt(row["scheduled_for"]),
        dt(row["available_at"]),
        decode.RUN_STATES[row["state"]],
        row["pool"],
        decode.PRIORITIES[row["priority"]],
        row["attempt"],
        row["max_attempts"],
        row["fence"],
        row["job_version"],
        dt(row["created_at"]),
        row["lease_owner"],
        dt_or_none(row["lease_expires_at"]),
        bool(row["cancel_requested"]),
        dt_or_none(row["started_at"]),
        dt_or_none(row["finished_at"]),
        row["reason"],
        row["last_error"],
        decode.OVERLAPS[row["overlap"]],
        None if row["payload"] is None else json.loads(row["payload"]),
        row["progress"],
        row["progress_message"],
        dt_or_none(row["progress_at"]),
        None if row["checkpoint"] is None else json.loads(row["checkpoint"]),
        dt_or_none(row["checkpoint_at"]),
        row["pipeline_run_id"],
        row["task"],
        None if row["task_spec"] is None else json.loads(row["task_spec"]),
        None if row["inputs"] is None else json.loads(row["inputs"]),
        None if row["result"] is None else json.loads(row["result"]),
        row["concurrency_key"],
        row["concurrency_limit"],
    )


def attempt(row: sqlite3.Row) -> Attempt:
    return Attempt(
        id=row["id"],
        tenant_id=row["tenant_id"],
        run_id=row["run_id"],
        job_id=row["job_id"],
        attempt=row["attempt"],
        worker_id=row["worker_id"],
        fence=row["fence"],
        started_at=dt_or_none(row["started_at"]),
        finished_at=dt(row["finished_at"]),
        outcome=AttemptOutcome(row["outcome"]),
        lag_seconds=row["lag_seconds"],
        error_class=row["error_class"],
        error_message=row["error_message"],
        http_status=row["http_status"],
        output=row["output"],
    )


def audit(row: sqlite3.Row) -> AuditEntry:
    return AuditEntry(
        id=row["id"],
        tenant_id=row["tenant_id"],
        entity=row["entity"],
        entity_id=row["entity_id"],
        action=row["action"],
        actor=row["actor"],
        at=dt(row["at"]),
        details=None if row["details"] is None else json.loads(row["details"]),
    )


def tenant(row: sqlite3.Row) -> Tenant:
    return Tenant(
        id=row["id"],
        name=row["name"],
        created_at=dt(row["created_at"]),
        max_jobs=row["max_jobs"],
        max_creates_per_second=row["max_creates_per_second"],
        claim_weight=row["claim_weight"],
        max_running=row["max_running"],
    )


def api_key(row: sqlite3.Row) -> ApiKey:
    return ApiKey(
        id=row["id"],
        tenant_id=row["tenant_id"],
        key_hash=row["key_hash"],
        role=Role(row["role"]),
        created_at=dt(row["created_at"]),
        name=row["name"],
        revoked_at=dt_or_none(row["revoked_at"]),
    )


def response(row: sqlite3.Row) -> StoredResponse:
    return StoredResponse(
        tenant_id=row["tenant_id"],
        key=row["key"],
        request_hash=row["request_hash"],
        status=row["status"],
        # Always JSON text, "null" included: the column is NOT NULL.
        body=json.loads(row["response"]),
        created_at=dt(row["created_at"]),
    )


def last_run(row: sqlite3.Row) -> LastRun:
    return LastRun(
        id=row["id"],
        state=decode.RUN_STATES[row["state"]],
        scheduled_for=dt(row["scheduled_for"]),
        finished_at=dt(row["finished_at"]),
        attempt=row["attempt"],
        reason=row["reason"],
        last_error=row["last_error"],
    )


def worker(row: sqlite3.Row) -> WorkerInfo:
    return WorkerInfo(
        id=row["id"],
        tenant_id=row["tenant_id"],
        host=row["host"],
        pools=tuple(json.loads(row["pools"])),
        capacity=row["capacity"],
        in_flight=row["in_flight"],
        started_at=dt(row["started_at"]),
        last_seen_at=dt(row["last_seen_at"]),
        brokers=json.loads(row["brokers"]),
        commands=tuple(json.loads(row["commands"])),
    )
