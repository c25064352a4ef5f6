"""The embedded store: a SQLite file in WAL mode, zero services to run."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cronwheel.core import lifecycle
from cronwheel.core.model import (
    JSON,
    REASON_OVERLAP_SKIP,
    REASON_REPLANNED,
    ApiKey,
    Attempt,
    AuditEntry,
    Job,
    JobKey,
    JobOrder,
    JobState,
    LastOutcome,
    LastRun,
    NewRun,
    Notification,
    NotificationState,
    Overlap,
    Run,
    RunState,
    ShardGuard,
    ShardLease,
    StoredResponse,
    Tenant,
    WorkerInfo,
    id_prefix_range,
)
from cronwheel.core.pipelines.model import Pipeline, PipelineRun, PipelineRunStart, PipelineVersion
from cronwheel.core.pipelines.tasks import resealed_definition, resealed_spec
from cronwheel.errors import Conflict, NotFound, StaleVersion, StoreUnavailable
from cronwheel.store import _auditing
from cronwheel.store._guard import guarded
from cronwheel.store.base import (
    PRIORITY_AGING_SECONDS,
    Activity,
    AttemptBucket,
    Capabilities,
    Claim,
    Completion,
    DeadRun,
    GaugeReading,
    HeartbeatResult,
    JobAdvance,
    JobSecrets,
    MaterializeResult,
    NotificationResult,
    PoolStatus,
    Release,
    ReleaseResult,
    Replication,
    RescueResult,
    RunReport,
    Start,
    Store,
    TokenTake,
    Vacuum,
    check_enqueue_target,
)
from cronwheel.store.sqlite import _admin as admin
from cronwheel.store.sqlite import _audit as audit
from cronwheel.store.sqlite import _fair, _gauges, _shards
from cronwheel.store.sqlite import _migrate as schema
from cronwheel.store.sqlite import _ops as ops
from cronwheel.store.sqlite import _pipeline_runs as pipeline_runs
from cronwheel.store.sqlite import _pipelines as pipelines
from cronwheel.store.sqlite import _rows as rows
from cronwheel.store.sqlite import _status as status
from cronwheel.store.sqlite._conn import Connection
from cronwheel.store.sqlite._wakeups import Wakeups

# One probe of runs_job_finished per job (the correlated subquery), whatever their number.
LAST_RUNS = (
    "SELECT runs.* FROM json_each(?) AS j JOIN runs ON runs.id = (SELECT r.id FROM runs AS r"
    " WHERE r.job_id = j.value AND r.finished_at IS NOT NULL"
    " ORDER BY r.finished_at DESC, r.id DESC LIMIT 1)"
    " WHERE +runs.tenant_id = ?"  # + : the run is found by id, never by a scan of its tenant
)

# A job's last outcome as a condition of a job listing: the same one probe of
# runs_job_finished per job examined as LAST_RUNS, never a scan of the runs.
LAST_OUTCOME_IS = (
    "(SELECT r.state FROM runs AS r WHERE r.job_id = jobs.id AND r.finished_at IS NOT NULL"
    " ORDER BY r.finished_at DESC, r.id DESC LIMIT 1) = ?"
)
NO_FINISHED_RUN = (
    "NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.job_id = jobs.id AND r.finished_at IS NOT NULL)"
)


PREFIX_SORT_LIMIT = 10_000
"""Names that start with a prefix, at most, that a page in another order than by name
reads from the name index and sorts; with more, it walks its own order instead, where
one row in fewer than N / 10,000 matches (bench/atrest.py: SQLite has no statistics to
choose by, and either way alone is linear in the number of jobs for some prefix)."""
NAME_RANGE = "name >= ? AND name < ?"


def name_range(prefix: str) -> tuple[str, str] | None:
    """The names that start with ``prefix`` as a half-open range: in BINARY order (UTF-8
    bytes, i.e. code points) they are those from the prefix to the prefix whose last code
    point is one more (the last code points that cannot be raised are dropped); None if
    none can (a prefix of U+10FFFF only)."""
    stem = prefix.rstrip("\U0010ffff")
    if not stem:
        return None
    code = ord(stem[-1]) + 1
    if 0xD800 <= code <= 0xDFFF:  # surrogates are not text: the next code point is
        code = 0xE000
    return prefix, stem[:-1] + chr(code)


def few_names(c: sqlite3.Connection, tenant_id: str, prefix: str) -> bool:
    """Whether fewer than :data:`PREFIX_SORT_LIMIT` of the tenant's names start with
    ``prefix``: counted in the name index, no further than that."""
    bounds = name_range(prefix)
    if bounds is None:
        return False
    low, high = bounds
    found: int = c.execute(
        "SELECT count(*) FROM (SELECT 1 FROM jobs INDEXED BY jobs_tenant_name_id"
        f" WHERE tenant_id = ? AND {NAME_RANGE} LIMIT ?)",
        (tenant_id, low, high, PREFIX_SORT_LIMIT),
    ).fetchone()[0]
    return found < PREFIX_SORT_LIMIT


NEVER_US = 2**63 - 1
"""Where a job that will not fire (not active, or without a next fire time) sorts in the
next-fire order: after every instant (the largest microsecond count SQLite holds)."""
JOB_ORDER_COLUMN: dict[str, str | None] = {
    "created": None,
    "name": "name",
    "next_fire": "next_fire_sort",
}
"""What each :class:`JobOrder` sorts by before the id: columns of the indexes of
migration 0009 (``next_fire_sort`` is a generated column: NEVER_US for a job that will
not fire)."""


def jobs_query(
    tenant_id: str,
    *,
    state: JobState | None = None,
    pool: str | None = None,
    name_prefix: str | None = None,
    name: str | None = None,
    id_prefix: str | None = None,
    schedule_kind: str | None = None,
    last_outcome: LastOutcome | None = None,
    order: JobOrder = JobOrder.CREATED,
    after: JobKey | None = None,
    limit: int = 100,
    prefix_range: bool = False,
) -> tuple[str, list[Any]]:
    """The statement of :meth:`SqliteStore.list_jobs` and its parameters (a function of
    its own, so a test can ask SQLite for its plan). ``prefix_range``: search
    ``name_prefix`` as a range of the name index too (see :func:`few_names`); the
    caller checks that it has one (:func:`name_range`)."""
    where: list[str] = ["tenant_id = ?"]
    params: list[Any] = [tenant_id]
    if state is not None:
        where.append("state = ?")
        params.append(state.value)
        if state is not JobState.ACTIVE:
            # jobs_tenant_state_id's condition (0017) word for word: SQLite uses a partial
            # index only for a query that repeats it.
            where.append("state <> 'active'")
    if pool is not None:
        where.append("pool = ?")
        params.append(pool)
    if name_prefix is not None:
        # substr, not LIKE: a prefix with % or _ must match literally.
        where.append("substr(name, 1, ?) = ?")
        params.extend([len(name_prefix), name_prefix])
        bounds = name_range(name_prefix) if prefix_range else None
        if bounds is not None:
            where.append(NAME_RANGE)
            params.extend(bounds)
    if name is not None:
        where.append("name = ?")
        params.append(name)
    if id_prefix is not None:
        where.append("id BETWEEN ? AND ?")
        params.extend(id_prefix_range(id_prefix))
    if schedule_kind is not None:
        where.append("json_extract(schedule, '$.kind') = ?")
        params.append(schedule_kind)
    if last_outcome is LastOutcome.NONE:
        where.append(NO_FINISHED_RUN)
    elif last_outcome is not None:
        where.append(LAST_OUTCOME_IS)
        params.append(last_outcome.value)
    # Each order is the index it walks (0009_job_orders.sql): the cursor's row
    # comparison is a search of the index on its columns, so SQLite walks it from the
    # cursor on and never sorts the tenant's jobs.
    column = JOB_ORDER_COLUMN[order.sort_key]
    direction = " DESC" if order.descending else ""
    if after is not None:
        order.check(after)
        compare = "<" if order.descending else ">"
        if column is None:
            where.append(f"id {compare} ?")
            params.append(after.id)
        else:
            bound: Any = after.value
            if isinstance(bound, datetime):
                bound = rows.us(bound)
            elif bound is None:  # the next-fire order: a job that has none
                bound = NEVER_US
            where.append(f"({column}, id) {compare} (?, ?)")
            params.extend([bound, after.id])
    by = f"id{direction}" if column is None else f"{column}{direction}, id{direction}"
    sql = f"SELECT * FROM jobs WHERE {' AND '.join(where)} ORDER BY {by} LIMIT ?"
    return sql, [*params, limit]


HISTORY_BATCH = 500
"""Rows one write of retention deletes at most: a few milliseconds of the single writer."""


class SqliteStore(Store):
    """The embedded store. One instance per process; several processes may share a file."""

    capabilities = Capabilities(cross_process_wakeups=False, skip_locked=False)

    def __init__(self, path: str | Path) -> None:
        self._db = Connection(path)
        self._wakeups = Wakeups()

    @classmethod
    async def open(cls, path: str | Path) -> SqliteStore:
        store = cls(path)
        try:
            await store._db.open()
        except sqlite3.Error as exc:
            await store._db.close()
            raise StoreUnavailable(
                f"cannot open the SQLite file {path}: {exc} (check that it is a cronwheel"
                " database and that this user may read and write it and its folder)"
            ) from None
        return store

    @property
    def path(self) -> str:
        return self._db.path

    # -- setup ---------------------------------------------------------------------
    async def migrate(self, *, target: int | None = None) -> list[int]:
        return await self._db.write(lambda c: schema.migrate(c, target))

    async def schema_version(self) -> int:
        return await self._db.read(schema.schema_version)

    async def close(self) -> None:
        await self._db.close()

    async def now(self) -> datetime:
        """This machine's clock, at full resolution. A SQLite store is always local (WAL
        needs shared memory, so every process on the file runs here), so its clock is
        ours; SQLite's own ``julianday('now')`` has only millisecond resolution, and a
        worker that set its offset from it fired runs up to a millisecond early."""
        return datetime.now(UTC)

    async def truncate_all_for_tests(self) -> None:
        """Empty every table but the migrations, keeping the default tenant (as the
        migration created it, like the PostgreSQL store's)."""

        def fn(c: sqlite3.Connection) -> None:
            for table in (
                "pipeline_versions",
                "pipelines",
                "notifications",
                "attempts",
                "audit_log",
                "runs",
                "jobs",
                "shard_leases",
                "workers",
                "api_keys",
                "idempotency_keys",
            ):
                c.execute(f"DELETE FROM {table}")
            c.execute("DELETE FROM tenants WHERE id <> 'default'")
            # A test may have renamed the default tenant or given it quotas.
            c.execute(
                "UPDATE tenants SET name = 'default', max_jobs = NULL,"
                " max_creates_per_second = NULL, create_tokens = NULL,"
                " create_tokens_at = NULL, claim_weight = 1, max_running = NULL"
                " WHERE id = 'default'"
            )

        await self._db.write(fn)

    # -- tenants ---------------------------------------------------------------------
    async def ensure_tenant(self, tenant_id: str, name: str, *, now: datetime) -> None:
        await self._db.write(
            lambda c: c.execute(
                "INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO NOTHING",
                (tenant_id, name, rows.us(now)),
            )
        )

    async def create_tenant(self, tenant: Tenant, *, actor: str | None = None) -> None:
        def fn(c: sqlite3.Connection) -> None:
            admin.create_tenant(c, tenant)
            if actor is not None:
                at = rows.us(tenant.created_at)
                details = _auditing.tenant_details(tenant)
                ops.audit(c, tenant.id, "tenant", tenant.id, "created", actor, at, details)

        await self._db.write(fn)

    async def get_tenant(self, tenant_id: str) -> Tenant | None:
        return await self._db.read(lambda c: admin.get_tenant(c, tenant_id))

    async def list_tenants(self) -> list[Tenant]:
        return await self._db.read(admin.list_tenants)

    async def update_tenant(
        self, tenant: Tenant, *, actor: str | None = None, now: datetime | None = None
    ) -> Tenant:
        def fn(c: sqlite3.Connection) -> Tenant:
            updated = admin.update_tenant(c, tenant)
            if actor is not None and now is not None:
                details = _auditing.tenant_details(updated)
                ops.audit(
                    c, tenant.id, "tenant", tenant.id, "updated", actor, rows.us(now), details
                )
            return updated

        return await self._db.write(fn)

    async def count_live_jobs(self, tenant_id: str, *, limit: int | None = None) -> int:
        return await self._db.read(lambda c: admin.count_live_jobs(c, tenant_id, limit))

    async def take_create_tokens(self, tenant_id: str, count: int, *, now: datetime) -> TokenTake:
        return await self._db.write(lambda c: admin.take_create_tokens(c, tenant_id, count, now))

    # -- API keys ----------------------------------------------------------------------
    async def create_api_key(self, key: ApiKey, *, actor: str | None = None) -> None:
        def fn(c: sqlite3.Connection) -> None:
            admin.create_api_key(c, key)
            if actor is not None:
                at, details = rows.us(key.created_at), _auditing.key_details(key)
                ops.audit(c, key.tenant_id, "key", key.id, "created", actor, at, details)

        await self._db.write(fn)

    async def find_api_key(self, key_hash: str) -> ApiKey | None:
        return await self._db.read(lambda c: admin.find_api_key(c, key_hash))

    async def list_api_keys(self, tenant_id: str) -> list[ApiKey]:
        return await self._db.read(lambda c: admin.list_api_keys(c, tenant_id))

    async def revoke_api_key(
        self, tenant_id: str, key_id: str, *, now: datetime, actor: str | None = None
    ) -> ApiKey:
        def fn(c: sqlite3.Connection) -> ApiKey:
            key = admin.revoke_api_key(c, tenant_id, key_id, now)
            # Revoked by this call (not before): the revocation instant is ours.
            if actor is not None and key.revoked_at == now:
                at, details = rows.us(now), _auditing.key_details(key)
                ops.audit(c, tenant_id, "key", key_id, "revoked", actor, at, details)
            return key

        return await self._db.write(fn)

    # -- API idempotency -----------------------------------------------------------------
    async def save_response(self, response: StoredResponse) -> StoredResponse:
        return await self._db.write(lambda c: admin.save_response(c, response))

    async def get_response(self, tenant_id: str, key: str) -> StoredResponse | None:
        return await self._db.read(lambda c: admin.get_response(c, tenant_id, key))

    async def delete_responses(self, *, before: datetime) -> int:
        return await self._db.write(lambda c: admin.delete_responses(c, before))

    # -- worker registry -----------------------------------------------------------------
    async def register_worker(self, worker: WorkerInfo) -> None:
        await self._db.write(lambda c: admin.register_worker(c, worker))

    async def list_workers(self, tenant_id: str, *, seen_since: datetime) -> list[WorkerInfo]:
        return await self._db.read(lambda c: admin.list_workers(c, tenant_id, seen_since))

    async def served_pools(self, tenant_id: str, *, seen_since: datetime) -> set[str]:
        return await self._db.read(lambda c: admin.served_pools(c, tenant_id, seen_since))

    async def remove_worker(self, worker_id: str) -> None:
        await self._db.write(lambda c: admin.remove_worker(c, worker_id))

    # -- jobs ------------------------------------------------------------------------
    async def create_jobs(
        self, jobs: Sequence[Job], runs: Sequence[NewRun] = (), *, actor: str = "api"
    ) -> None:
        def fn(c: sqlite3.Connection) -> list[str]:
            admin.check_max_jobs(c, jobs)
            ops.check_parents(c, jobs, runs)
            ops.insert_jobs(c, jobs, actor)
            now = rows.us(jobs[0].created_at) if jobs else 0
            return ops.insert_runs(c, runs, now)

        pools = await self._db.write(fn)
        self._wakeups.notify_pools(pools)

    async def get_job(self, tenant_id: str, job_id: str) -> Job | None:
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT * FROM jobs WHERE tenant_id = ? AND id = ?", (tenant_id, job_id)
            ).fetchone()
        )
        return None if row is None else rows.job(row)

    async def last_runs(self, tenant_id: str, job_ids: Sequence[str]) -> dict[str, LastRun]:
        if not job_ids:
            return {}
        ids = json.dumps(list(job_ids))
        found = await self._db.read(lambda c: c.execute(LAST_RUNS, (ids, tenant_id)).fetchall())
        return {r["job_id"]: rows.last_run(r) for r in found}

    async def list_jobs(
        self,
        tenant_id: str,
        *,
        state: JobState | None = None,
        pool: str | None = None,
        name_prefix: str | None = None,
        name: str | None = None,
        id_prefix: str | None = None,
        schedule_kind: str | None = None,
        last_outcome: LastOutcome | None = None,
        order: JobOrder = JobOrder.CREATED,
        after: JobKey | None = None,
        limit: int = 100,
    ) -> list[Job]:
        def read(c: sqlite3.Connection) -> list[sqlite3.Row]:
            # A name prefix is a range of the name index: by name, where the page walks.
            # In another order SQLite (no statistics) would walk that order's index with
            # substr() as a filter, every job for a prefix that matches few; told the
            # range, it would sort every match, all the jobs for one that matches most.
            # Counting the matches first, no further than PREFIX_SORT_LIMIT, tells which
            # of the two is short.
            by_range = (
                name_prefix is not None
                and name_range(name_prefix) is not None
                and (order.sort_key == "name" or few_names(c, tenant_id, name_prefix))
            )
            sql, params = jobs_query(
                tenant_id,
                state=state,
                pool=pool,
                name_prefix=name_prefix,
                name=name,
                id_prefix=id_prefix,
                schedule_kind=schedule_kind,
                last_outcome=last_outcome,
                order=order,
                after=after,
                limit=limit,
                prefix_range=by_range,
            )
            found: list[sqlite3.Row] = c.execute(sql, params).fetchall()
            return found

        return [rows.job(r) for r in await self._db.read(read)]

    async def update_job(
        self, job: Job, *, expected_version: int, actor: str, replan: bool = False
    ) -> Job:
        params = rows.job_params(job) | {
            "version": expected_version + 1,
            "expected": expected_version,
        }

        def fn(c: sqlite3.Connection) -> Job:
            current = ops.job_state(c, job.tenant_id, job.id)
            if current["version"] != expected_version:
                raise StaleVersion(expected_version, current["version"])
            sets = ", ".join(f"{k} = :{k}" for k in params if k not in ops.IMMUTABLE_JOB_COLUMNS)
            try:
                c.execute(f"UPDATE jobs SET {sets} WHERE id = :id AND version = :expected", params)
            except sqlite3.IntegrityError as exc:
                raise ops.name_conflict(c, [job]) from exc
            if replan:
                c.execute(
                    "UPDATE runs SET state = 'cancelled', finished_at = ?, reason = ?"
                    " WHERE job_id = ? AND state = 'pending' AND attempt = 0 AND job_version < ?",
                    (params["updated_at"], REASON_REPLANNED, job.id, expected_version + 1),
                )
            details = {"version": expected_version + 1}
            ops.audit(
                c, job.tenant_id, "job", job.id, "updated", actor, params["updated_at"], details
            )
            return rows.job(c.execute("SELECT * FROM jobs WHERE id = ?", (job.id,)).fetchone())

        return await self._db.write(fn)

    async def set_job_state(
        self,
        tenant_id: str,
        job_id: str,
        state: JobState,
        *,
        next_fire_at: datetime | None,
        now: datetime,
        actor: str,
        runs: Sequence[NewRun] = (),
    ) -> Job:
        at = rows.us(now)

        def fn(c: sqlite3.Connection) -> Job:
            current = ops.job_state(c, tenant_id, job_id)
            before = JobState(current["state"])
            if before is state:  # nothing changes: no version bump, no audit row
                return rows.job(c.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())
            if before is JobState.CANCELLED:
                raise Conflict("state", "the job is cancelled; create a new job instead")
            c.execute(
                "UPDATE jobs SET state = ?, next_fire_at = ?, version = version + 1,"
                " updated_at = ? WHERE id = ?",
                (state.value, rows.us_or_none(next_fire_at), at, job_id),
            )
            if state is JobState.CANCELLED:
                c.execute(
                    "UPDATE runs SET state = 'cancelled', finished_at = ?,"
                    " reason = 'job cancelled' WHERE job_id = ? AND state = 'pending'",
                    (at, job_id),
                )
            ops.insert_runs(c, runs, at)
            action = ops.state_action(before, state)
            details = {"from": before.value, "to": state.value}
            ops.audit(c, tenant_id, "job", job_id, action, actor, at, details)
            return rows.job(c.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

        return await self._db.write(fn)

    async def enqueue_runs(
        self,
        template: NewRun,
        payloads: Sequence[str | None],
        keys: Sequence[str | None] | None = None,
    ) -> list[int]:
        if not payloads:
            return []
        t = template
        at = rows.us(t.available_at)
        shared = (
            *(t.tenant_id, t.job_id, t.pool, int(t.priority), t.max_attempts, t.job_version),
            *(t.reason, t.overlap.value, at, at, t.concurrency_limit),
        )
        run_keys = [t.concurrency_key] * len(payloads) if keys is None else keys

        def fn(c: sqlite3.Connection) -> list[int]:
            job = ops.job_state(c, t.tenant_id, t.job_id)
            check_enqueue_target(job["state"], job["version"], t)
            # The write lock is held: no other enqueue can take these instants.
            (latest,) = c.execute(
                "SELECT max(scheduled_for) FROM runs WHERE job_id = ?", (t.job_id,)
            ).fetchone()
            first = rows.us(t.scheduled_for)
            first = first if latest is None else max(first, latest + 1)
            runs = (
                (*shared, first + i, payload, key)
                for i, (payload, key) in enumerate(zip(payloads, run_keys, strict=True))
            )
            c.executemany(ops.ENQUEUE_INSERT, runs)
            found = c.execute(
                "SELECT id FROM runs WHERE job_id = ? AND scheduled_for >= ?"
                " ORDER BY scheduled_for",
                (t.job_id, first),
            )
            return [r[0] for r in found]

        ids = await self._db.write(fn)
        self._wakeups.notify_pools([t.pool])
        return ids

    # -- pipelines ---------------------------------------------------------------------
    async def create_pipeline(self, pipeline: Pipeline, *, actor: str) -> None:
        await self._db.write(lambda c: pipelines.create(c, pipeline, actor))

    async def get_pipeline(
        self, tenant_id: str, pipeline_id: str, *, version: int | None = None
    ) -> Pipeline | None:
        return await self._db.read(lambda c: pipelines.get(c, tenant_id, pipeline_id, version))

    async def list_pipelines(
        self,
        tenant_id: str,
        *,
        name: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> list[Pipeline]:
        return await self._db.read(lambda c: pipelines.list_live(c, tenant_id, name, after, limit))

    async def update_pipeline(
        self,
        tenant_id: str,
        pipeline_id: str,
        *,
        definition: Mapping[str, JSON],
        fingerprint: str,
        expected_version: int,
        now: datetime,
        actor: str,
    ) -> Pipeline:
        return await self._db.write(
            lambda c: pipelines.update(
                c, tenant_id, pipeline_id, definition, fingerprint, expected_version, now, actor
            )
        )

    async def delete_pipeline(
        self, tenant_id: str, pipeline_id: str, *, now: datetime, actor: str
    ) -> Pipeline:
        return await self._db.write(
            lambda c: pipelines.delete(c, tenant_id, pipeline_id, now, actor)
        )

    async def list_pipeline_versions(
        self, tenant_id: str, pipeline_id: str, *, before: int | None = None, limit: int = 100
    ) -> list[PipelineVersion]:
        return await self._db.read(
            lambda c: pipelines.versions(c, tenant_id, pipeline_id, before, limit)
        )

    # -- pipeline runs -----------------------------------------------------------------
    async def start_pipeline_run(self, start: PipelineRunStart) -> PipelineRun:
        def fn(c: sqlite3.Connection) -> tuple[PipelineRun | None, list[str]]:
            found, pools = pipeline_runs.start(c, start)
            return pipeline_runs.get(c, start.tenant_id, found), pools

        got, pools = await self._db.write(fn)
        self._wakeups.notify_pools(pools)
        assert got is not None
        return got

    async def get_pipeline_run(self, tenant_id: str, pipeline_run_id: str) -> PipelineRun | None:
        return await self._db.read(lambda c: pipeline_runs.get(c, tenant_id, pipeline_run_id))

    async def list_pipeline_runs(
        self,
        tenant_id: str,
        *,
        pipeline_id: str | None = None,
        state: str | None = None,
        before: str | None = None,
        limit: int = 100,
    ) -> list[PipelineRun]:
        return await self._db.read(
            lambda c: pipeline_runs.list_runs(c, tenant_id, pipeline_id, state, before, limit)
        )

    async def cancel_pipeline_run(
        self, tenant_id: str, pipeline_run_id: str, *, now: datetime, actor: str
    ) -> PipelineRun:
        def fn(c: sqlite3.Connection) -> PipelineRun:
            if not pipeline_runs.cancel(c, tenant_id, pipeline_run_id, rows.us(now)):
                raise NotFound("pipeline_run", pipeline_run_id)
            got = pipeline_runs.get(c, tenant_id, pipeline_run_id)
            assert got is not None
            return got

        return await self._db.write(fn)

    async def retry_pipeline_task(
        self, tenant_id: str, pipeline_run_id: str, task: str, *, now: datetime, actor: str
    ) -> PipelineRun:
        def fn(c: sqlite3.Connection) -> tuple[PipelineRun, list[str]]:
            why, pools = pipeline_runs.retry_task(
                c, tenant_id, pipeline_run_id, task, rows.us(now), actor
            )
            if why == "not_found":
                raise NotFound("pipeline_run", pipeline_run_id)
            if why == "not_found_task":
                raise NotFound("task", task)
            if why is not None:
                raise Conflict("task", why)
            got = pipeline_runs.get(c, tenant_id, pipeline_run_id)
            assert got is not None
            return got, pools

        got, pools = await self._db.write(fn)
        self._wakeups.notify_pools(pools)
        return got

    async def reseal_pipelines(
        self, reseal: Callable[[str, Mapping[str, Any]], Mapping[str, Any] | None]
    ) -> tuple[int, int]:
        def fn(c: sqlite3.Connection) -> tuple[int, int]:
            versions = runs = 0
            for row in c.execute(
                "SELECT v.pipeline_id, v.version, p.tenant_id, v.definition"
                " FROM pipeline_versions AS v JOIN pipelines AS p ON p.id = v.pipeline_id"
            ).fetchall():
                definition = resealed_definition(
                    row["tenant_id"], json.loads(row["definition"]), reseal
                )
                if definition is not None:
                    c.execute(
                        "UPDATE pipeline_versions SET definition = ?"
                        " WHERE pipeline_id = ? AND version = ?",
                        (json.dumps(definition), row["pipeline_id"], row["version"]),
                    )
                    versions += 1
            for row in c.execute(
                "SELECT id, tenant_id, task_spec FROM runs WHERE pipeline_run_id IS NOT NULL"
                " AND state IN ('pending', 'running') AND task_spec IS NOT NULL"
            ).fetchall():
                spec = resealed_spec(row["tenant_id"], json.loads(row["task_spec"]), reseal)
                if spec is not None:
                    c.execute(
                        "UPDATE runs SET task_spec = ? WHERE id = ?", (json.dumps(spec), row["id"])
                    )
                    runs += 1
            return versions, runs

        return await self._db.write(fn)

    async def advance_pipelines(self, *, now: datetime, limit: int = 100) -> int:
        def fn(c: sqlite3.Connection) -> tuple[int, list[str]]:
            found = [r[0] for r in c.execute(pipeline_runs.STALLED, (limit,))]
            return len(found), pipeline_runs.advance_ended(c, found, rows.us(now))

        count, pools = await self._db.write(fn)
        self._wakeups.notify_pools(pools)
        return count

    # -- scheduler -------------------------------------------------------------------
    async def fetch_due_jobs(
        self,
        until: datetime,
        *,
        limit: int,
        shards: Sequence[int] | None = None,
        shard_count: int = 1,
    ) -> list[Job]:
        where, params = _due(until, shards, shard_count)
        # Round robin over tenants: each tenant's earliest job, then each one's second…
        # The turns are numbered over the sort columns alone and only the chosen rows are
        # read whole: a herd's every due job goes through the sort (50,000 of them: 101
        # against 159 ms with every column).
        sql = (
            "SELECT j.* FROM (SELECT id, next_fire_at, row_number() OVER (PARTITION BY"
            f" tenant_id ORDER BY next_fire_at, id) AS turn FROM jobs WHERE {where}"
            " ORDER BY turn, next_fire_at, id LIMIT ?) AS due JOIN jobs AS j USING (id)"
            " ORDER BY due.turn, due.next_fire_at, due.id"
        )
        found = await self._db.read(lambda c: c.execute(sql, (*params, limit)).fetchall())
        return [rows.job(r) for r in found]

    async def count_due_jobs(
        self,
        until: datetime,
        *,
        limit: int,
        shards: Sequence[int] | None = None,
        shard_count: int = 1,
    ) -> int:
        where, params = _due(until, shards, shard_count)
        # The inner LIMIT stops the walk along jobs_due: a million jobs due cost no more
        # to count than ``limit``.
        sql = f"SELECT count(*) FROM (SELECT 1 FROM jobs WHERE {where} LIMIT ?)"
        row = await self._db.read(lambda c: c.execute(sql, (*params, limit)).fetchone())
        return int(row[0])

    async def materialize_runs(
        self,
        runs: Sequence[NewRun],
        advances: Sequence[JobAdvance],
        *,
        guard: ShardGuard | None = None,
    ) -> MaterializeResult:
        def fn(c: sqlite3.Connection) -> tuple[MaterializeResult, list[str]]:
            now = ops.now_us(c)
            advanced: set[str] = set()
            stale: list[str] = []
            todo_runs, todo_advances = runs, advances
            if guard is not None:
                valid = _shards.valid_shards(c, guard, now)
                todo_runs, todo_advances, stale = guarded(guard, valid, runs, advances)
            # A compare-and-set on the fire time as well as the version: an advance does
            # not change the version, so only this refuses a scheduler that read the job
            # before another advanced it.
            for a in todo_advances:
                cursor = c.execute(
                    "UPDATE jobs SET next_fire_at = ?, last_fire_at = coalesce(?, last_fire_at),"
                    " state = ? WHERE id = ? AND version = ? AND state = 'active'"
                    " AND next_fire_at IS ?",
                    (
                        rows.us_or_none(a.next_fire_at),
                        rows.us_or_none(a.last_fire_at),
                        a.state.value,
                        a.job_id,
                        a.version,
                        rows.us_or_none(a.expected_next_fire_at),
                    ),
                )
                (advanced.add if cursor.rowcount else stale.append)(a.job_id)
            unadvanced = {r.job_id for r in todo_runs} - {a.job_id for a in advances}
            live = ops.active_jobs(c, unadvanced) | advanced
            mine = [r for r in todo_runs if r.job_id in live]
            before = c.total_changes
            pools = ops.insert_runs(c, mine, now)
            inserted = c.total_changes - before
            return MaterializeResult(inserted, len(advanced), stale), pools

        result, pools = await self._db.write(fn)
        self._wakeups.notify_pools(pools)
        return result

    # -- shards ----------------------------------------------------------------------
    async def acquire_shards(
        self, holder: str, shards: Sequence[int], *, now: datetime, ttl_seconds: float
    ) -> list[ShardLease]:
        at, until = rows.us(now), rows.us(now) + round(ttl_seconds * 1_000_000)
        if not shards:
            return []
        return await self._db.write(lambda c: _shards.acquire(c, holder, shards, at, until))

    async def release_shards(self, holder: str, shards: Sequence[int]) -> None:
        if shards:
            await self._db.write(lambda c: _shards.release(c, holder, shards))

    async def read_gauges(self, *, now: datetime, workers_seen_since: datetime) -> GaugeReading:
        return await self._db.read(lambda c: _gauges.read(c, now, workers_seen_since))

    async def list_shard_leases(self) -> list[ShardLease]:
        return await self._db.read(_shards.all_leases)

    # -- pool rate limits -------------------------------------------------------------
    async def set_pool_rate(self, pool: str, per_second: float | None, *, now: datetime) -> None:
        at = rows.us(now)

        def fn(c: sqlite3.Connection) -> None:
            if per_second is None:
                c.execute("DELETE FROM pool_rates WHERE pool = ?", (pool,))
                return
            c.execute(
                "INSERT INTO pool_rates (pool, per_second, tokens, refilled_at, updated_at)"
                " VALUES (?1, ?2, max(?2, 1), ?3, ?3) ON CONFLICT (pool) DO UPDATE"
                " SET per_second = excluded.per_second,"
                " tokens = min(pool_rates.tokens, max(?2, 1)), updated_at = excluded.updated_at",
                (pool, per_second, at),
            )

        await self._db.write(fn)

    async def pool_rates(self) -> dict[str, float]:
        found = await self._db.read(
            lambda c: c.execute("SELECT pool, per_second FROM pool_rates ORDER BY pool").fetchall()
        )
        return {r["pool"]: r["per_second"] for r in found}

    async def take_pool_tokens(self, pool: str, want: int, *, now: datetime) -> int | None:
        at = rows.us(now)

        def fn(c: sqlite3.Connection) -> int | None:
            row = c.execute(
                "SELECT per_second, tokens, refilled_at FROM pool_rates WHERE pool = ?", (pool,)
            ).fetchone()
            if row is None:
                return None
            capacity = max(row["per_second"], 1.0)
            elapsed = max(0, at - row["refilled_at"]) / 1_000_000
            have = min(capacity, row["tokens"] + elapsed * row["per_second"])
            n = want if want < 0 else min(want, math.floor(have))
            c.execute(
                "UPDATE pool_rates SET tokens = ?, refilled_at = max(refilled_at, ?)"
                " WHERE pool = ?",
                (min(capacity, have - n), at, pool),
            )
            return n

        return await self._db.write(fn)

    # -- workers ---------------------------------------------------------------------
    async def claim_runs(
        self,
        worker_id: str,
        pools: Sequence[str],
        *,
        limit: int,
        now: datetime,
        prefetch_until: datetime,
        lease_seconds: float,
        tenant_id: str | None = None,
        priority_aging_seconds: float = PRIORITY_AGING_SECONDS,
        started: bool = True,
        urgent: bool = False,  # one writer at a time: an urgent claim waits as any other
    ) -> Claim:
        now_us, ttl_us = rows.us(now), round(lease_seconds * 1_000_000)
        # The tenant filter is written into the text only when asked for, so the common
        # claim keeps its plan.
        in_pools = f"pool IN ({ops.placeholders(len(pools))})"
        tenant: tuple[str, ...] = ()
        if tenant_id is not None:
            in_pools += " AND tenant_id = ?"
            tenant = (tenant_id,)
        ask = _fair.Ask(
            pools=list(dict.fromkeys(pools)),
            tenant_id=tenant_id,
            limit=limit,
            now=now_us,
            until=rows.us(prefetch_until),
            aging=max(1, round(priority_aging_seconds * 1_000_000)),
        )
        sql = (
            "UPDATE runs SET state = 'running', fence = fence + 1, attempt = attempt + 1,"
            " lease_owner = ?, lease_expires_at = max(available_at, ?) + ?,"
            " started_at = CASE WHEN ? THEN max(available_at, ?) END, cancel_requested = 0"
            " WHERE id IN (SELECT value FROM json_each(?)) RETURNING *"
        )

        def fn(c: sqlite3.Connection) -> Claim:
            skipped = c.execute(
                f"UPDATE runs SET state = 'skipped', reason = ?, finished_at = ? WHERE {in_pools}"
                " AND state = 'pending' AND overlap = 'skip' AND available_at <= ?"
                f" AND {ops.JOB_IS_BUSY.format(run='runs')}"
                " RETURNING tenant_id, id, job_id, scheduled_for, attempt",
                (REASON_OVERLAP_SKIP, now_us, *pools, *tenant, now_us),
            ).fetchall()
            if skipped:
                ops.record_events(
                    c, [(*r, "skipped", REASON_OVERLAP_SKIP, now_us) for r in skipped]
                )
            picked = _fair.picks(c, ask)
            turns = {p.id: turn for turn, p in enumerate(picked)}
            ids = json.dumps(list(turns))
            params = (worker_id, now_us, ttl_us, started, now_us, ids)
            claimed = [rows.run(r) for r in c.execute(sql, params).fetchall()]
            claimed.sort(key=lambda r: turns[r.id])  # the order they were taken in
            ops.replace_running(c, [r for r in claimed if r.overlap is Overlap.REPLACE])
            job_ids = {r.job_id for r in claimed}
            jobs = {
                j["id"]: j
                for j in c.execute(
                    "SELECT id, name, action, payload, retry, timeout_seconds, delivery,"
                    " traceparent FROM jobs"
                    f" WHERE id IN ({ops.placeholders(len(job_ids))})",
                    tuple(job_ids),
                )
            }
            runs = (ops.claimed(r, jobs[r.job_id]) for r in claimed)
            return Claim(runs, overlap_skipped=len(skipped))

        if not pools or limit <= 0:
            return Claim()
        return await self._db.write(fn)

    async def heartbeat(
        self,
        worker_id: str,
        leases: Sequence[tuple[int, int]],
        *,
        now: datetime,
        lease_seconds: float,
        reports: Sequence[RunReport] = (),
    ) -> HeartbeatResult:
        until = rows.us(now) + round(lease_seconds * 1_000_000)

        # One statement for every lease: the (id, fence) pairs travel as one JSON array.
        # Reports ride in the same rows (progress, message, checkpoint), so they are
        # written under the fence of the lease they extend, or not at all.
        params: tuple[object, ...]
        if reports:
            by_run = {r.run_id: r for r in reports}
            batch: list[list[object]] = []
            for run_id, fence in leases:
                report = by_run.get(run_id)
                if report is None:
                    batch.append([run_id, fence])
                else:
                    batch.append(
                        [run_id, fence, report.progress, report.progress_message, report.checkpoint]
                    )
            at = rows.us(now)
            sql, params = ops.HEARTBEAT_WITH_REPORTS, (until, at, at, json.dumps(batch), worker_id)
        else:
            pairs = json.dumps([[run_id, fence] for run_id, fence in leases])
            sql, params = ops.HEARTBEAT, (until, worker_id, pairs)

        def fn(c: sqlite3.Connection) -> HeartbeatResult:
            found = {r[0]: bool(r[1]) for r in c.execute(sql, params)}
            return HeartbeatResult(
                extended=[run_id for run_id, _ in leases if run_id in found],
                lost=[run_id for run_id, _ in leases if run_id not in found],
                cancel_requested=[run_id for run_id, _ in leases if found.get(run_id)],
            )

        return await self._db.write(fn)

    async def mark_started(self, worker_id: str, starts: Sequence[Start]) -> list[int]:
        if not starts:
            return []
        firsts: dict[int, Start] = {}
        for start in starts:  # a run given twice: its first start
            firsts.setdefault(start.run_id, start)
        batch = json.dumps([[s.run_id, s.fence, rows.us(s.started_at)] for s in firsts.values()])

        def fn(c: sqlite3.Connection) -> list[int]:
            marked = {r[0] for r in c.execute(ops.MARK_STARTED, (batch, worker_id))}
            return [run_id for run_id in firsts if run_id in marked]

        return await self._db.write(fn)

    async def complete_runs(self, completions: Sequence[Completion]) -> list[int]:
        def fn(c: sqlite3.Connection) -> tuple[list[int], list[str]]:
            done = ops.complete_many(c, completions) if completions else []
            pools = [pool for d, pool in done if d.state is RunState.PENDING]
            # Pipeline tasks: the tasks an ending satisfied start in this transaction.
            ended = [d for d, _ in done if d.pipeline_run_id is not None and d.state.finished]
            if ended:
                at = rows.us(max(d.finished_at for d in ended))
                ids = [d.pipeline_run_id for d in ended if d.pipeline_run_id is not None]
                pools += pipeline_runs.advance_ended(c, ids, at)
            return [d.run_id for d, _ in done], pools

        accepted, pools = await self._db.write(fn)
        self._wakeups.notify_pools(pools)
        return accepted

    async def release_runs(self, releases: Sequence[Release], *, now: datetime) -> ReleaseResult:
        at = rows.us(now)

        def fn(c: sqlite3.Connection) -> tuple[ReleaseResult, list[str]]:
            result = ReleaseResult(retried=[], dead=[], cancelled=[])
            pools = []
            for release in sorted(releases, key=lambda r: r.run_id):
                done = ops.release_one(c, release, at)
                if done is None:
                    continue
                state, pool = done
                if state is RunState.PENDING:
                    pools.append(pool)
                ops.RESCUED[state](result).append(release.run_id)
            return result, pools

        result, pools = await self._db.write(fn)
        self._wakeups.notify_pools(pools)
        return result

    # -- maintenance -----------------------------------------------------------------
    async def rescue_expired(self, *, now: datetime, limit: int = 1000) -> RescueResult:
        sql = (
            "SELECT * FROM runs WHERE state = 'running' AND lease_expires_at <= ?"
            " ORDER BY lease_expires_at LIMIT ?"
        )
        return await self._rescue(sql, (rows.us(now), limit), now, gone=False)

    async def rescue_runs_of_dead_owner(
        self, owners: Sequence[str], *, now: datetime, limit: int = 1000
    ) -> RescueResult:
        if not owners:
            return RescueResult(retried=[], dead=[], cancelled=[])
        # runs_leases (state = 'running') holds only the runs in flight: a short scan.
        sql = (
            "SELECT * FROM runs WHERE state = 'running'"
            f" AND lease_owner IN ({ops.placeholders(len(owners))})"
            " ORDER BY lease_expires_at LIMIT ?"
        )
        return await self._rescue(sql, (*owners, limit), now, gone=True)

    async def _rescue(
        self, select: str, params: tuple[Any, ...], now: datetime, *, gone: bool
    ) -> RescueResult:
        at = rows.us(now)

        def fn(c: sqlite3.Connection) -> tuple[RescueResult, list[str]]:
            result = RescueResult(retried=[], dead=[], cancelled=[])
            pools = []
            for row in c.execute(select, params).fetchall():
                t = ops.rescue_one(c, row, at, gone=gone)
                if t.unclaim and t.state is RunState.PENDING:
                    result.unstarted.append(row["id"])
                else:
                    ops.RESCUED[t.state](result).append(row["id"])
                if t.state is RunState.PENDING:
                    pools.append(row["pool"])
            return result, pools

        result, pools = await self._db.write(fn)
        self._wakeups.notify_pools(pools)
        return result

    # -- notifications -----------------------------------------------------------------
    async def claim_notifications(
        self, *, now: datetime, limit: int, lease_seconds: float
    ) -> list[Notification]:
        now_us, ttl_us = rows.us(now), round(lease_seconds * 1_000_000)

        def fn(c: sqlite3.Connection) -> list[Notification]:
            found = c.execute(
                "UPDATE notifications SET tries = tries + 1, next_at = ? WHERE id IN"
                " (SELECT id FROM notifications WHERE state = 'pending' AND next_at <= ?"
                " ORDER BY next_at, id LIMIT ?) RETURNING *",
                (now_us + ttl_us, now_us, limit),
            ).fetchall()
            return sorted((rows.notification(r) for r in found), key=lambda n: n.id)

        return await self._db.write(fn)

    async def finish_notifications(
        self, results: Sequence[NotificationResult], *, now: datetime
    ) -> list[int]:
        at = rows.us(now)
        batch = [
            (
                "delivered" if r.delivered else "pending" if r.retry_at else "dead",
                rows.us_or_none(r.retry_at),
                None if r.delivered or r.retry_at else at,
                at if r.delivered else None,
                r.error,
                r.delivered,
                r.id,
                r.tries,
            )
            for r in sorted(results, key=lambda r: r.id)
        ]

        def fn(c: sqlite3.Connection) -> list[int]:
            done = []
            for params in batch:
                found = c.execute(
                    "UPDATE notifications SET state = ?, next_at = coalesce(?, next_at),"
                    " finished_at = coalesce(?, ?), last_error = CASE WHEN ? THEN last_error"
                    " ELSE ? END WHERE id = ? AND tries = ? AND state = 'pending' RETURNING id",
                    (*params[:4], params[5], params[4], params[6], params[7]),
                ).fetchone()
                if found is not None:
                    done.append(found[0])
            return done

        return await self._db.write(fn) if batch else []

    async def list_notifications(
        self,
        tenant_id: str,
        *,
        state: NotificationState | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[Notification]:
        where: list[str] = ["tenant_id = ?"]
        params: list[object] = [tenant_id]
        if state is not None:
            where.append("state = ?")
            params.append(state.value)
        if before_id is not None:
            where.append("id < ?")
            params.append(before_id)
        sql = f"SELECT * FROM notifications WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?"
        found = await self._db.read(lambda c: c.execute(sql, (*params, limit)).fetchall())
        return [rows.notification(r) for r in found]

    async def replay_notifications(
        self, tenant_id: str, ids: Sequence[int], *, now: datetime
    ) -> list[int]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []

        in_ids = f"id IN ({ops.placeholders(len(wanted))})"

        def fn(c: sqlite3.Connection) -> set[int]:
            found = c.execute(
                "UPDATE notifications SET state = 'pending', tries = 0, next_at = ?,"
                f" finished_at = NULL WHERE tenant_id = ? AND {in_ids}"
                " AND state = 'dead' RETURNING id",
                (rows.us(now), tenant_id, *wanted),
            ).fetchall()
            return {r[0] for r in found}

        replayed = await self._db.write(fn)
        return [i for i in wanted if i in replayed]

    async def delete_notifications(self, *, before: datetime, limit: int = 10_000) -> int:
        def fn(c: sqlite3.Connection) -> int:
            cursor = c.execute(
                "DELETE FROM notifications WHERE id IN (SELECT id FROM notifications"
                " WHERE finished_at < ? AND state <> 'pending' LIMIT ?)",
                (rows.us(before), limit),
            )
            return cursor.rowcount

        return await self._db.write(fn)

    async def archive_runs(
        self,
        *,
        now: datetime,
        settle_seconds: float = 10.0,
        partition_seconds: float = 86_400.0,
        partitions_ahead: int = 3,
        limit: int = 5_000,
    ) -> int:
        # Nothing to move: one runs table, whose retention deletes in small batches
        # (decision 0032). SQLite leaves no dead tuples for a vacuum to chase.
        return 0

    async def vacuum_live_tables(
        self, *, min_dead_tuples: int = 10_000, dead_fraction: float = 0.2
    ) -> list[Vacuum]:
        """Nothing to do: SQLite reuses the pages that deletes and updates free (the
        freelist) for the next writes, and an update or delete leaves no dead tuple
        behind for a vacuum to clear. ``VACUUM`` would only rewrite the whole file, under
        the one write lock, to give free pages back to the file system."""
        return []

    async def delete_history(self, *, before: datetime, limit: int = 10_000) -> int:
        at = rows.us(before)

        def runs(n: int) -> Callable[[sqlite3.Connection], int]:
            def fn(c: sqlite3.Connection) -> int:
                return c.execute(
                    "DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE finished_at < ?"
                    " AND state IN ('succeeded', 'dead', 'cancelled', 'skipped') LIMIT ?)",
                    (at, n),
                ).rowcount

            return fn

        def pipeline_runs(n: int) -> Callable[[sqlite3.Connection], int]:
            def fn(c: sqlite3.Connection) -> int:
                doomed = [
                    r[0]
                    for r in c.execute(
                        "SELECT id FROM pipeline_runs WHERE finished_at < ? LIMIT ?", (at, n)
                    )
                ]
                for pipeline_run_id in doomed:
                    c.execute(
                        "DELETE FROM pipeline_tasks WHERE pipeline_run_id = ?", (pipeline_run_id,)
                    )
                    c.execute("DELETE FROM pipeline_runs WHERE id = ?", (pipeline_run_id,))
                return len(doomed)

            return fn

        # Small batches, each its own write: SQLite has one writer, and a worker's
        # completions wait behind a long delete (a run's attempts go with it).
        deleted = 0
        for batch in (runs, pipeline_runs):
            done = 0
            while done < limit:
                n = min(HISTORY_BATCH, limit - done)
                got = await self._db.write(batch(n))
                done += got
                if got < n:
                    break
            if batch is runs:
                deleted = done
        return deleted

    # -- run control -----------------------------------------------------------------
    async def cancel_run(self, tenant_id: str, run_id: int, *, now: datetime, actor: str) -> Run:
        at = rows.us(now)

        def fn(c: sqlite3.Connection) -> Run:
            row = c.execute(
                "SELECT * FROM runs WHERE tenant_id = ? AND id = ?", (tenant_id, run_id)
            ).fetchone()
            if row is None:
                raise NotFound("run", run_id)
            run = rows.run(row)
            verdict = lifecycle.cancel(run.state, run.cancel_requested)
            if verdict is lifecycle.CancelVerdict.CANCEL:
                ops.transition(c, run, lifecycle.cancelled(run, actor=actor, now=now), at)
                ops.audit(c, tenant_id, "run", run_id, "cancelled", actor, at)
            elif verdict is lifecycle.CancelVerdict.ASK:
                c.execute("UPDATE runs SET cancel_requested = 1 WHERE id = ?", (run_id,))
                ops.audit(c, tenant_id, "run", run_id, "cancel_requested", actor, at)
            return rows.run(c.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone())

        return await self._db.write(fn)

    async def replay_runs(
        self,
        tenant_id: str,
        run_ids: Sequence[int],
        *,
        extra_attempts: int,
        now: datetime,
        actor: str,
    ) -> list[int]:
        at = rows.us(now)

        def fn(c: sqlite3.Connection) -> tuple[list[int], list[str]]:
            replayed, pools = [], []
            for run_id in run_ids:
                pool = ops.replay_run(c, tenant_id, run_id, at, extra_attempts, actor)
                if pool is not None:
                    replayed.append(run_id)
                    pools.append(pool)
            return replayed, pools

        replayed, pools = await self._db.write(fn)
        self._wakeups.notify_pools(pools)
        return replayed

    # -- reads -----------------------------------------------------------------------
    async def get_run(self, tenant_id: str, run_id: int) -> Run | None:
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT * FROM runs WHERE tenant_id = ? AND id = ?", (tenant_id, run_id)
            ).fetchone()
        )
        return None if row is None else rows.run(row)

    async def list_runs(
        self,
        tenant_id: str,
        *,
        job_id: str | None = None,
        state: RunState | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[Run]:
        where: list[str] = ["tenant_id = ?"]
        params: list[object] = [tenant_id]
        if job_id is not None:
            where.append("job_id = ?")
            params.append(job_id)
        if state is not None:
            where.append("state = ?")
            params.append(state.value)
        if before_id is not None and job_id is not None:
            where.append("scheduled_for < (SELECT scheduled_for FROM runs WHERE id = ?)")
            params.append(before_id)
        elif before_id is not None:
            where.append("id < ?")
            params.append(before_id)
        order = "scheduled_for DESC" if job_id is not None else "id DESC"
        sql = f"SELECT * FROM runs WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
        found = await self._db.read(lambda c: c.execute(sql, (*params, limit)).fetchall())
        return [rows.run(r) for r in found]

    async def list_dead(
        self,
        tenant_id: str,
        *,
        pool: str | None = None,
        job_id: str | None = None,
        died_since: datetime | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[DeadRun]:
        where = ["r.tenant_id = ?", "r.state = 'dead'"]
        params: list[Any] = [tenant_id]
        if pool is not None:
            where.append("r.pool = ?")
            params.append(pool)
        if job_id is not None:
            where.append("r.job_id = ?")
            params.append(job_id)
        if died_since is not None:
            where.append("r.finished_at >= ?")
            params.append(rows.us(died_since))
        if before_id is not None:
            where.append("r.id < ?")
            params.append(before_id)
        # One statement for the page, never one per run. The page is cut first, then
        # joined: only its rows look up their job and, along attempts_run, their last
        # attempt's error.
        last = (
            "(SELECT a.{} FROM attempts a WHERE a.run_id = r.id"
            " ORDER BY a.attempt DESC, a.id DESC LIMIT 1)"
        )
        sql = (
            f"SELECT r.*, j.name AS job_name, {last.format('error_class')} AS last_class,"
            f" {last.format('error_message')} AS last_message"
            f" FROM (SELECT * FROM runs r WHERE {' AND '.join(where)}"
            " ORDER BY r.id DESC LIMIT ?) r"
            " LEFT JOIN jobs j ON j.id = r.job_id AND j.tenant_id = r.tenant_id"
            " ORDER BY r.id DESC"
        )
        found = await self._db.read(lambda c: c.execute(sql, (*params, limit)).fetchall())
        return [
            DeadRun(rows.run(r), r["job_name"], r["last_class"], r["last_message"]) for r in found
        ]

    async def list_attempts(self, tenant_id: str, run_id: int) -> list[Attempt]:
        found = await self._db.read(
            lambda c: c.execute(
                "SELECT * FROM attempts WHERE tenant_id = ? AND run_id = ? ORDER BY attempt, id",
                (tenant_id, run_id),
            ).fetchall()
        )
        return [rows.attempt(r) for r in found]

    async def list_activity(
        self,
        *,
        after_attempt: int,
        finished_since: datetime,
        waiting_before: datetime | None = None,
        limit: int = 500,
    ) -> Activity:
        def fn(c: sqlite3.Connection) -> Activity:
            attempts = [
                rows.attempt(r)
                for r in c.execute(
                    "SELECT * FROM attempts WHERE id > ? ORDER BY id LIMIT ?",
                    (after_attempt, limit),
                )
            ]
            ids = sorted({a.run_id for a in attempts})
            of_attempts = {
                r["id"]: rows.run(r)
                for r in c.execute(
                    f"SELECT * FROM runs WHERE id IN ({ops.placeholders(len(ids))})", ids
                )
            }
            return Activity(
                attempts=attempts,
                runs_of_attempts=of_attempts,
                running=_runs(c, ops.ACTIVITY_RUNNING, (limit,)),
                closed=_runs(c, ops.ACTIVITY_CLOSED, (rows.us(finished_since), limit)),
                waiting=[]
                if waiting_before is None
                else _runs(c, ops.ACTIVITY_WAITING, (rows.us(waiting_before), limit)),
                latest_attempt=c.execute("SELECT coalesce(max(id), 0) FROM attempts").fetchone()[0],
            )

        return await self._db.read(fn)

    async def list_audit(self, tenant_id: str, entity_id: str) -> list[AuditEntry]:
        found = await self._db.read(
            lambda c: c.execute(
                "SELECT * FROM audit_log WHERE tenant_id = ? AND entity_id = ? ORDER BY id",
                (tenant_id, str(entity_id)),
            ).fetchall()
        )
        return [rows.audit(r) for r in found]

    async def list_audit_entries(
        self,
        *,
        tenant_id: str | None = None,
        actor: str | None = None,
        entity: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        before: int | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        return await self._db.read(
            lambda c: audit.list_entries(c, tenant_id, actor, entity, since, until, before, limit)
        )

    async def replace_job_actions(
        self,
        tenant_id: str,
        changes: Sequence[JobSecrets],
        *,
        actor: str,
        now: datetime,
    ) -> int:
        return await self._db.write(
            lambda c: audit.replace_job_actions(c, tenant_id, changes, actor, now)
        )

    # -- status ----------------------------------------------------------------------
    async def key_running(self, tenant_id: str, key: str) -> tuple[int, int | None]:
        def fn(c: sqlite3.Connection) -> tuple[int, int | None]:
            n, lowest = c.execute(
                "SELECT count(*), min(concurrency_limit) FROM runs INDEXED BY runs_keyed_running"
                " WHERE tenant_id = ? AND concurrency_key = ? AND state = 'running'",
                (tenant_id, key),
            ).fetchone()
            return int(n), lowest

        return await self._db.read(fn)

    async def replication(self) -> Replication:
        return Replication("none")  # one file on one machine: nothing to replicate to

    async def pool_status(
        self, tenant_id: str | None, *, now: datetime, since: datetime
    ) -> list[PoolStatus]:
        return await self._db.read(lambda c: status.pool_status(c, tenant_id, now, since))

    async def attempt_history(
        self, tenant_id: str | None, *, since: datetime, now: datetime, bucket_seconds: int
    ) -> list[AttemptBucket]:
        return await self._db.read(
            lambda c: status.attempt_history(c, tenant_id, since, now, bucket_seconds)
        )

    async def count_jobs_by_state(self, tenant_id: str) -> dict[JobState, int]:
        return await self._db.read(lambda c: status.count_jobs_by_state(c, tenant_id))

    async def list_live_workers(self, *, seen_since: datetime) -> list[WorkerInfo]:
        return await self._db.read(lambda c: status.live_workers(c, seen_since))

    async def runs_around(
        self, tenant_id: str, job_id: str, instant: datetime
    ) -> tuple[Run | None, Run | None]:
        return await self._db.read(lambda c: status.runs_around(c, tenant_id, job_id, instant))

    # -- wake-ups --------------------------------------------------------------------
    async def notify(self, topic: str) -> None:
        self._wakeups.notify(topic)

    async def wait(self, topics: Sequence[str], timeout: float) -> bool:
        return await self._wakeups.wait(topics, timeout)


def _runs(c: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[Run]:
    return [rows.run(r) for r in c.execute(sql, params)]


def _due(until: datetime, shards: Sequence[int] | None, shard_count: int) -> tuple[str, list[Any]]:
    """The WHERE clause of the jobs due by ``until`` (of ``shards``), and its parameters."""
    where = "state = 'active' AND next_fire_at <= ?"
    params: list[Any] = [rows.us(until)]
    if shards is not None:
        where += f" AND shard_key % ? IN ({ops.placeholders(len(shards))})"
        params.extend([shard_count, *shards])
    return where, params


__all__ = ["SqliteStore"]
