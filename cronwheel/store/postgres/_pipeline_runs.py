"""The PostgreSQL store's pipeline runs (decision 0025).

Every function here runs inside a transaction its caller opened. :func:`advance` is the
one place a pipeline run moves on: it locks the pipeline run's row (so two processes
never plan the same run at once), marks the task rows whose runs ended, asks
:func:`cronwheel.core.pipelines.engine.plan` what follows, and writes it: the runs of the
tasks that start, keyed by ``(pipeline run, task, instance)`` in ``pipeline_tasks``
(a duplicate aborts the transaction rather than starting a task twice), the skipped
tasks, and the run's ending.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypeAlias

import asyncpg
from asyncpg import Record

from cronwheel.core import overlap
from cronwheel.core.lifecycle import attempt_budget, replay_reason
from cronwheel.core.model import Overlap
from cronwheel.core.pipelines.engine import (
    REASON_PIPELINE_CANCELLED,
    TaskRow,
    TaskState,
    downstream,
    ending_event_id,
    ending_targets,
    needed_results,
    plan,
)
from cronwheel.core.pipelines.model import PipelineRun, PipelineRunStart, PipelineTask
from cronwheel.core.pipelines.tasks import has_keys, task_runs
from cronwheel.store.postgres import _history
from cronwheel.store.postgres._sql import _CHANNEL  # the pools' wake-up channels

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    from cronwheel.core.pipelines.definition import Definition

    Connection: TypeAlias = asyncpg.Connection[Record] | PoolConnectionProxy[Record]

log = logging.getLogger("cronwheel.pipelines")


START = """
INSERT INTO pipeline_runs (id, tenant_id, pipeline_id, version, job_id, state, trigger_run_id,
                           actor, created_at)
VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8)
ON CONFLICT (trigger_run_id) DO NOTHING
RETURNING id"""

_LOCK = """
SELECT pr.*, v.definition::text AS definition_text
FROM pipeline_runs AS pr
JOIN pipeline_versions AS v ON v.pipeline_id = pr.pipeline_id AND v.version = pr.version
WHERE pr.id = $1
FOR UPDATE OF pr"""

# The task rows whose runs have ended, by the runs' own state (written earlier in the
# same transaction by a completion, or by a rescue or cancel before).
_MARK_ENDED = """
UPDATE pipeline_tasks AS t
SET state = CASE r.state WHEN 'succeeded' THEN 'succeeded' WHEN 'dead' THEN 'dead'
                         WHEN 'cancelled' THEN 'cancelled' ELSE 'skipped' END,
    reason = CASE WHEN r.state = 'skipped' THEN r.reason ELSE t.reason END, updated_at = $2
FROM runs AS r
WHERE t.pipeline_run_id = $1 AND t.state = 'started' AND r.id = t.run_id
  AND r.state IN ('succeeded', 'dead', 'cancelled', 'skipped')"""

_ROWS = "SELECT task, instance, state, reason FROM pipeline_tasks WHERE pipeline_run_id = $1"

_RESULTS = """
SELECT t.task, t.instance, r.result
FROM pipeline_tasks AS t JOIN runs AS r ON r.id = t.run_id
WHERE t.pipeline_run_id = $1 AND t.task = ANY($2::text[]) AND t.state = 'succeeded'"""

# Task runs are runs of the pipeline run's job, each at its own instant just after the
# job's latest (the (job, scheduled_for) key): another pipeline run of the same job may
# take an instant at the same moment, so a conflict is skipped and retried.
_INSERT_RUNS = f"""
WITH floor AS MATERIALIZED (
    SELECT greatest($4::timestamptz, (SELECT max(scheduled_for) FROM runs WHERE job_id = $3)
                                     + interval '1 microsecond') AS t
),
inserted AS (
    INSERT INTO runs (tenant_id, job_id, scheduled_for, available_at, state, pool, priority,
                      max_attempts, job_version, overlap, created_at, payload, pipeline_run_id,
                      task, task_spec, inputs, concurrency_key, concurrency_limit)
    SELECT $2, $3, f.t + (x.n - 1) * interval '1 microsecond', $4, 'pending', x.pool,
           x.priority, x.max_attempts, $5, 'allow', $4, x.payload::jsonb, $1, x.task,
           x.spec::jsonb, x.inputs::jsonb, x.concurrency_key, x.concurrency_limit
    FROM floor AS f,
         unnest($6::text[], $7::int[], $8::int[], $9::text[], $10::text[], $11::text[],
                $12::text[], $13::text[], $14::int[]) WITH ORDINALITY
             AS x(pool, priority, max_attempts, payload, task, spec, inputs, concurrency_key,
                  concurrency_limit, n)
    ORDER BY x.n
    ON CONFLICT (job_id, scheduled_for) DO NOTHING
    RETURNING id, scheduled_for, pool
),
woken AS (
    SELECT pg_notify({_CHANNEL.format(t="'runs:' || pool")}, '')
    FROM (SELECT DISTINCT pool FROM inserted) AS p
)
SELECT i.id, round(extract(epoch FROM i.scheduled_for - f.t) * 1000000)::int + 1 AS n,
       (SELECT count(*) FROM woken) AS woken
FROM inserted AS i, floor AS f"""

_INSERT_TASKS = """
INSERT INTO pipeline_tasks (pipeline_run_id, task, instance, state, run_id, reason, message,
                            updated_at)
SELECT $1, x.task, x.instance, x.state, x.run_id, x.reason, x.message, $2
FROM unnest($3::text[], $4::int[], $5::text[], $6::bigint[], $7::text[], $8::text[])
    AS x(task, instance, state, run_id, reason, message)"""

_END = "UPDATE pipeline_runs SET state = $2, finished_at = $3 WHERE id = $1"

# The ending's outbox rows, one per target that asked for it ($4 urls, $5 their indexes
# in the pipeline's notify); run_id is the pipeline run's last task run.
_NOTIFY = """
INSERT INTO notifications (tenant_id, event_id, event, job_id, job_name, run_id,
                           scheduled_for, attempt, error, occurred_at, target, url, next_at,
                           pipeline_run_id)
SELECT pr.tenant_id, $2, 'pipeline_' || pr.state, pr.job_id, j.name,
       (SELECT max(run_id) FROM pipeline_tasks WHERE pipeline_run_id = pr.id),
       pr.created_at, 0, $3, pr.finished_at, t.target, t.url, pr.finished_at, pr.id
FROM pipeline_runs AS pr
JOIN jobs AS j ON j.id = pr.job_id
CROSS JOIN unnest($4::text[], $5::int[]) AS t(url, target)
WHERE pr.id = $1"""


@functools.lru_cache(maxsize=256)
def _definition(text: str) -> Definition:
    """A stored definition, parsed once per distinct version (every ending of every
    task of its runs plans with it)."""
    # Here, not at the top: parsing is pydantic's, which a worker without pipelines never
    # needs: with the job specs it pulls in, it was a fifth of a worker's start (issue 28).
    from cronwheel.core.pipelines.definition import parse_definition

    return parse_definition(json.loads(text))


async def start(conn: Connection, s: PipelineRunStart) -> str:
    """Start a pipeline run and its root tasks; for a trigger run that already started
    one, that one's id (a retried trigger starts nothing new)."""
    inserted = await conn.fetchval(
        START,
        s.id,
        s.tenant_id,
        s.pipeline_id,
        s.version,
        s.job_id,
        s.trigger_run_id,
        s.actor,
        s.now,
    )
    if inserted is None:
        found: str = await conn.fetchval(
            "SELECT id FROM pipeline_runs WHERE trigger_run_id = $1", s.trigger_run_id
        )
        return found
    await advance(conn, str(inserted), now=s.now, job_version=s.job_version)
    await _displace(conn, s, str(inserted))
    return str(inserted)


async def _displace(conn: Connection, s: PipelineRunStart, started: str) -> None:
    """A trigger under ``overlap: replace`` (cronwheel.core.overlap.displaces) cancels
    its job's other unfinished pipeline runs as it starts its own, as a user's cancel
    would (the same order of locks: their runs, then each pipeline run's row)."""
    if s.trigger_run_id is None:
        return
    policy = await conn.fetchval("SELECT overlap FROM runs WHERE id = $1", s.trigger_run_id)
    if policy is None or not overlap.displaces(Overlap(policy)):
        return
    others = await conn.fetch(
        "SELECT id FROM pipeline_runs WHERE job_id = $1 AND state = 'running' AND id <> $2"
        " ORDER BY id",
        s.job_id,
        started,
    )
    for row in others:
        await cancel(conn, s.tenant_id, str(row["id"]), now=s.now)


async def advance(
    conn: Connection, pipeline_run_id: str, *, now: datetime, job_version: int | None = None
) -> None:
    """Move a pipeline run on from what its tasks' runs say now (see the module)."""
    pr = await conn.fetchrow(_LOCK, pipeline_run_id)
    if pr is None:
        return
    await conn.execute(_MARK_ENDED, pipeline_run_id, now)
    if pr["state"] != "running":
        return
    definition = _definition(pr["definition_text"])
    found = {
        (r["task"], r["instance"]): TaskRow(TaskState(r["state"]), r["reason"])
        for r in await conn.fetch(_ROWS, pipeline_run_id)
    }
    need = needed_results(definition, found)
    if need:
        for r in await conn.fetch(_RESULTS, pipeline_run_id, sorted(need)):
            key = (r["task"], r["instance"])
            found[key] = TaskRow(found[key].state, found[key].reason, r["result"])
    decided = plan(definition, found, cancelled=pr["cancel_requested"])
    tasks: list[tuple[str, int, str, int | None, str | None, str | None]] = []
    if decided.start:
        if job_version is None:
            job_version = await conn.fetchval(
                "SELECT version FROM jobs WHERE id = $1", pr["job_id"]
            )
        job_payload = None
        if has_keys(definition, decided.start):  # only then is the payload read
            job_payload = await conn.fetchval(
                "SELECT payload FROM jobs WHERE id = $1", pr["job_id"]
            )
        todo = task_runs(definition, decided.start, job_payload)
        for _ in range(100):  # each round loses only to a racing pipeline run's instants
            got = await conn.fetch(
                _INSERT_RUNS,
                pipeline_run_id,
                pr["tenant_id"],
                pr["job_id"],
                now,
                job_version,
                [t.pool for t in todo],
                [t.priority for t in todo],
                [t.max_attempts for t in todo],
                [t.payload for t in todo],
                [t.task for t in todo],
                [t.task_spec for t in todo],
                [t.inputs for t in todo],
                [t.concurrency_key for t in todo],
                [t.concurrency_limit for t in todo],
            )
            ids = {r["n"]: r["id"] for r in got}
            left = []
            for n, t in enumerate(todo, 1):
                if n in ids:
                    tasks.append((t.task, t.instance, "started", ids[n], None, None))
                else:
                    left.append(t)
            todo = left
            if not todo:
                break
        else:
            raise RuntimeError(f"pipeline run {pipeline_run_id}: no free instant for its tasks")
    for skip in decided.skip:
        tasks.append((skip.task, skip.instance, skip.state.value, None, skip.reason, skip.message))
    if tasks:
        await conn.execute(
            _INSERT_TASKS,
            pipeline_run_id,
            now,
            [t[0] for t in tasks],
            [t[1] for t in tasks],
            [t[2] for t in tasks],
            [t[3] for t in tasks],
            [t[4] for t in tasks],
            [t[5] for t in tasks],
        )
    if decided.ending is not None:
        await conn.execute(_END, pipeline_run_id, decided.ending.value, now)
        targets = ending_targets(definition, decided.ending)
        if targets:
            event_id = ending_event_id(pipeline_run_id, decided.ending.value, now)
            error = ", ".join(decided.failed) + " failed" if decided.failed else None
            urls, indexes = [url for _, url in targets], [i for i, _ in targets]
            await conn.execute(_NOTIFY, pipeline_run_id, event_id, error, urls, indexes)


async def advance_ended(
    conn: Connection, pipeline_run_ids: Sequence[str], *, now: datetime
) -> None:
    """Advance each pipeline run, in id order (the order their rows are locked in), each
    under a savepoint: a pipeline run that cannot be planned (a defect of ours) must not
    refuse the completions it rides with, a worker's whole batch, which would be sent
    again forever. Its task rows stay ``started``, so maintenance tries it again and logs
    why it fails."""
    for pipeline_run_id in sorted(set(pipeline_run_ids)):
        try:
            async with conn.transaction():
                await advance(conn, pipeline_run_id, now=now)
        except (asyncpg.PostgresConnectionError, asyncpg.InterfaceError, OSError):
            raise
        except Exception:
            log.exception(
                "pipeline run %s could not move on; maintenance retries it", pipeline_run_id
            )


# The pipeline runs with a task whose run ended by a path that did not advance them (a
# lease rescue, a release, a cancel): the reconciler's work.
STALLED = """
SELECT DISTINCT t.pipeline_run_id
FROM pipeline_tasks AS t JOIN runs AS r ON r.id = t.run_id
WHERE t.state = 'started' AND r.state IN ('succeeded', 'dead', 'cancelled', 'skipped')
LIMIT $1"""

# Cancel: pending task runs end cancelled, running ones are asked to stop; the runs are
# written before the pipeline run's row is locked, the order a completion takes them in.
CANCEL_RUNS = """
WITH pending AS (
    UPDATE runs SET state = 'cancelled', finished_at = $2, reason = $3
    WHERE pipeline_run_id = $1 AND state = 'pending'
    RETURNING id
),
running AS (
    UPDATE runs SET cancel_requested = true
    WHERE pipeline_run_id = $1 AND state = 'running'
    RETURNING id
)
SELECT (SELECT count(*) FROM pending) AS cancelled, (SELECT count(*) FROM running) AS asked"""


async def cancel(conn: Connection, tenant_id: str, pipeline_run_id: str, *, now: datetime) -> bool:
    """Cancel a running pipeline run; False if it is not the tenant's."""
    owner = await conn.fetchval(
        "SELECT tenant_id FROM pipeline_runs WHERE id = $1", pipeline_run_id
    )
    if owner != tenant_id:
        return False
    await conn.fetchrow(CANCEL_RUNS, pipeline_run_id, now, REASON_PIPELINE_CANCELLED)
    await conn.execute(
        "UPDATE pipeline_runs SET cancel_requested = true WHERE id = $1 AND state = 'running'",
        pipeline_run_id,
    )
    await advance(conn, pipeline_run_id, now=now)
    return True


async def retry_task(
    conn: Connection,
    tenant_id: str,
    pipeline_run_id: str,
    task: str,
    *,
    now: datetime,
    actor: str,
    replay: str,
) -> str | None:
    """Run a dead task again: its dead instances' runs are replayed (the same runs, so
    the task still starts once per pipeline run), the tasks skipped because of it wait
    again, and the pipeline run is running again. ``replay`` is the store's replay
    statement. None when done; otherwise why it cannot be."""
    pr = await conn.fetchrow(_LOCK, pipeline_run_id)
    if pr is None or pr["tenant_id"] != tenant_id:
        return "not_found"
    if pr["cancel_requested"]:
        return "the pipeline run was cancelled: start a new one"
    definition = _definition(pr["definition_text"])
    if task not in definition.spec.tasks:
        return "not_found_task"
    # Its task runs may have been archived once it finished (decision 0032): back into
    # runs, where the engine reads their states and results. The lock above waits for a
    # maintenance pass that is archiving them (it share-locks the pipeline run).
    await _history.restore_pipeline_run(conn, pipeline_run_id)
    await conn.execute(_MARK_ENDED, pipeline_run_id, now)
    dead = await conn.fetch(
        "SELECT instance, run_id FROM pipeline_tasks WHERE pipeline_run_id = $1 AND task = $2"
        " AND state = 'dead'",
        pipeline_run_id,
        task,
    )
    if not dead:
        return f"tasks.{task} is not dead: only a task that failed for good is retried"
    if any(r["run_id"] is None for r in dead):
        return (
            f"tasks.{task} could not fan out over its parent's result: retry the parent or "
            "start a new pipeline run"
        )
    extra = attempt_budget(definition.spec.tasks[task].retry.policy())
    ids = [r["run_id"] for r in dead]
    await conn.fetchrow(replay, tenant_id, ids, now, extra, actor, replay_reason(actor))
    await conn.execute(
        "UPDATE pipeline_tasks SET state = 'started', reason = NULL, message = NULL,"
        " updated_at = $3 WHERE pipeline_run_id = $1 AND task = $2 AND state = 'dead'",
        pipeline_run_id,
        task,
        now,
    )
    await _forget_downstream(conn, definition, pipeline_run_id, task)
    await conn.execute(
        "UPDATE pipeline_runs SET state = 'running', finished_at = NULL WHERE id = $1",
        pipeline_run_id,
    )
    await advance(conn, pipeline_run_id, now=now)
    return None


async def _forget_downstream(
    conn: Connection, definition: Definition, pipeline_run_id: str, task: str
) -> None:
    """Forget the skipped rows of every task downstream of ``task``: they are planned
    again once it ends. Tasks that ran keep their rows, so nothing runs twice."""
    below = downstream(definition, task)
    if below:
        await conn.execute(
            "DELETE FROM pipeline_tasks WHERE pipeline_run_id = $1 AND task = ANY($2::text[])"
            " AND state = 'skipped'",
            pipeline_run_id,
            sorted(below),
        )
    # With failure_policy stop, a failure stopped tasks that do not depend on it.
    await conn.execute(
        "DELETE FROM pipeline_tasks WHERE pipeline_run_id = $1 AND reason = 'pipeline_stopped'",
        pipeline_run_id,
    )


_TASKS_WITH_RUNS = """
SELECT t.task, t.instance, t.state, t.run_id, t.reason, t.message, t.updated_at,
       r.state AS run_state
FROM pipeline_tasks AS t LEFT JOIN all_runs AS r ON r.id = t.run_id
WHERE t.pipeline_run_id = $1"""


def pipeline_run(row: Record, tasks: Sequence[Record] = ()) -> PipelineRun:
    """A pipeline run from its row (and, read one at a time, its task rows)."""
    return PipelineRun(
        id=str(row["id"]),
        tenant_id=row["tenant_id"],
        pipeline_id=str(row["pipeline_id"]),
        version=row["version"],
        job_id=str(row["job_id"]),
        state=row["state"],
        actor=row["actor"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        cancel_requested=bool(row["cancel_requested"]),
        trigger_run_id=row["trigger_run_id"],
        tasks=tuple(
            PipelineTask(
                task=t["task"],
                instance=t["instance"],
                state=t["state"],
                run_id=t["run_id"],
                reason=t["reason"],
                message=t["message"],
                updated_at=t["updated_at"],
                run_state=t["run_state"],
            )
            for t in tasks
        ),
    )


async def get(conn: Connection, tenant_id: str, pipeline_run_id: str) -> PipelineRun | None:
    row = await conn.fetchrow(
        "SELECT * FROM pipeline_runs WHERE tenant_id = $1 AND id = $2", tenant_id, pipeline_run_id
    )
    if row is None:
        return None
    definition = _definition(
        await conn.fetchval(
            "SELECT definition::text FROM pipeline_versions"
            " WHERE pipeline_id = $1 AND version = $2",
            row["pipeline_id"],
            row["version"],
        )
    )
    order = {name: i for i, name in enumerate(definition.order)}
    tasks = sorted(
        await conn.fetch(_TASKS_WITH_RUNS, pipeline_run_id),
        key=lambda t: (order.get(t["task"], len(order)), t["instance"]),
    )
    return pipeline_run(row, tasks)


LIST = """
SELECT * FROM pipeline_runs
WHERE tenant_id = $1 AND ($2::uuid IS NULL OR pipeline_id = $2)
  AND ($3::uuid IS NULL OR id < $3) AND ($4::text IS NULL OR state = $4)
ORDER BY id DESC
LIMIT $5"""

# Key rotation: every version's definition, and the task specs of unfinished task runs
# (for update: a completion or a claim waits for the rotation, never the reverse).
VERSIONS_FOR_RESEAL = """
SELECT v.pipeline_id, v.version, p.tenant_id, v.definition::text AS definition
FROM pipeline_versions AS v JOIN pipelines AS p ON p.id = v.pipeline_id
ORDER BY v.pipeline_id, v.version
FOR UPDATE OF v"""

RUNS_FOR_RESEAL = """
SELECT id, tenant_id, task_spec::text AS task_spec FROM runs
WHERE pipeline_run_id IS NOT NULL AND state IN ('pending', 'running')
  AND task_spec IS NOT NULL
ORDER BY id
FOR NO KEY UPDATE"""
