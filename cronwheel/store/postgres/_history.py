"""History on PostgreSQL: finished runs archived out of ``runs`` into tables partitioned
by time, and retention by dropping partitions (issue 18 item 4, decision 0032).

``runs`` and ``attempts`` keep the live runs and those that finished moments ago: the
hot path (claim, heartbeat, completion, release, rescue) never sees history. Maintenance
moves each finished run with its attempts to ``run_history`` and ``attempt_history``
once it has settled (:func:`archive`), one statement per batch, and retention drops the
partitions whose every run finished before the cutoff (:func:`drop_partitions`): no row
deletes, no dead tuples, no vacuum debt in history. Reads that may concern a finished
run select from the views ``all_runs`` and ``all_attempts``, which hold both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import asyncpg

from cronwheel.store.postgres._sql import FINISHED_STATES

if TYPE_CHECKING:
    from cronwheel.store.postgres.store import Connection

PARTITION_LOCK = 0x63776869_7374  # "cwhist": one maintenance process creates partitions
"""The advisory lock key under which partitions are created: two maintenance passes never
race to create the same one."""

LOCK_TIMEOUT = "2s"
"""How long creating or dropping a partition waits for its locks (both take an exclusive
lock on the partitioned table): a long read of history makes maintenance try again on its
next pass instead of queueing every other read of history behind it."""

_STAMP = "%Y%m%dt%H%M%S"
_NAME = re.compile(r"^(?:run|attempt)_history_p(\d{8}t\d{6})_(\d{8}t\d{6})$")

# The columns of attempts, in order: attempt_history has them, with run_finished_at
# before the columns added after step 20 (output): it is written by name.
_ATTEMPT_COLUMNS = (
    "id, tenant_id, run_id, job_id, attempt, worker_id, fence, started_at, finished_at,"
    " lag_seconds, outcome, error_class, error_message, http_status, output"
)

_PARTITIONS = """
SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid
WHERE i.inhparent = $1::regclass"""
_HISTORY = (("run_history", "finished_at"), ("attempt_history", "run_finished_at"))
"""The partitioned tables, and the column each is partitioned by."""

# Params: $1 the settle cutoff (now - settle), $2 the upper bound of the newest partition,
# $3 the batch. Only past occurrences move: a run cancelled before it was due stays until
# its instant has passed, so that no later insert of an occurrence (the scheduler's, an
# enqueue's, a pipeline task's: each at or after now) can meet an archived one that the
# unique (job_id, scheduled_for) index of runs no longer sees. A task run waits for its
# pipeline run to finish: the pipeline engine reads the results of finished task runs
# from runs while the pipeline run goes on. The pipeline run is share-locked, skipping
# one that a retry holds (the retry brings its task runs back into runs and sets it
# running again, in one transaction). SKIP LOCKED on the runs: two maintenance passes
# never move the same run, and a run being replayed is left alone. The attempts move with
# their run (no foreign key would delete them: migration 0024).
ARCHIVE = f"""
WITH picked AS (
    SELECT r.id FROM runs AS r
    WHERE r.finished_at < $1 AND r.finished_at < $2 AND r.state IN {FINISHED_STATES}
      AND r.scheduled_for < $1
      AND (r.pipeline_run_id IS NULL OR EXISTS (
          SELECT 1 FROM pipeline_runs AS p
          WHERE p.id = r.pipeline_run_id AND p.state <> 'running'
          FOR KEY SHARE SKIP LOCKED))
    ORDER BY r.finished_at
    LIMIT $3
    FOR UPDATE OF r SKIP LOCKED
),
moved AS (
    DELETE FROM runs AS r USING picked WHERE r.id = picked.id RETURNING r.*
),
moved_attempts AS (
    DELETE FROM attempts AS a USING moved AS m WHERE a.run_id = m.id
    RETURNING a.*, m.finished_at AS run_finished_at
),
runs_in AS (
    INSERT INTO run_history SELECT * FROM moved
),
attempts_in AS (
    INSERT INTO attempt_history ({_ATTEMPT_COLUMNS}, run_finished_at)
    SELECT {_ATTEMPT_COLUMNS}, run_finished_at FROM moved_attempts
)
SELECT count(*) FROM moved"""

# Bring archived runs back into runs, with their ids and attempts: a replay of a dead run
# or a retry of a pipeline run's task makes them live again. {which} selects them from
# run_history (aliased h).
_RESTORE = f"""
WITH back AS (
    DELETE FROM run_history AS h WHERE {{which}} RETURNING h.*
),
back_attempts AS (
    DELETE FROM attempt_history AS a USING back AS b
    WHERE a.run_id = b.id AND a.run_finished_at = b.finished_at
    RETURNING {", ".join(f"a.{c.strip()}" for c in _ATTEMPT_COLUMNS.split(","))}
),
runs_in AS (
    INSERT INTO runs OVERRIDING SYSTEM VALUE SELECT * FROM back RETURNING id
),
attempts_in AS (
    INSERT INTO attempts OVERRIDING SYSTEM VALUE SELECT * FROM back_attempts
)
SELECT array(SELECT id FROM runs_in ORDER BY id) AS ids"""

# Params: $1 tenant, $2 run ids. Dead runs only: what a replay makes live again.
RESTORE_DEAD = _RESTORE.format(
    which="h.tenant_id = $1 AND h.id = ANY($2::bigint[]) AND h.state = 'dead'"
)
# Params: $1 pipeline run id: every task run of it, for a retry of one of its tasks.
RESTORE_PIPELINE_RUN = _RESTORE.format(which="h.pipeline_run_id = $1")

# Params: $1 cutoff, $2 batch: the default partitions hold what finished before the first
# partition; retention deletes their old rows (attempts go by their run's finish time).
DELETE_DEFAULT = f"""
WITH doomed AS (
    SELECT id, finished_at FROM run_history_default
    WHERE finished_at < $1 AND state IN {FINISHED_STATES}
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM run_history_default AS h USING doomed WHERE h.id = doomed.id RETURNING h.id
),
gone_attempts AS (
    DELETE FROM attempt_history_default AS a USING doomed
    WHERE a.run_id = doomed.id AND a.run_finished_at = doomed.finished_at
)
SELECT count(*) FROM gone"""


@dataclass(frozen=True, slots=True)
class Partition:
    """One partition pair: run_history's and attempt_history's, of the same bounds."""

    lower: datetime
    upper: datetime

    @property
    def suffix(self) -> str:
        return f"p{self.lower.strftime(_STAMP)}_{self.upper.strftime(_STAMP)}"


def _parse(stamp: str) -> datetime:
    return datetime.strptime(stamp, _STAMP).replace(tzinfo=UTC)


async def partitions(conn: Connection, table: str = "run_history") -> list[Partition]:
    """The partitions of ``table``, oldest first (not the default one)."""
    found = []
    for row in await conn.fetch(_PARTITIONS, table):
        match = _NAME.match(row["relname"])
        if match is not None:
            found.append(Partition(_parse(match[1]), _parse(match[2])))
    return sorted(found, key=lambda p: p.lower)


def _floor(instant: datetime, width: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    seconds = int((instant - epoch).total_seconds())
    step = max(1, int(width.total_seconds()))
    return epoch + timedelta(seconds=seconds - seconds % step)


async def ensure_partitions(
    conn: Connection, *, now: datetime, width: timedelta, ahead: int
) -> datetime | None:
    """Create the partitions of the current period and the ``ahead`` next ones that are
    missing; return the upper bound of the newest (None: none could be created yet, its
    locks were busy). Partitions only ever extend forward from the newest one, contiguous
    (a gap left by a maintenance outage is filled): the default partitions keep only
    what finished before the first partition, so creating one never finds rows of its
    range there."""
    if width < timedelta(seconds=1):
        raise ValueError(f"a history partition must span at least a second, not {width}")
    width = timedelta(seconds=round(width.total_seconds()))  # bounds named to the second
    horizon = _floor(now, width) + width * (ahead + 1)
    uppers = []
    for table, column in _HISTORY:
        upper = await _extend(conn, table, column, now=now, width=width, horizon=horizon)
        if upper is None:
            return None
        uppers.append(upper)
    # Rows move only into a range both tables have (a pass may have extended one of them
    # and not yet the other).
    return min(uppers)


async def _extend(
    conn: Connection, table: str, column: str, *, now: datetime, width: timedelta, horizon: datetime
) -> datetime | None:
    """``table``'s partitions up to ``horizon``; the upper bound of its newest."""
    existing = await partitions(conn, table)
    if existing and existing[-1].upper >= horizon:
        return existing[-1].upper
    try:
        # One table a transaction, its parent locked first (LOCK TABLE takes the parent,
        # then its partitions: the order every read takes them in). Creating a partition
        # locks the parent exclusively; holding one table's locks while waiting for the
        # other's, or taking a partition's before its parent's, deadlocked with reads of
        # all_runs (found in CI): a read now waits for this, a moment, and never fails.
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", PARTITION_LOCK)
            await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            await conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            existing = await partitions(conn, table)  # another pass may have made them
            lower = existing[-1].upper if existing else _floor(now, width)
            if not existing:
                await _bound_default(conn, table, column, lower)
            while lower < horizon:
                made = Partition(lower, lower + width)
                bounds = f"FROM ('{made.lower.isoformat()}') TO ('{made.upper.isoformat()}')"
                await conn.execute(
                    f"CREATE TABLE {table}_{made.suffix} PARTITION OF {table} FOR VALUES {bounds}"
                )
                lower = made.upper
    except asyncpg.LockNotAvailableError:
        existing = await partitions(conn, table)
        return existing[-1].upper if existing else None
    return lower


async def _bound_default(conn: Connection, table: str, column: str, first: datetime) -> None:
    """Before the first partition: the default partition will hold only what finished
    before ``first``, and say so in a CHECK. Creating a partition must otherwise scan the
    default partition, under an exclusive lock, for rows of its range; the CHECK proves
    there are none. It is empty now (nothing moves before a partition exists), so
    validating it reads nothing."""
    constraint = f"{table}_default_before_partitions"
    await conn.execute(
        f"ALTER TABLE {table}_default DROP CONSTRAINT IF EXISTS {constraint},"
        f" ADD CONSTRAINT {constraint} CHECK ({column} < '{first.isoformat()}')"
    )


async def archive(
    conn: Connection,
    *,
    now: datetime,
    settle: timedelta,
    width: timedelta,
    ahead: int,
    limit: int,
) -> int:
    """Create the partitions ahead, then move one batch of runs that finished before
    ``now - settle`` (and whose partition exists) with their attempts to history;
    return how many runs moved."""
    upper = await ensure_partitions(conn, now=now, width=width, ahead=ahead)
    if upper is None:
        return 0
    moved = await conn.fetchval(ARCHIVE, now - settle, upper, limit)
    return int(moved)


async def drop_partitions(conn: Connection, *, before: datetime) -> list[Partition]:
    """Drop every partition pair whose upper bound is at or before ``before``: retention
    is granular to the partition width (a run is forgotten up to a width after the
    retention passed). A pair whose locks are busy is dropped by a later pass."""
    dropped = []
    for part in await partitions(conn):
        if part.upper > before:
            break
        try:
            # Attempts first (a run is never in history without them), one table a
            # transaction, each parent locked before its partitions (see _extend).
            for table in ("attempt_history", "run_history"):
                async with conn.transaction():
                    await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                    await conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
                    await conn.execute(f"DROP TABLE IF EXISTS {table}_{part.suffix}")
        except asyncpg.LockNotAvailableError:
            break
        dropped.append(part)
    return dropped


async def restore_dead(conn: Connection, tenant_id: str, run_ids: Sequence[int]) -> list[int]:
    """Bring the tenant's archived dead runs among ``run_ids`` back into runs."""
    return list(await conn.fetchval(RESTORE_DEAD, tenant_id, list(run_ids)))


async def restore_pipeline_run(conn: Connection, pipeline_run_id: str) -> list[int]:
    """Bring every archived task run of a pipeline run back into runs."""
    return list(await conn.fetchval(RESTORE_PIPELINE_RUN, pipeline_run_id))


async def delete_default(conn: Connection, *, before: datetime, limit: int) -> int:
    """Delete one batch of the default partitions' runs (and attempts) finished before
    ``before``; return how many runs."""
    return int(await conn.fetchval(DELETE_DEFAULT, before, limit))
