"""The SQLite store's pipeline runs (decision 0025), as the PostgreSQL store's
(``cronwheel/store/postgres/_pipeline_runs.py``): :func:`advance` marks the task rows
whose runs ended, asks :func:`cronwheel.core.pipelines.engine.plan` what follows and writes
it. Each function runs on the connection's thread inside the write transaction its
caller opened; SQLite's single write lock serialises them, as the row lock does there.
Functions that insert runs return their pools, for the caller to wake the workers.
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cronwheel.core import overlap
from cronwheel.core.lifecycle import attempt_budget
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
from cronwheel.store.sqlite import _ops as ops
from cronwheel.store.sqlite import _rows as rows

if TYPE_CHECKING:
    from cronwheel.core.pipelines.definition import Definition

log = logging.getLogger("cronwheel.pipelines")

_LOCK = """
SELECT pr.*, v.definition AS definition_text
FROM pipeline_runs AS pr
JOIN pipeline_versions AS v ON v.pipeline_id = pr.pipeline_id AND v.version = pr.version
WHERE pr.id = ?"""

_MARK_ENDED = """
UPDATE pipeline_tasks
SET state = CASE r.state WHEN 'succeeded' THEN 'succeeded' WHEN 'dead' THEN 'dead'
                         WHEN 'cancelled' THEN 'cancelled' ELSE 'skipped' END,
    reason = CASE WHEN r.state = 'skipped' THEN r.reason ELSE pipeline_tasks.reason END,
    updated_at = ?
FROM runs AS r
WHERE pipeline_tasks.pipeline_run_id = ? AND pipeline_tasks.state = 'started'
  AND r.id = pipeline_tasks.run_id AND r.state IN ('succeeded', 'dead', 'cancelled', 'skipped')"""


@functools.lru_cache(maxsize=256)
def _definition(text: str) -> Definition:
    # Here, not at the top: parsing is pydantic's, which a worker without pipelines never
    # needs: with the job specs it pulls in, it was a fifth of a worker's start (issue 28).
    from cronwheel.core.pipelines.definition import parse_definition

    return parse_definition(json.loads(text))


def start(c: sqlite3.Connection, s: PipelineRunStart) -> tuple[str, list[str]]:
    """Start a pipeline run and its roots: its id and the pools to wake. For a trigger
    run that already started one, that one."""
    if s.trigger_run_id is not None:
        found = c.execute(
            "SELECT id FROM pipeline_runs WHERE trigger_run_id = ?", (s.trigger_run_id,)
        ).fetchone()
        if found is not None:
            return str(found[0]), []
    c.execute(
        "INSERT INTO pipeline_runs (id, tenant_id, pipeline_id, version, job_id, state,"
        " trigger_run_id, actor, created_at) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)",
        (
            s.id,
            s.tenant_id,
            s.pipeline_id,
            s.version,
            s.job_id,
            s.trigger_run_id,
            s.actor,
            rows.us(s.now),
        ),
    )
    pools = advance(c, s.id, rows.us(s.now), job_version=s.job_version)
    _displace(c, s)
    return s.id, pools


def _displace(c: sqlite3.Connection, s: PipelineRunStart) -> None:
    """A trigger under ``overlap: replace`` (cronwheel.core.overlap.displaces) cancels
    its job's other unfinished pipeline runs as it starts its own, as a user's cancel
    would: their pending tasks end, their running ones are asked to stop."""
    if s.trigger_run_id is None:
        return
    policy = c.execute("SELECT overlap FROM runs WHERE id = ?", (s.trigger_run_id,)).fetchone()
    if policy is None or not overlap.displaces(Overlap(policy[0])):
        return
    others = c.execute(
        "SELECT id FROM pipeline_runs WHERE job_id = ? AND state = 'running' AND id <> ?"
        " ORDER BY id",
        (s.job_id, s.id),
    ).fetchall()
    for (other,) in others:
        cancel(c, s.tenant_id, other, rows.us(s.now))


def advance(
    c: sqlite3.Connection, pipeline_run_id: str, at: int, *, job_version: int | None = None
) -> list[str]:
    """Move a pipeline run on; the pools of the task runs it inserted."""
    pr = c.execute(_LOCK, (pipeline_run_id,)).fetchone()
    if pr is None:
        return []
    c.execute(_MARK_ENDED, (at, pipeline_run_id))
    if pr["state"] != "running":
        return []
    definition = _definition(pr["definition_text"])
    found = {
        (r["task"], r["instance"]): TaskRow(TaskState(r["state"]), r["reason"])
        for r in c.execute(
            "SELECT task, instance, state, reason FROM pipeline_tasks WHERE pipeline_run_id = ?",
            (pipeline_run_id,),
        )
    }
    need = needed_results(definition, found)
    for task in sorted(need):
        for r in c.execute(
            "SELECT t.instance, r.result FROM pipeline_tasks AS t JOIN runs AS r"
            " ON r.id = t.run_id WHERE t.pipeline_run_id = ? AND t.task = ?"
            " AND t.state = 'succeeded'",
            (pipeline_run_id, task),
        ):
            key = (task, r["instance"])
            result = None if r["result"] is None else json.loads(r["result"])
            found[key] = TaskRow(found[key].state, found[key].reason, result)
    decided = plan(definition, found, cancelled=bool(pr["cancel_requested"]))
    pools = []
    tasks: list[tuple[str, int, str, int | None, str | None, str | None]] = []
    if decided.start:
        if job_version is None:
            job_version = c.execute(
                "SELECT version FROM jobs WHERE id = ?", (pr["job_id"],)
            ).fetchone()[0]
        latest = c.execute(
            "SELECT max(scheduled_for) FROM runs WHERE job_id = ?", (pr["job_id"],)
        ).fetchone()[0]
        # Each task run at its own instant just after the job's latest: the
        # (job, scheduled_for) key; the write lock means no one races for it here.
        floor = max(at, (latest or 0) + 1)
        job_payload = None
        if has_keys(definition, decided.start):  # only then is the payload read
            (text,) = c.execute("SELECT payload FROM jobs WHERE id = ?", (pr["job_id"],)).fetchone()
            job_payload = None if text is None else json.loads(text)
        for n, t in enumerate(task_runs(definition, decided.start, job_payload)):
            run_id = c.execute(
                "INSERT INTO runs (tenant_id, job_id, scheduled_for, available_at, state, pool,"
                " priority, max_attempts, job_version, overlap, created_at, payload,"
                " pipeline_run_id, task, task_spec, inputs, concurrency_key, concurrency_limit)"
                " VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?, 'allow', ?, ?, ?, ?, ?, ?, ?, ?)"
                " RETURNING id",
                (
                    pr["tenant_id"],
                    pr["job_id"],
                    floor + n,
                    at,
                    t.pool,
                    t.priority,
                    t.max_attempts,
                    job_version,
                    at,
                    t.payload,
                    pipeline_run_id,
                    t.task,
                    t.task_spec,
                    t.inputs,
                    t.concurrency_key,
                    t.concurrency_limit,
                ),
            ).fetchone()[0]
            tasks.append((t.task, t.instance, "started", run_id, None, None))
            pools.append(t.pool)
    for skip in decided.skip:
        tasks.append((skip.task, skip.instance, skip.state.value, None, skip.reason, skip.message))
    # The primary key (pipeline run, task, instance): a task planned twice would abort
    # the transaction here, its runs with it, instead of starting twice.
    c.executemany(
        "INSERT INTO pipeline_tasks (pipeline_run_id, task, instance, state, run_id, reason,"
        " message, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(pipeline_run_id, *t, at) for t in tasks],
    )
    if decided.ending is not None:
        c.execute(
            "UPDATE pipeline_runs SET state = ?, finished_at = ? WHERE id = ?",
            (decided.ending.value, at, pipeline_run_id),
        )
        targets = ending_targets(definition, decided.ending)
        if targets:
            _notify(c, pr, decided.ending.value, decided.failed, targets, at)
    return pools


def _notify(
    c: sqlite3.Connection,
    pr: sqlite3.Row,
    state: str,
    failed: list[str],
    targets: list[tuple[int, str]],
    at: int,
) -> None:
    """The ending's outbox rows, one per target that asked for it; run_id is the
    pipeline run's last task run."""
    job_name = c.execute("SELECT name FROM jobs WHERE id = ?", (pr["job_id"],)).fetchone()[0]
    last = c.execute(
        "SELECT max(run_id) FROM pipeline_tasks WHERE pipeline_run_id = ?", (pr["id"],)
    ).fetchone()[0]
    event_id = ending_event_id(pr["id"], state, rows.dt(at))
    error = ", ".join(failed) + " failed" if failed else None
    c.executemany(
        "INSERT INTO notifications (tenant_id, event_id, event, job_id, job_name, run_id,"
        " scheduled_for, attempt, error, occurred_at, target, url, next_at, pipeline_run_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)",
        [
            (
                pr["tenant_id"],
                event_id,
                f"pipeline_{state}",
                pr["job_id"],
                job_name,
                last,
                pr["created_at"],
                error,
                at,
                index,
                url,
                at,
                pr["id"],
            )
            for index, url in targets
        ],
    )


def advance_ended(c: sqlite3.Connection, pipeline_run_ids: Sequence[str], at: int) -> list[str]:
    """Advance each pipeline run under a savepoint, as the PostgreSQL store does: one
    that cannot be planned is logged and left to maintenance, and never refuses the
    completions it rides with."""
    pools = []
    for pipeline_run_id in sorted(set(pipeline_run_ids)):
        c.execute("SAVEPOINT pipeline_advance")
        try:
            pools += advance(c, pipeline_run_id, at)
        except sqlite3.OperationalError:
            raise  # the database itself: the whole write is retried
        except Exception:
            c.execute("ROLLBACK TO pipeline_advance")
            log.exception(
                "pipeline run %s could not move on; maintenance retries it", pipeline_run_id
            )
        c.execute("RELEASE pipeline_advance")
    return pools


STALLED = """
SELECT DISTINCT t.pipeline_run_id
FROM pipeline_tasks AS t JOIN runs AS r ON r.id = t.run_id
WHERE t.state = 'started' AND r.state IN ('succeeded', 'dead', 'cancelled', 'skipped')
LIMIT ?"""


def cancel(c: sqlite3.Connection, tenant_id: str, pipeline_run_id: str, at: int) -> bool:
    owner = c.execute(
        "SELECT tenant_id FROM pipeline_runs WHERE id = ?", (pipeline_run_id,)
    ).fetchone()
    if owner is None or owner[0] != tenant_id:
        return False
    c.execute(
        "UPDATE runs SET state = 'cancelled', finished_at = ?, reason = ?"
        " WHERE pipeline_run_id = ? AND state = 'pending'",
        (at, REASON_PIPELINE_CANCELLED, pipeline_run_id),
    )
    c.execute(
        "UPDATE runs SET cancel_requested = 1 WHERE pipeline_run_id = ? AND state = 'running'",
        (pipeline_run_id,),
    )
    c.execute(
        "UPDATE pipeline_runs SET cancel_requested = 1 WHERE id = ? AND state = 'running'",
        (pipeline_run_id,),
    )
    advance(c, pipeline_run_id, at)
    return True


def retry_task(
    c: sqlite3.Connection, tenant_id: str, pipeline_run_id: str, task: str, at: int, actor: str
) -> tuple[str | None, list[str]]:
    """As the PostgreSQL store's: None when done, else why not; and pools to wake."""
    pr = c.execute(_LOCK, (pipeline_run_id,)).fetchone()
    if pr is None or pr["tenant_id"] != tenant_id:
        return "not_found", []
    if pr["cancel_requested"]:
        return "the pipeline run was cancelled: start a new one", []
    definition = _definition(pr["definition_text"])
    if task not in definition.spec.tasks:
        return "not_found_task", []
    c.execute(_MARK_ENDED, (at, pipeline_run_id))
    dead = c.execute(
        "SELECT instance, run_id FROM pipeline_tasks WHERE pipeline_run_id = ? AND task = ?"
        " AND state = 'dead'",
        (pipeline_run_id, task),
    ).fetchall()
    if not dead:
        return f"tasks.{task} is not dead: only a task that failed for good is retried", []
    if any(r["run_id"] is None for r in dead):
        return (
            f"tasks.{task} could not fan out over its parent's result: retry the parent or "
            "start a new pipeline run"
        ), []
    extra = attempt_budget(definition.spec.tasks[task].retry.policy())
    pools = []
    for r in dead:
        pool = ops.replay_run(c, tenant_id, r["run_id"], at, extra, actor)
        if pool is not None:
            pools.append(pool)
    c.execute(
        "UPDATE pipeline_tasks SET state = 'started', reason = NULL, message = NULL,"
        " updated_at = ? WHERE pipeline_run_id = ? AND task = ? AND state = 'dead'",
        (at, pipeline_run_id, task),
    )
    below = downstream(definition, task)
    if below:
        marks = ",".join("?" * len(below))
        c.execute(
            f"DELETE FROM pipeline_tasks WHERE pipeline_run_id = ? AND task IN ({marks})"
            " AND state = 'skipped'",
            (pipeline_run_id, *sorted(below)),
        )
    c.execute(
        "DELETE FROM pipeline_tasks WHERE pipeline_run_id = ? AND reason = 'pipeline_stopped'",
        (pipeline_run_id,),
    )
    c.execute(
        "UPDATE pipeline_runs SET state = 'running', finished_at = NULL WHERE id = ?",
        (pipeline_run_id,),
    )
    return None, pools + advance(c, pipeline_run_id, at)


def pipeline_run(row: sqlite3.Row, tasks: Sequence[sqlite3.Row] = ()) -> PipelineRun:
    return PipelineRun(
        id=row["id"],
        tenant_id=row["tenant_id"],
        pipeline_id=row["pipeline_id"],
        version=row["version"],
        job_id=row["job_id"],
        state=row["state"],
        actor=row["actor"],
        created_at=rows.dt(row["created_at"]),
        finished_at=rows.dt_or_none(row["finished_at"]),
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
                updated_at=rows.dt_or_none(t["updated_at"]),
                run_state=t["run_state"],
            )
            for t in tasks
        ),
    )


def get(c: sqlite3.Connection, tenant_id: str, pipeline_run_id: str) -> PipelineRun | None:
    row = c.execute(
        "SELECT * FROM pipeline_runs WHERE tenant_id = ? AND id = ?", (tenant_id, pipeline_run_id)
    ).fetchone()
    if row is None:
        return None
    text = c.execute(
        "SELECT definition FROM pipeline_versions WHERE pipeline_id = ? AND version = ?",
        (row["pipeline_id"], row["version"]),
    ).fetchone()[0]
    order = {name: i for i, name in enumerate(_definition(text).order)}
    tasks = sorted(
        c.execute(
            "SELECT t.*, r.state AS run_state FROM pipeline_tasks AS t"
            " LEFT JOIN runs AS r ON r.id = t.run_id WHERE t.pipeline_run_id = ?",
            (pipeline_run_id,),
        ).fetchall(),
        key=lambda t: (order.get(t["task"], len(order)), t["instance"]),
    )
    return pipeline_run(row, tasks)


def list_runs(
    c: sqlite3.Connection,
    tenant_id: str,
    pipeline_id: str | None,
    state: str | None,
    before: str | None,
    limit: int,
) -> list[PipelineRun]:
    found = c.execute(
        "SELECT * FROM pipeline_runs WHERE tenant_id = ?"
        " AND (? IS NULL OR pipeline_id = ?) AND (? IS NULL OR id < ?)"
        " AND (? IS NULL OR state = ?) ORDER BY id DESC LIMIT ?",
        (tenant_id, pipeline_id, pipeline_id, before, before, state, state, limit),
    ).fetchall()
    return [pipeline_run(r) for r in found]
