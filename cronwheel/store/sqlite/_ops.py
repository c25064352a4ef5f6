"""The SQL behind the SQLite store's verbs: each function runs inside the caller's
transaction on the connection's thread."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from itertools import chain
from json.encoder import encode_basestring_ascii
from typing import Any

from cronwheel.core import lifecycle
from cronwheel.core.model import (
    MAX_NOTIFY_ERROR,
    AttemptOutcome,
    ClaimedRun,
    Delivery,
    Job,
    JobState,
    NewRun,
    NotifyEvent,
    Run,
    RunState,
    notify_event_id,
)
from cronwheel.errors import Conflict, NotFound
from cronwheel.store import _decode as decode
from cronwheel.store._batch import by_identity
from cronwheel.store.base import Completion, Release
from cronwheel.store.sqlite import _rows as rows

JOB_INSERT = (
    "INSERT INTO jobs (id, tenant_id, name, schedule, action, pool, payload, priority, retry,"
    " timeout_seconds, misfire, overlap, jitter_seconds, catchup_seconds, delivery, state,"
    " version, next_fire_at, last_fire_at, shard_key, created_at, updated_at, traceparent,"
    " notify, concurrency)"
    " VALUES (:id, :tenant_id, :name, :schedule, :action, :pool, :payload, :priority, :retry,"
    " :timeout_seconds, :misfire, :overlap, :jitter_seconds, :catchup_seconds, :delivery,"
    " :state, :version, :next_fire_at, :last_fire_at, :shard_key, :created_at, :updated_at,"
    " :traceparent, :notify, :concurrency)"
)

RUN_INSERT = (
    "INSERT INTO runs (tenant_id, job_id, scheduled_for, available_at, state, pool, priority,"
    " max_attempts, job_version, reason, created_at, finished_at, overlap, concurrency_key,"
    " concurrency_limit)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (job_id, scheduled_for) DO NOTHING"
)

# The columns every run of an enqueue shares come first; each run adds its instant and
# its payload.
ENQUEUE_INSERT = (
    "INSERT INTO runs (state, tenant_id, job_id, pool, priority, max_attempts, job_version,"
    " reason, overlap, available_at, created_at, concurrency_limit, scheduled_for, payload,"
    " concurrency_key)"
    " VALUES ('pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

AUDIT_INSERT = (
    "INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at, details)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


# A bulk create's statements insert this many rows each at most (fewer if SQLite allows
# fewer bound values): past a hundred, longer statements gain little.
ROWS_PER_INSERT = 100


def job_state(c: sqlite3.Connection, tenant_id: str, job_id: str) -> sqlite3.Row:
    """The job's ``state`` and ``version`` (the write lock is held), or NotFound."""
    found: sqlite3.Row | None = c.execute(
        "SELECT state, version FROM jobs WHERE tenant_id = ? AND id = ?", (tenant_id, job_id)
    ).fetchone()
    if found is None:
        raise NotFound("job", job_id)
    return found


def check_parents(c: sqlite3.Connection, jobs: Sequence[Job], runs: Sequence[NewRun]) -> None:
    """NotFound for the first job of an unknown tenant, or run of an unknown job: checked
    before anything is written, as the foreign keys' IntegrityError names neither."""
    for tenant_id in dict.fromkeys(j.tenant_id for j in jobs):
        if c.execute("SELECT 1 FROM tenants WHERE id = ?", (tenant_id,)).fetchone() is None:
            raise NotFound("tenant", tenant_id)
    batch = {j.id for j in jobs}
    for job_id in dict.fromkeys(r.job_id for r in runs if r.job_id not in batch):
        if c.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
            raise NotFound("job", job_id)


def insert_jobs(c: sqlite3.Connection, jobs: Sequence[Job], actor: str) -> None:
    """Insert new jobs and their ``created`` audit entries: a few multi-row statements,
    not one statement per job and another per entry."""
    c.execute("SAVEPOINT insert_jobs")
    try:
        insert_rows(c, "jobs", rows.JOB_ROW_COLUMNS, rows.job_rows(jobs))
    except sqlite3.IntegrityError:
        # A statement that fails undoes all of its rows. Insert one job at a time, as
        # before, so that the conflict is found (and named) after the same jobs are in.
        c.execute("ROLLBACK TO insert_jobs")
        try:
            c.executemany(JOB_INSERT, [rows.job_params(j) for j in jobs])
        except sqlite3.IntegrityError as exc:
            raise name_conflict(c, jobs) from exc
    c.execute("RELEASE insert_jobs")
    details = _created_details
    entries = by_identity([j.created_at for j in jobs], rows.us)
    insert_rows(
        c,
        "audit_log",
        ("tenant_id", "entity", "entity_id", "action", "actor", "at", "details"),
        [
            (j.tenant_id, "job", j.id, "created", actor, at, details(j.version, j.name))
            for j, at in zip(jobs, entries, strict=True)
        ],
    )


def _created_details(version: int, name: str) -> str:
    # The text rows.dumps({"version": version, "name": name}) makes, without building
    # a dict and a JSON encoder per job.
    return f'{{"version":{int.__repr__(version)},"name":{encode_basestring_ascii(name)}}}'


def insert_rows(
    c: sqlite3.Connection, table: str, columns: Sequence[str], values: Sequence[tuple[Any, ...]]
) -> None:
    """``INSERT INTO table (columns) VALUES (...), (...), ...``: as many rows per statement
    as :data:`ROWS_PER_INSERT` and SQLite's limit on bound values allow."""
    width = len(columns)
    per = max(1, min(ROWS_PER_INSERT, c.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    one = f"({placeholders(width)})"
    for start in range(0, len(values), per):
        chunk = values[start : start + per]
        c.execute(head + ",".join([one] * len(chunk)), list(chain.from_iterable(chunk)))


def placeholders(n: int) -> str:
    return ",".join("?" * n)


def audit(
    conn: sqlite3.Connection,
    tenant_id: str,
    entity: str,
    entity_id: object,
    action: str,
    actor: str,
    at: int,
    details: dict[str, Any] | None = None,
) -> None:
    payload = None if details is None else rows.dumps(details)
    conn.execute(AUDIT_INSERT, (tenant_id, entity, str(entity_id), action, actor, at, payload))


def insert_runs(conn: sqlite3.Connection, runs: Iterable[NewRun], now: int) -> list[str]:
    """Insert runs if absent; return the pools that got new pending runs. A skipped run
    is an event for the outbox (see :func:`record_events`)."""
    pools = []
    skipped: list[Event] = []
    for r in runs:
        finished = now if r.state.finished else None
        cursor = conn.execute(
            RUN_INSERT,
            (
                r.tenant_id,
                r.job_id,
                rows.us(r.scheduled_for),
                rows.us(r.available_at),
                r.state.value,
                r.pool,
                int(r.priority),
                r.max_attempts,
                r.job_version,
                r.reason,
                now,
                finished,
                r.overlap.value,
                r.concurrency_key,
                r.concurrency_limit,
            ),
        )
        if cursor.rowcount and r.state is RunState.PENDING:
            pools.append(r.pool)
        elif cursor.rowcount and r.state is RunState.SKIPPED:
            assert cursor.lastrowid is not None
            at = rows.us(r.scheduled_for)
            skipped.append(
                (r.tenant_id, cursor.lastrowid, r.job_id, at, 0, "skipped", r.reason, now)
            )
    if skipped:
        record_events(conn, skipped)
    return pools


# One event of a run for the outbox (see record_events): tenant, run id, job id,
# scheduled_for (µs), attempt, event (None: the change is no event), error, instant (µs).
Event = tuple[str, int, str, int, int, str | None, str | None, int]

NOTIFICATION_INSERT = (
    "INSERT INTO notifications (tenant_id, event_id, event, job_id, job_name, run_id,"
    " scheduled_for, attempt, error, occurred_at, target, url, next_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

# What each state a completion or a rescue moves a run to is as an event (a retry is a
# failed attempt); a state missing here is none.
OUTCOME_EVENTS = {
    RunState.SUCCEEDED: NotifyEvent.SUCCEEDED.value,
    RunState.PENDING: NotifyEvent.FAILED.value,
    RunState.DEAD: NotifyEvent.DEAD.value,
}


def record_events(c: sqlite3.Connection, events: Sequence[Event]) -> None:
    """Write the outbox rows of ``events`` in the transaction of the state changes that
    caused them: one per event and target of the run's job listening to it. The batch's
    distinct jobs are read once, only those with targets (``notify IS NOT NULL``): a
    batch whose jobs have none writes nothing (docs/workflows.md#notifications)."""
    job_ids = list({e[2] for e in events if e[5] is not None})
    if not job_ids:
        return
    noisy = {
        row[0]: (row[1], json.loads(row[2]))
        for row in c.execute(
            f"SELECT id, name, notify FROM jobs WHERE id IN ({placeholders(len(job_ids))})"
            " AND notify IS NOT NULL",
            job_ids,
        )
    }
    if not noisy:
        return
    out = []
    for tenant_id, run_id, job_id, scheduled_for, attempt, event, error, at in events:
        if event is None or job_id not in noisy:
            continue
        name, targets = noisy[job_id]
        event_id = notify_event_id(run_id, event, attempt)
        excerpt = None if error is None else error[:MAX_NOTIFY_ERROR]
        for i, target in enumerate(targets):
            if event in target["on"]:
                head = (tenant_id, event_id, event, job_id, name, run_id, scheduled_for)
                out.append((*head, attempt, excerpt, at, i, target["url"], at))
    c.executemany(NOTIFICATION_INSERT, out)


# Whether the job of the run aliased ``{run}`` is busy (cronwheel.core.overlap.busy): it
# has a running run, or a pipeline run started by another of its runs is unfinished
# (decision 0044); through runs_running_by_job and pipeline_runs_running_by_job.
JOB_IS_BUSY = (
    "(EXISTS (SELECT 1 FROM runs o WHERE o.job_id = {run}.job_id AND o.state = 'running')"
    " OR EXISTS (SELECT 1 FROM pipeline_runs pr WHERE pr.job_id = {run}.job_id"
    " AND pr.state = 'running' AND pr.trigger_run_id IS NOT {run}.id))"
)

# A run of a job with an overlap policy is claimable once due, when no earlier due run
# of its job waits before it, and (for queue) while its job is not busy.
OVERLAP_CLAIMABLE = (
    "r.available_at <= ? AND NOT EXISTS (SELECT 1 FROM runs e WHERE e.job_id = r.job_id"
    " AND e.state = 'pending' AND e.available_at <= ? AND e.scheduled_for < r.scheduled_for"
    " AND e.attempt < e.max_attempts)"
    f" AND (r.overlap <> 'queue' OR NOT {JOB_IS_BUSY.format(run='r')})"
)


# traceparent is the creating request's: a change made later keeps it (jobs read back
# without it).
IMMUTABLE_JOB_COLUMNS = frozenset(
    {"id", "tenant_id", "created_at", "shard_key", "expected", "traceparent"}
)


def now_us(c: sqlite3.Connection) -> int:
    value: int = c.execute(
        "SELECT CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"
    ).fetchone()[0]
    return value


def name_conflict(c: sqlite3.Connection, jobs: Sequence[Job]) -> Conflict:
    for j in jobs:
        taken = c.execute(
            "SELECT 1 FROM jobs WHERE tenant_id = ? AND name = ? AND state <> 'cancelled'"
            " AND id <> ?",
            (j.tenant_id, j.name, j.id),
        ).fetchone()
        if taken is not None:
            return Conflict("name", f"a live job named {j.name!r} already exists for this tenant")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        return Conflict("name", "the same name appears twice in one batch")
    return Conflict("id", "a job with this id already exists")


def state_action(before: JobState, after: JobState) -> str:
    if before is JobState.PAUSED and after is JobState.ACTIVE:
        return "resumed"
    return after.value


def active_jobs(c: sqlite3.Connection, job_ids: set[str]) -> set[str]:
    if not job_ids:
        return set()
    found = c.execute(
        f"SELECT id FROM jobs WHERE state = 'active' AND id IN ({placeholders(len(job_ids))})",
        tuple(job_ids),
    )
    return {r[0] for r in found}


def replace_running(c: sqlite3.Connection, claimed: list[Run]) -> None:
    """Overlap ``replace``: the runs just claimed displace their jobs' running ones."""
    for run in claimed:
        c.execute(
            "UPDATE runs SET cancel_requested = 1"
            " WHERE job_id = ? AND state = 'running' AND id <> ?",
            (run.job_id, run.id),
        )


def claimed(run: Run, job: sqlite3.Row) -> ClaimedRun:
    """A run just claimed, with what it executes with (see :func:`lifecycle.claimed_run`)."""
    return lifecycle.claimed_run(
        run,
        job_name=job["name"],
        action=decode.action(job["action"]),
        payload=None if run.payload is not None else json.loads(job["payload"]),
        retry=decode.retry_policy(job["retry"]),
        timeout_seconds=job["timeout_seconds"],
        delivery=decode.DELIVERIES[job["delivery"]],
        traceparent=job["traceparent"],
    )


HEARTBEAT = (
    "UPDATE runs SET lease_expires_at = max(lease_expires_at, ?)"
    " WHERE lease_owner = ? AND state = 'running' AND (id, fence) IN"
    " (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')"
    " FROM json_each(?)) RETURNING id, cancel_requested"
)


def _reported(first: int, at: str) -> str:
    """The SET clauses that store a report carried by the JSON row ``d.value`` (progress,
    message and checkpoint at elements ``first`` to ``first + 2``), stamped ``at``: a
    NULL progress or checkpoint keeps the stored one."""
    p, m, k = (f"json_extract(d.value, '$[{i}]')" for i in (first, first + 1, first + 2))
    return (
        f" progress = coalesce({p}, progress),"
        f" progress_message = CASE WHEN {p} IS NULL THEN progress_message ELSE {m} END,"
        f" progress_at = CASE WHEN {p} IS NULL THEN progress_at ELSE {at} END,"
        f" checkpoint = coalesce({k}, checkpoint),"
        f" checkpoint_at = CASE WHEN {k} IS NULL THEN checkpoint_at ELSE {at} END"
    )


# Only when some run has something to report: the common heartbeat keeps its statement.
# Params: until, now (twice), the JSON rows [id, fence, progress, message, checkpoint],
# worker.
HEARTBEAT_WITH_REPORTS = (
    "UPDATE runs SET lease_expires_at = max(lease_expires_at, ?),"
    + _reported(2, "?")
    + " FROM json_each(?) AS d"
    " WHERE runs.lease_owner = ? AND runs.state = 'running'"
    " AND runs.id = json_extract(d.value, '$[0]') AND runs.fence = json_extract(d.value, '$[1]')"
    " RETURNING runs.id, runs.cancel_requested"
)

# Params: the JSON rows [id, fence, started_at] (one per run), worker. "started_at IS
# NULL": a start once recorded is never moved (a mark sent again).
MARK_STARTED = (
    "UPDATE runs SET started_at = d.started_at"
    " FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS fence,"
    " json_extract(value, '$[2]') AS started_at FROM json_each(?)) AS d"
    " WHERE runs.id = d.id AND runs.fence = d.fence AND runs.lease_owner = ?"
    " AND runs.state = 'running' AND runs.started_at IS NULL"
    " RETURNING runs.id"
)

COMPLETE_RUNS = (
    "UPDATE runs SET state = json_extract(d.value, '$[2]'),"
    " finished_at = json_extract(d.value, '$[3]'),"
    " available_at = coalesce(json_extract(d.value, '$[4]'), available_at),"
    " lease_owner = NULL, lease_expires_at = NULL, cancel_requested = 0,"
    " last_error = json_extract(d.value, '$[5]'),"
    " reason = coalesce(json_extract(d.value, '$[6]'), reason),"
    + _reported(7, "json_extract(d.value, '$[10]')")
    + ", result = coalesce(json_extract(d.value, '$[11]'), result),"
    # A run claimed ahead and never marked: its completion says when it started.
    " started_at = coalesce(started_at, json_extract(d.value, '$[12]'))"
    " FROM json_each(?) AS d"
    " WHERE runs.id = json_extract(d.value, '$[0]')"
    " AND runs.fence = json_extract(d.value, '$[1]') AND runs.state = 'running'"
    " RETURNING runs.id, runs.tenant_id, runs.job_id, runs.attempt, runs.pool,"
    " runs.scheduled_for"
)


def complete_many(
    c: sqlite3.Connection, completions: Sequence[Completion]
) -> list[tuple[Completion, str]]:
    """Fenced completions: one UPDATE for the batch (its rows as a JSON array) and one
    ``executemany`` for their attempts. Returns the accepted ones with their pools."""
    batch = json.dumps(
        [
            (
                d.run_id,
                d.fence,
                d.state.value,
                rows.us(d.finished_at) if d.state.finished else None,
                rows.us_or_none(d.available_at),
                d.error_message,
                d.reason,
                d.progress,
                d.progress_message,
                d.checkpoint,
                rows.us(d.finished_at),
                d.result,
                rows.us_or_none(d.started_at),
            )
            for d in completions
        ]
    )
    updated = {r[0]: r for r in c.execute(COMPLETE_RUNS, (batch,))}
    accepted: list[tuple[Completion, str]] = []
    attempts = []
    events: list[Event] = []
    for d in completions:
        row = updated.pop(d.run_id, None)  # popped: a run completed twice counts once
        if row is None:
            continue
        accepted.append((d, row[4]))
        event = OUTCOME_EVENTS.get(d.state)
        if event is not None:
            at = rows.us(d.finished_at)
            events.append((row[1], d.run_id, row[2], row[5], row[3], event, d.error_message, at))
        attempts.append(
            (
                row[1],
                d.run_id,
                row[2],
                row[3],
                d.worker_id,
                d.fence,
                rows.us_or_none(d.started_at),
                rows.us(d.finished_at),
                d.lag_seconds,
                d.outcome.value,
                d.error_class,
                d.error_message,
                d.http_status,
                d.output,
            )
        )
    c.executemany(INSERT_ATTEMPT_WITH_STATUS, attempts)
    record_events(c, events)
    return accepted


INSERT_ATTEMPT = (
    "INSERT INTO attempts (tenant_id, run_id, job_id, attempt, worker_id, fence,"
    " started_at, finished_at, lag_seconds, outcome, error_class, error_message)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_ATTEMPT_WITH_STATUS = (
    "INSERT INTO attempts (tenant_id, run_id, job_id, attempt, worker_id, fence,"
    " started_at, finished_at, lag_seconds, outcome, error_class, error_message, http_status,"
    " output) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def insert_attempt(
    c: sqlite3.Connection,
    who: tuple[str, int, str, int, str | None],
    fence: int,
    when: tuple[int | None, int, float | None],
    what: tuple[AttemptOutcome, str | None, str | None],
) -> None:
    outcome, error_class, error_message = what
    c.execute(INSERT_ATTEMPT, (*who, fence, *when, outcome.value, error_class, error_message))


def delivery_of(c: sqlite3.Connection, job_id: str) -> Delivery:
    found = c.execute("SELECT delivery FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return Delivery.AT_LEAST_ONCE if found is None else decode.DELIVERIES[found[0]]


# A transition's columns (see lifecycle.Transition). An unclaimed run's start is its
# previous attempt's again (none if it had none): the one column the verdict leaves to
# the store, as only history knows it.
TRANSITION = (
    "UPDATE runs SET state = ?, attempt = ?, max_attempts = ?, available_at = ?,"
    " finished_at = ?, reason = ?, last_error = ?,"
    " started_at = CASE WHEN ? THEN (SELECT a.started_at FROM attempts a"
    " WHERE a.run_id = runs.id AND a.attempt = ? ORDER BY a.id DESC LIMIT 1)"
    " ELSE started_at END,"
    " lease_owner = NULL, lease_expires_at = NULL, cancel_requested = 0"
    " WHERE id = ?"
)


def transition(
    c: sqlite3.Connection, run: Run, t: lifecycle.Transition, at: int, worker_id: str | None = None
) -> None:
    """Store what the lifecycle decided for ``run``: its attempt row (by ``worker_id``)
    if one is recorded, its columns, and its event for the outbox."""
    if t.recorded is not None:
        insert_attempt(
            c,
            (run.tenant_id, run.id, run.job_id, run.attempt, worker_id),
            run.fence,
            (rows.us_or_none(run.started_at), at, None),
            (t.recorded, t.error_class, t.last_error),
        )
    c.execute(
        TRANSITION,
        (
            t.state.value,
            t.attempt,
            t.max_attempts,
            rows.us(t.available_at),
            rows.us_or_none(t.finished_at),
            t.reason,
            t.last_error,
            t.unclaim,
            t.attempt,
            run.id,
        ),
    )
    if t.event is not None:
        head = (run.tenant_id, run.id, run.job_id, rows.us(run.scheduled_for), run.attempt)
        record_events(c, [(*head, t.event.value, t.last_error, at)])


def release_one(c: sqlite3.Connection, release: Release, at: int) -> tuple[RunState, str] | None:
    """Give back one run a stopping worker holds (see ``Store.release_runs``) as
    :func:`lifecycle.release` says; return where it went and its pool, or None if the
    fence is stale."""
    row = c.execute(
        "SELECT * FROM runs WHERE id = ? AND fence = ? AND state = 'running'",
        (release.run_id, release.fence),
    ).fetchone()
    if row is None:
        return None
    run = rows.run(row)
    t = lifecycle.release(
        run,
        started=release.started,
        why=release.why,
        delivery=delivery_of(c, run.job_id),
        now=rows.dt(at),
    )
    transition(c, run, t, at, release.worker_id)
    return t.state, run.pool


def rescue_one(
    c: sqlite3.Connection, row: sqlite3.Row, at: int, *, gone: bool = False
) -> lifecycle.Transition:
    """Free a run whose lease expired, or (``gone``) whose owner was proved dead before
    that, as :func:`lifecycle.rescue` says."""
    run = rows.run(row)
    delivery = delivery_of(c, run.job_id)
    t = lifecycle.rescue(run, delivery=delivery, now=rows.dt(at), gone=gone)
    transition(c, run, t, at, run.lease_owner)
    return t


RESCUED = {
    RunState.PENDING: lambda r: r.retried,
    RunState.DEAD: lambda r: r.dead,
    RunState.CANCELLED: lambda r: r.cancelled,
}


# The live view's reads (list_activity), each along an index: runs_leases, runs_finished
# and runs_claimable.
ACTIVITY_RUNNING = (
    "SELECT * FROM runs WHERE state = 'running' ORDER BY lease_expires_at, id LIMIT ?"
)
ACTIVITY_CLOSED = (
    "SELECT * FROM runs r WHERE finished_at >= ? AND NOT EXISTS (SELECT 1 FROM attempts a"
    " WHERE a.run_id = r.id AND a.attempt = r.attempt AND a.finished_at = r.finished_at)"
    " ORDER BY finished_at, id LIMIT ?"
)
ACTIVITY_WAITING = (
    "SELECT * FROM runs WHERE id IN (SELECT min(id) FROM runs WHERE state = 'pending'"
    " AND available_at <= ? GROUP BY job_id) ORDER BY id LIMIT ?"
)


def replay_run(
    c: sqlite3.Connection, tenant_id: str, run_id: int, at: int, extra_attempts: int, actor: str
) -> str | None:
    """Put a dead run back to pending with ``extra_attempts`` more (as
    :func:`lifecycle.replay` says), audited; its pool, or None if it is not a dead run of
    the tenant."""
    row = c.execute(
        "SELECT * FROM runs WHERE tenant_id = ? AND id = ?", (tenant_id, run_id)
    ).fetchone()
    if row is None:
        return None
    run = rows.run(row)
    t = lifecycle.replay(run, budget=extra_attempts, actor=actor, now=rows.dt(at))
    if t is None:
        return None
    transition(c, run, t, at)
    audit(c, tenant_id, "run", run_id, "replayed", actor, at)
    return run.pool
