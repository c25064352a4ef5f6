"""The cluster store: PostgreSQL, shared by any number of API, scheduler and worker nodes.

Every hot-path verb is one statement (see :mod:`._sql`), so a batch of runs costs one
round trip. Claims use ``FOR UPDATE SKIP LOCKED``: concurrent workers take disjoint runs
without queueing on each other's locks. Wake-ups use LISTEN/NOTIFY, sent by the same
statement that makes runs pending, so a waiter hears of them exactly when they commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import asyncpg

from cronwheel.core import lifecycle
from cronwheel.core.model import (
    JSON,
    REASON_AT_MOST_ONCE_LOST,
    REASON_AT_MOST_ONCE_STOPPED,
    REASON_LEASE_LOST_LAST,
    REASON_OVERLAP_SKIP,
    REASON_REPLANNED,
    SCHEDULER_TENANT,
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
from cronwheel.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    StaleVersion,
    StoreUnavailable,
)
from cronwheel.store import _auditing, pgurl
from cronwheel.store import _decode as decode
from cronwheel.store import _status as status
from cronwheel.store._guard import guarded
from cronwheel.store.base import (
    ENQUEUE_CHUNK,
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
    max_jobs_refusal,
)
from cronwheel.store.postgres import _audit as audit
from cronwheel.store.postgres import _gauges, _history, _lean, _shards, _status, _testing, _vacuum
from cronwheel.store.postgres import _pipeline_runs as pipeline_runs
from cronwheel.store.postgres import _pipelines as pipelines
from cronwheel.store.postgres import _rows as rows
from cronwheel.store.postgres import _sql as sql
from cronwheel.store.postgres._connect import (
    CONNECT_ERRORS,
    CONNECT_TIMEOUT,
    connect_error,
    session_attribute,
)
from cronwheel.store.postgres._errors import (
    REFUSED,
    UNAVAILABLE,
    lost_under,
    missing_parent,
    outage,
    unique_conflict,
)
from cronwheel.store.postgres._listen import Listener
from cronwheel.store.postgres._migrate import migrate
from cronwheel.store.postgres._standby import StandbyLog

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    # What queries run on: a pooled connection's proxy, or a connection of our own.
    Connection: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]

log = logging.getLogger("cronwheel.store.postgres")


class _FloorRetries(logging.Filter):
    """Drops asyncpg's pool warning, with its traceback, at every failed try to reopen
    the pool's minimum connections (1 s, 2 s, 4 s… up to a minute apart, for as long as
    no server answers): a failover or a restart would fill every process's log with them,
    while each loop that met the outage says so once and says when it is over
    (cronwheel/engine/_outage.py). asyncpg's other warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to restore the pool connection floor")


_POOL_LOG = logging.getLogger("asyncpg.pool")
if not any(isinstance(f, _FloorRetries) for f in _POOL_LOG.filters):
    _POOL_LOG.addFilter(_FloorRetries())

# A bulk create's jobs go in parts of this size, pipelined, each one statement.
_JOBS_PER_STATEMENT: Final = 1000

# How many (pools, tenant) claim hints a store keeps before it forgets them all.
_CLAIM_SHAPES: Final = 1024

# How a claim is planned (decision 0047, addendum). A worker's claim (any tenant) has no
# parameter whose value changes its plan: the tenant and the pools it reads come from the
# guard's CTEs or are index conditions either way, so the plan made once per connection
# (generic) is the plan made at every execution (custom), without the 1-5 ms of planning a
# claim: 3-10 us a run in claims of 250 (bench/README.md, "Issue 28 store steps"). A claim
# for one tenant (the HTTP claim of a remote worker) is the opposite: only a custom plan
# can use the tenant as an index condition (``$7 IS NULL OR tenant_id = $7``), and a
# generic one reads the pool's index through every other tenant's runs first (1.6 ms
# against 14 for 10 runs behind another tenant's 100,000). PostgreSQL's own choice
# ("auto") may pick either after five executions, by costs averaged over every tenant
# claimed, so both are set, per claim, on the claim's connection (the pool's reset on
# release, RESET ALL, takes the setting back).
_CLAIM_PLANS: Final = {
    True: "SET plan_cache_mode = force_generic_plan",
    False: "SET plan_cache_mode = force_custom_plan",
}

# asyncpg prepares and keeps (per connection) only statements up to this size; a longer
# one is parsed, planned and thrown away at every execution, whatever plan_cache_mode
# says. Its default, 15 KiB, sat 1.3 KB above the full claim (CLAIM_RUNS, 14.7 KB in
# November 2026): past it, a full claim of 250 cost PostgreSQL 5 ms more (planning) and
# nothing said so. The store's longest statements fit with room to spare.
STATEMENT_CACHE_BYTES: Final = 64 * 1024

# How many times save_response inserts before giving up (see there): twice in practice.
_SAVE_RESPONSE_TRIES: Final = 3

# Every connection reports instants in UTC and names itself in pg_stat_activity. A
# transaction whose client froze or was cut off mid-way is ended by the server after 5 s:
# its row locks (a shard or maintenance lease being renewed) would otherwise stop every
# other process from taking those leases over until the client came back, if ever.
# JIT is off: every statement here is short and index-driven, and compiling one costs
# 100 ms or more whenever the planner's estimate crosses jit_above_cost (the fair claim's
# per-tenant LIMITs, unknown at plan time, did: a 5 ms claim took 1.3 s; decision 0028).
_SERVER_SETTINGS: Final = {
    "timezone": "UTC",
    "application_name": "cronwheel",
    "idle_in_transaction_session_timeout": "5s",
    "jit": "off",
}


async def _init_connection(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """Codecs for every pooled connection: ``jsonb`` ↔ Python values, ``uuid`` ↔ ``str``."""
    await conn.set_type_codec(
        "jsonb", encoder=rows.dumps, decoder=json.loads, schema="pg_catalog", format="text"
    )
    await conn.set_type_codec("uuid", encoder=str, decoder=str, schema="pg_catalog", format="text")


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
) -> tuple[Any, ...]:
    """The statement of :meth:`PostgresStore.list_jobs`, then its arguments (a function
    of its own, so a test can ask PostgreSQL for its plan)."""
    if after is not None:
        order.check(after)
        if not rows.is_uuid(after.id):
            raise InvalidInput("after", f"{after.id!r} is not a job id")
    select = sql.Select("jobs", ("tenant_id = {}", tenant_id))
    if state is not None:
        select.add("state = {}", state.value)
        if state is not JobState.ACTIVE:
            # jobs_tenant_state_id's own condition (0017), spelled out: a generic plan
            # (asyncpg's cached statement), which cannot see the state's value, could
            # not otherwise prove that the partial index holds the rows.
            select.where.append("state <> 'active'")
    if pool is not None:
        select.add("pool = {}", pool)
    if name_prefix is not None:
        # starts_with, not LIKE: a prefix with % or _ must match literally.
        select.add("starts_with(name, {})", name_prefix)
    if name is not None:
        select.add("name = {}", name)
    if id_prefix is not None:
        low, high = id_prefix_range(id_prefix)
        select.add("id >= {}::uuid", low)
        select.add("id <= {}::uuid", high)
    if schedule_kind is not None:
        select.add("schedule->>'kind' = {}", schedule_kind)
    if last_outcome is LastOutcome.NONE:
        select.where.append(sql.NO_FINISHED_RUN)
    elif last_outcome is not None:
        select.add(sql.LAST_OUTCOME_IS, last_outcome.value)
    # Each order is the index it walks (0009_job_orders.sql): the ORDER BY and the
    # cursor's row comparison use the index's own expressions and collation, so a
    # page is an index scan from the cursor on, never a sort of the tenant's jobs.
    column, bound = sql.JOB_ORDER[order.sort_key]
    direction = " DESC" if order.descending else ""
    if after is not None:
        compare = "<" if order.descending else ">"
        if column is None:
            select.add(f"id {compare} {{}}::uuid", after.id)
        else:
            select.add(f"({column}, id) {compare} ({bound}, {{}}::uuid)", after.value, after.id)
    by = f"id{direction}" if column is None else f"{column}{direction}, id{direction}"
    return select.query(by, limit)


class PostgresStore(Store):
    """The cluster store. Create it with :meth:`connect`; one instance per process."""

    capabilities = Capabilities(cross_process_wakeups=True, skip_locked=True)

    def __init__(
        self,
        pool: asyncpg.Pool[asyncpg.Record],
        dsn: str,
        attrs: str = "read-write",
        *,
        read_only: bool = False,
    ) -> None:
        self._pool = pool
        self._dsn = dsn
        self._attrs = attrs
        self._read_only = read_only
        # Per (pools, tenant) claimed: whether the last full claim found the lean one would
        # do. A hint only (the lean statement checks for itself): a wrong one costs a
        # statement that claims nothing, or a full claim where a lean one would do.
        self._claim_shapes: dict[tuple[tuple[str, ...], str | None], bool] = {}
        self._lean_claims = True  # False: every claim is the full statement (tests, bench)
        self.claims_by_statement: Counter[str] = Counter()
        """How many claims each statement (``lean``, ``full``) made: tests and bench."""
        self._listener = Listener(self._connect_listener)
        self._urgent: asyncpg.Connection[asyncpg.Record] | None = None
        self._urgent_lock = asyncio.Lock()
        self._standbys = StandbyLog(log, dsn)

    @classmethod
    async def connect(
        cls, dsn: str, *, min_size: int = 1, max_size: int = 10, read_only: bool = False
    ) -> PostgresStore:
        """Open a pool of ``min_size``..``max_size`` connections to ``dsn``. ``read_only``:
        every transaction is read-only (a read replica's store, cronwheel/store/replica.py),
        so a write that reached it by mistake fails instead of landing on the wrong server."""
        settings = dict(_SERVER_SETTINGS)
        if read_only:
            settings["default_transaction_read_only"] = "on"
        # Every connection the pool opens, again after a failover too, tries the URL's
        # hosts in order and keeps the first with these attributes (decision 0050).
        attrs = pgurl.replica_attrs(dsn) if read_only else pgurl.primary_attrs(dsn)
        try:
            pool = await asyncpg.create_pool(
                dsn,
                min_size=min_size,
                max_size=max_size,
                init=_init_connection,
                server_settings=settings,
                max_cacheable_statement_size=STATEMENT_CACHE_BYTES,
                timeout=CONNECT_TIMEOUT,
                target_session_attrs=session_attribute(attrs),
            )
        except CONNECT_ERRORS as exc:
            # Not chained: asyncpg's exception may carry the DSN, password included.
            raise connect_error(exc, dsn) from None
        return cls(pool, dsn, attrs, read_only=read_only)

    async def _connect_listener(self) -> asyncpg.Connection[asyncpg.Record]:
        try:
            conn: asyncpg.Connection[asyncpg.Record] = await asyncpg.connect(
                self._dsn,
                server_settings=_SERVER_SETTINGS,
                max_cacheable_statement_size=STATEMENT_CACHE_BYTES,
                timeout=CONNECT_TIMEOUT,
                target_session_attrs=session_attribute(self._attrs),
            )
        except CONNECT_ERRORS as exc:
            error = connect_error(exc, self._dsn)
            if isinstance(error, StoreUnavailable):
                raise error from None
            raise StoreUnavailable(str(error)) from None
        return conn

    @contextlib.asynccontextmanager
    async def _urgent_connection(self) -> AsyncIterator[Connection]:
        """The connection of urgent claims (a worker's peeks), kept out of the pool.

        A pooled claim costs three round trips (the plan mode set, the claim, the reset
        at release) and each waits for a turn of the caller's event loop, which a
        saturated worker's loop makes long: an urgent claim makes one. Opened at the
        first, planned at every claim (force_custom_plan, for good); one claim at a time.
        A failure closes it (the next opens another).

        Not planned once like the pool's claims of a worker: the connection lives as long
        as the worker and a plan made at its first peek is a plan for the table then,
        which a burst of enqueues makes a thousand times larger faster than statistics
        follow (a custom plan sees the table's pages as they are). Measured in W6: with
        the peek's plan made while `runs` held a few dozen runs, tenant B's runs sent in
        the first second of A's 100,000-run drain started 258-396 ms late; planned at
        every peek, 85-101 ms at most (bench/README.md, "Which pass, narrowed"). A peek
        is a claim of a few runs: its planning (1-3 ms) is worth a plan for the table
        as it is."""
        async with self._urgent_lock:
            try:
                if self._urgent is None or self._urgent.is_closed():
                    self._urgent = None
                    conn = await self._connect_listener()
                    try:
                        await _init_connection(conn)
                        await conn.execute(_CLAIM_PLANS[False])
                    except BaseException:
                        conn.terminate()
                        raise
                    self._urgent = conn
                try:
                    yield self._urgent
                except BaseException as exc:
                    # Cancelled mid-statement, or the server went: its state is unknown.
                    conn, self._urgent = self._urgent, None
                    if conn is not None:
                        conn.terminate()
                    if (lost := lost_under(exc)) is not None:
                        raise outage(lost) from exc
                    raise
            except UNAVAILABLE as exc:
                raise outage(exc) from exc

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Connection]:
        """A pooled connection; losing the database surfaces as StoreUnavailable."""
        try:
            async with self._pool.acquire() as conn:
                try:
                    yield conn
                except asyncpg.ReadOnlySQLTransactionError as exc:
                    if self._read_only:
                        raise  # a replica's store: a write that reached it fails, as said
                    # A standby where the primary was (target_session_attrs=any, or a
                    # server demoted under an open connection): leave it, never write
                    # to it again through this connection; the next one finds the primary.
                    await self._standbys.left(conn, exc)
                    raise StoreUnavailable(self._standbys.message(exc)) from None
                except asyncpg.InterfaceError as exc:
                    if (lost := lost_under(exc)) is None:
                        raise
                    raise outage(lost) from exc
        except UNAVAILABLE as exc:
            raise outage(exc) from exc
        except REFUSED as exc:
            # A pooled connection re-opened after the database was dropped or the
            # user's rights changed: an outage to ride out, like a server down.
            raise StoreUnavailable(str(connect_error(exc, self._dsn))) from exc

    async def _fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        async with self._connection() as conn:
            return await conn.fetch(query, *args)

    async def _fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        async with self._connection() as conn:
            return await conn.fetchrow(query, *args)

    async def _execute(self, query: str, *args: Any) -> str:
        """Run a statement for its effect; return its status (e.g. ``DELETE 3``)."""
        async with self._connection() as conn:
            return await conn.execute(query, *args)

    async def _one(self, query: str, *args: Any) -> asyncpg.Record:
        """The single row of a statement that always returns one (the hot paths' summary)."""
        row = await self._fetchrow(query, *args)
        if row is None:
            raise RuntimeError("a summary statement returned no row")
        return row

    # -- setup ---------------------------------------------------------------------
    async def migrate(self, *, target: int | None = None) -> list[int]:
        """Up to ``target`` (default: the latest). A fresh database going to the latest
        version gets ``schema.sql`` and records every version; otherwise each missing
        migration runs in its own transaction. An advisory lock, taken in every one of
        those transactions, serialises concurrent migrators."""
        async with self._connection() as conn:
            return await migrate(conn, target)

    async def schema_version(self) -> int:
        async with self._connection() as conn:
            if not await conn.fetchval(sql.HAS_MIGRATIONS_TABLE):
                return 0
            version: int = await conn.fetchval(sql.SCHEMA_VERSION)
        return version

    async def close(self) -> None:
        await self._listener.close()
        urgent, self._urgent = self._urgent, None
        if urgent is not None:
            with contextlib.suppress(Exception):
                await urgent.close(timeout=5)
        await self._pool.close()

    async def now(self) -> datetime:
        async with self._connection() as conn:
            instant: datetime = await conn.fetchval(sql.CLOCK)
        return instant

    # -- read replicas (cronwheel/store/replica.py) ----------------------------------
    async def wal_position(self) -> str:
        """How far this server has flushed its WAL: a primary's position, which a standby
        that replayed up to it has every transaction committed before this call."""
        row = await self._one("SELECT pg_current_wal_flush_lsn()::text AS position")
        position: str = row["position"]
        return position

    async def replay_lag(self, primary_position: str) -> float | None:
        """Seconds this standby's data is behind its primary: 0 when it has replayed up to
        ``primary_position`` (:meth:`wal_position` of the primary, read just before),
        else the age of the last transaction it replayed (infinite if it replayed none).
        None when this server is not a standby: its staleness cannot be measured."""
        # pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() ("nothing pending") is not
        # enough: a standby cut off from its primary has nothing pending either, and
        # falls further behind every second. Its replay position against the primary's
        # own is.
        row = await self._one(
            "SELECT pg_is_in_recovery() AS standby,"
            " coalesce(pg_last_wal_replay_lsn() >= $1::text::pg_lsn, false) AS caught_up,"
            " extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS lag",
            primary_position,
        )
        if not row["standby"]:
            return None
        if row["caught_up"]:
            return 0.0
        lag: float | None = row["lag"]
        return math.inf if lag is None else max(lag, 0.0)

    async def truncate_all_for_tests(self) -> None:
        """Empty every table but the migrations (ids restart), keeping the default tenant."""
        async with self._connection() as conn:
            await conn.execute(_testing.RESET)

    # -- tenants ---------------------------------------------------------------------
    async def ensure_tenant(self, tenant_id: str, name: str, *, now: datetime) -> None:
        async with self._connection() as conn:
            await conn.execute(sql.ENSURE_TENANT, tenant_id, name, now)

    async def create_tenant(self, tenant: Tenant, *, actor: str | None = None) -> None:
        args = (
            tenant.name,
            tenant.max_jobs,
            tenant.max_creates_per_second,
            tenant.created_at,
            tenant.claim_weight,
            tenant.max_running,
        )
        try:
            async with self._connection() as conn, conn.transaction():
                await conn.execute(sql.CREATE_TENANT, tenant.id, *args)
                if actor is not None:
                    entry = ("tenant", tenant.id, "created", actor, tenant.created_at)
                    details = _auditing.tenant_details(tenant)
                    await conn.execute(audit.INSERT, tenant.id, *entry, details)
        except asyncpg.UniqueViolationError as exc:  # tenants_pkey, its only unique rule
            raise Conflict("id", f"tenant '{tenant.id}' already exists") from exc

    async def get_tenant(self, tenant_id: str) -> Tenant | None:
        row = await self._fetchrow(sql.GET_TENANT, tenant_id)
        return None if row is None else rows.tenant(row)

    async def list_tenants(self) -> list[Tenant]:
        return [rows.tenant(r) for r in await self._fetch(sql.LIST_TENANTS)]

    async def update_tenant(
        self, tenant: Tenant, *, actor: str | None = None, now: datetime | None = None
    ) -> Tenant:
        args = (
            tenant.name,
            tenant.max_jobs,
            tenant.max_creates_per_second,
            tenant.claim_weight,
            tenant.max_running,
        )
        async with self._connection() as conn, conn.transaction():
            row = await conn.fetchrow(sql.UPDATE_TENANT, tenant.id, *args)
            if row is None:
                raise NotFound("tenant", tenant.id)
            updated = rows.tenant(row)
            if actor is not None and now is not None:
                details = _auditing.tenant_details(updated)
                entry = ("tenant", tenant.id, "updated", actor, now, details)
                await conn.execute(audit.INSERT, tenant.id, *entry)
        return updated

    async def count_live_jobs(self, tenant_id: str, *, limit: int | None = None) -> int:
        async with self._connection() as conn:
            count: int = await conn.fetchval(sql.COUNT_LIVE_JOBS, tenant_id, limit)
        return count

    async def take_create_tokens(self, tenant_id: str, count: int, *, now: datetime) -> TokenTake:
        row = await self._fetchrow(sql.TAKE_CREATE_TOKENS, tenant_id, count, now)
        if row is None:  # no such tenant: nothing to limit (its create fails on its own)
            return TokenTake(True, None)
        return TokenTake.of(row["rate"], row["tokens"], row["granted"], count)

    # -- API keys ----------------------------------------------------------------------
    async def create_api_key(self, key: ApiKey, *, actor: str | None = None) -> None:
        args = (key.role.value, key.name, key.created_at, key.revoked_at)
        try:
            async with self._connection() as conn, conn.transaction():
                await conn.execute(sql.CREATE_API_KEY, key.id, key.tenant_id, key.key_hash, *args)
                if actor is not None:
                    details = _auditing.key_details(key)
                    entry = ("key", key.id, "created", actor, key.created_at, details)
                    await conn.execute(audit.INSERT, key.tenant_id, *entry)
        except asyncpg.ForeignKeyViolationError as exc:  # api_keys_tenant_id_fkey
            raise NotFound("tenant", key.tenant_id) from exc
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name == "api_keys_pkey":
                raise Conflict("id", f"API key '{key.id}' already exists") from exc
            raise Conflict("id", "an API key with the same secret already exists") from exc

    async def find_api_key(self, key_hash: str) -> ApiKey | None:
        row = await self._fetchrow(sql.FIND_API_KEY, key_hash)
        return None if row is None else rows.api_key(row)

    async def list_api_keys(self, tenant_id: str) -> list[ApiKey]:
        return [rows.api_key(r) for r in await self._fetch(sql.LIST_API_KEYS, tenant_id)]

    async def revoke_api_key(
        self, tenant_id: str, key_id: str, *, now: datetime, actor: str | None = None
    ) -> ApiKey:
        async with self._connection() as conn, conn.transaction():
            row = await conn.fetchrow(sql.REVOKE_API_KEY, tenant_id, key_id, now)
            if row is None:
                raise NotFound("key", key_id)
            key = rows.api_key(row)
            # Revoked by this call (not before): the revocation instant is ours.
            if actor is not None and key.revoked_at == now:
                details = _auditing.key_details(key)
                entry = ("key", key_id, "revoked", actor, now, details)
                await conn.execute(audit.INSERT, tenant_id, *entry)
        return key

    # -- API idempotency -----------------------------------------------------------------
    async def save_response(self, response: StoredResponse) -> StoredResponse:
        """Insert if absent, else read the kept response: two statements, so the read's
        snapshot sees a concurrent insert that the first statement waited for."""
        tenant_id, key = response.tenant_id, response.key
        args = (response.request_hash, response.status, response.body, response.created_at)
        async with self._connection() as conn:
            # Both miss only if the kept response was deleted (expired) in between: then
            # ours may be kept after all, so try again.
            for _ in range(_SAVE_RESPONSE_TRIES):
                row = await conn.fetchrow(sql.SAVE_RESPONSE, tenant_id, key, *args)
                if row is None:
                    row = await conn.fetchrow(sql.GET_RESPONSE, tenant_id, key)
                if row is not None:
                    return rows.response(row)
        raise RuntimeError(f"idempotency key {key!r} kept disappearing while being saved")

    async def get_response(self, tenant_id: str, key: str) -> StoredResponse | None:
        row = await self._fetchrow(sql.GET_RESPONSE, tenant_id, key)
        return None if row is None else rows.response(row)

    async def delete_responses(self, *, before: datetime) -> int:
        status = await self._execute(sql.DELETE_RESPONSES, before)
        return int(status.rsplit(" ", 1)[-1])

    # -- worker registry -----------------------------------------------------------------
    async def register_worker(self, worker: WorkerInfo) -> None:
        await self._execute(sql.REGISTER_WORKER, *rows.worker_params(worker))

    async def list_workers(self, tenant_id: str, *, seen_since: datetime) -> list[WorkerInfo]:
        found = await self._fetch(sql.LIST_WORKERS, tenant_id, seen_since)
        return [rows.worker(r) for r in found]

    async def served_pools(self, tenant_id: str, *, seen_since: datetime) -> set[str]:
        return {r["pool"] for r in await self._fetch(sql.SERVED_POOLS, tenant_id, seen_since)}

    async def remove_worker(self, worker_id: str) -> None:
        await self._execute(sql.REMOVE_WORKER, worker_id)

    # -- jobs ------------------------------------------------------------------------
    async def create_jobs(
        self, jobs: Sequence[Job], runs: Sequence[NewRun] = (), *, actor: str = "api"
    ) -> None:
        if not jobs and not runs:
            return
        created_at = jobs[0].created_at if jobs else None
        parts = max(len(jobs) - 1, 0) // _JOBS_PER_STATEMENT + 1
        # Each run goes with its job's part: checked against the jobs the statement
        # inserts, not looked up (see CREATE_JOBS). A run of another job goes last.
        runs_of: list[list[NewRun]] = [[] for _ in range(parts)]
        if runs:
            part_of = {job.id: i // _JOBS_PER_STATEMENT for i, job in enumerate(jobs)}
            for run in runs:
                runs_of[part_of.get(run.job_id, parts - 1)].append(run)

        def statements() -> Iterator[list[Any]]:
            # Built as asyncpg sends them: the server inserts one part while the next is
            # payloads.
            for n in range(parts):
                part = jobs[n * _JOBS_PER_STATEMENT : (n + 1) * _JOBS_PER_STATEMENT]
                new_runs = rows.new_run_template_columns(runs_of[n])
                traceparents = [j.traceparent for j in part]
                concurrency = [rows.concurrency_text(j) for j in part]
                keys = rows.new_run_keys(runs_of[n])
                yield [
                    *new_runs,
                    *rows.job_columns(part),
                    actor,
                    created_at,
                    traceparents,
                    concurrency,
                    *keys,
                ]

        try:
            async with self._connection() as conn, conn.transaction():
                # All parts or none; a tenant with max_jobs is checked (and locked) first.
                await _check_max_jobs(conn, jobs)
                await conn.executemany(sql.CREATE_JOBS, statements())
        except asyncpg.UniqueViolationError as exc:
            raise unique_conflict(exc, jobs) from exc
        except asyncpg.ForeignKeyViolationError as exc:
            raise missing_parent(exc) from exc

    async def get_job(self, tenant_id: str, job_id: str) -> Job | None:
        if not rows.is_uuid(job_id):
            return None
        row = await self._fetchrow(sql.GET_JOB, tenant_id, job_id)
        return None if row is None else rows.job(row)

    async def last_runs(self, tenant_id: str, job_ids: Sequence[str]) -> dict[str, LastRun]:
        ids = [j for j in job_ids if rows.is_uuid(j)]
        if not ids:
            return {}
        return {
            r["job_id"]: rows.last_run(r) for r in await self._fetch(sql.LAST_RUNS, tenant_id, ids)
        }

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
        found = await self._fetch(
            *jobs_query(
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
            )
        )
        return [rows.job(r) for r in found]

    async def update_job(
        self, job: Job, *, expected_version: int, actor: str, replan: bool = False
    ) -> Job:
        if not rows.is_uuid(job.id):
            raise NotFound("job", job.id)
        async with self._connection() as conn, conn.transaction():
            current = await conn.fetchrow(sql.LOCK_JOB, job.tenant_id, job.id)
            if current is None:
                raise NotFound("job", job.id)
            if current["version"] != expected_version:
                raise StaleVersion(expected_version, current["version"])
            definition = rows.job_definition(job)
            args = (
                job.id,
                *definition,
                expected_version + 1,
                actor,
                replan,
                REASON_REPLANNED,
                [dict(t) for t in job.notify] or None,
                None if job.concurrency is None else job.concurrency.to_dict(),
            )
            try:
                row = await conn.fetchrow(sql.UPDATE_JOB, *args)
            except asyncpg.UniqueViolationError as exc:
                raise unique_conflict(exc, [job]) from exc
        assert row is not None  # the row is locked: the update cannot miss it
        return rows.job(row)

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
        if not rows.is_uuid(job_id):
            raise NotFound("job", job_id)
        async with self._connection() as conn, conn.transaction():
            current = await conn.fetchrow(sql.LOCK_JOB, tenant_id, job_id)
            if current is None:
                raise NotFound("job", job_id)
            before = JobState(current["state"])
            if before is state:  # nothing changes: no version bump, no audit row
                unchanged = await conn.fetchrow(sql.GET_JOB, tenant_id, job_id)
                assert unchanged is not None  # the row is locked
                return rows.job(unchanged)
            if before is JobState.CANCELLED:
                raise Conflict("state", "the job is cancelled; create a new job instead")
            details = {"from": before.value, "to": state.value}
            action = _state_action(before, state)
            args = (job_id, state.value, next_fire_at, now, action, actor, details)
            row = await conn.fetchrow(sql.SET_JOB_STATE, *args)
            if runs:
                await conn.fetchrow(
                    sql.INSERT_RUNS, *rows.new_run_columns(runs), now, *rows.new_run_keys(runs)
                )
        assert row is not None  # the row is locked: the update cannot miss it
        return rows.job(row)

    async def enqueue_runs(
        self,
        template: NewRun,
        payloads: Sequence[str | None],
        keys: Sequence[str | None] | None = None,
    ) -> list[int]:
        if not payloads:
            return []
        job_id = template.job_id
        if not rows.is_uuid(job_id):
            raise NotFound("job", job_id)
        t = template
        args = (
            *(t.tenant_id, job_id, t.scheduled_for, t.available_at, t.pool, int(t.priority)),
            *(t.max_attempts, t.job_version, t.reason, t.overlap.value),
        )
        ids: list[int] = []
        async with self._connection() as conn, conn.transaction():
            job = await conn.fetchrow(sql.LOCK_JOB, t.tenant_id, job_id)
            if job is None:
                raise NotFound("job", job_id)
            check_enqueue_target(job["state"], job["version"], t)
            for i in range(0, len(payloads), ENQUEUE_CHUNK):
                chunk = payloads[i : i + ENQUEUE_CHUNK]
                chunk_keys = (
                    [t.concurrency_key] * len(chunk)
                    if keys is None
                    else list(keys[i : i + ENQUEUE_CHUNK])
                )
                row = await conn.fetchrow(
                    sql.ENQUEUE_RUNS, *args, chunk, chunk_keys, t.concurrency_limit
                )
                assert row is not None  # an aggregate always returns its row
                ids.extend(row["ids"])
        return ids

    # -- pipelines ---------------------------------------------------------------------
    async def create_pipeline(self, pipeline: Pipeline, *, actor: str) -> None:
        async with self._connection() as conn:
            await pipelines.create(conn, pipeline, actor)

    async def get_pipeline(
        self, tenant_id: str, pipeline_id: str, *, version: int | None = None
    ) -> Pipeline | None:
        async with self._connection() as conn:
            return await pipelines.get(conn, tenant_id, pipeline_id, version)

    async def list_pipelines(
        self,
        tenant_id: str,
        *,
        name: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> list[Pipeline]:
        async with self._connection() as conn:
            return await pipelines.list_live(conn, tenant_id, name, after, limit)

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
        async with self._connection() as conn:
            return await pipelines.update(
                conn, tenant_id, pipeline_id, definition, fingerprint, expected_version, now, actor
            )

    async def delete_pipeline(
        self, tenant_id: str, pipeline_id: str, *, now: datetime, actor: str
    ) -> Pipeline:
        async with self._connection() as conn:
            return await pipelines.delete(conn, tenant_id, pipeline_id, now, actor)

    async def list_pipeline_versions(
        self, tenant_id: str, pipeline_id: str, *, before: int | None = None, limit: int = 100
    ) -> list[PipelineVersion]:
        async with self._connection() as conn:
            return await pipelines.versions(conn, tenant_id, pipeline_id, before, limit)

    # -- pipeline runs -----------------------------------------------------------------
    async def start_pipeline_run(self, start: PipelineRunStart) -> PipelineRun:
        async with self._connection() as conn:
            async with conn.transaction():
                found = await pipeline_runs.start(conn, start)
            got = await pipeline_runs.get(conn, start.tenant_id, found)
        if got is None:
            raise NotFound("pipeline_run", found)
        return got

    async def get_pipeline_run(self, tenant_id: str, pipeline_run_id: str) -> PipelineRun | None:
        if not rows.is_uuid(pipeline_run_id):
            return None
        async with self._connection() as conn:
            return await pipeline_runs.get(conn, tenant_id, pipeline_run_id)

    async def list_pipeline_runs(
        self,
        tenant_id: str,
        *,
        pipeline_id: str | None = None,
        state: str | None = None,
        before: str | None = None,
        limit: int = 100,
    ) -> list[PipelineRun]:
        for value in (pipeline_id, before):
            if value is not None and not rows.is_uuid(value):
                return []
        found = await self._fetch(pipeline_runs.LIST, tenant_id, pipeline_id, before, state, limit)
        return [pipeline_runs.pipeline_run(r) for r in found]

    async def cancel_pipeline_run(
        self, tenant_id: str, pipeline_run_id: str, *, now: datetime, actor: str
    ) -> PipelineRun:
        if not rows.is_uuid(pipeline_run_id):
            raise NotFound("pipeline_run", pipeline_run_id)
        async with self._connection() as conn:
            async with conn.transaction():
                if not await pipeline_runs.cancel(conn, tenant_id, pipeline_run_id, now=now):
                    raise NotFound("pipeline_run", pipeline_run_id)
            got = await pipeline_runs.get(conn, tenant_id, pipeline_run_id)
        assert got is not None
        return got

    async def retry_pipeline_task(
        self, tenant_id: str, pipeline_run_id: str, task: str, *, now: datetime, actor: str
    ) -> PipelineRun:
        if not rows.is_uuid(pipeline_run_id):
            raise NotFound("pipeline_run", pipeline_run_id)
        async with self._connection() as conn:
            async with conn.transaction():
                why = await pipeline_runs.retry_task(
                    conn,
                    tenant_id,
                    pipeline_run_id,
                    task,
                    now=now,
                    actor=actor,
                    replay=sql.REPLAY_RUNS,
                )
            if why == "not_found":
                raise NotFound("pipeline_run", pipeline_run_id)
            if why == "not_found_task":
                raise NotFound("task", task)
            if why is not None:
                raise Conflict("task", why)
            got = await pipeline_runs.get(conn, tenant_id, pipeline_run_id)
        assert got is not None
        return got

    async def reseal_pipelines(
        self, reseal: Callable[[str, Mapping[str, Any]], Mapping[str, Any] | None]
    ) -> tuple[int, int]:
        versions = runs = 0
        async with self._connection() as conn, conn.transaction():
            for row in await conn.fetch(pipeline_runs.VERSIONS_FOR_RESEAL):
                definition = resealed_definition(
                    row["tenant_id"], json.loads(row["definition"]), reseal
                )
                if definition is not None:
                    await conn.execute(
                        "UPDATE pipeline_versions SET definition = $3::jsonb"
                        " WHERE pipeline_id = $1 AND version = $2",
                        row["pipeline_id"],
                        row["version"],
                        definition,  # the jsonb codec encodes it
                    )
                    versions += 1
            for row in await conn.fetch(pipeline_runs.RUNS_FOR_RESEAL):
                spec = resealed_spec(row["tenant_id"], json.loads(row["task_spec"]), reseal)
                if spec is not None:
                    await conn.execute(
                        "UPDATE runs SET task_spec = $2::jsonb WHERE id = $1", row["id"], spec
                    )
                    runs += 1
        return versions, runs

    async def advance_pipelines(self, *, now: datetime, limit: int = 100) -> int:
        found = [r[0] for r in await self._fetch(pipeline_runs.STALLED, limit)]
        for pipeline_run_id in found:
            async with self._connection() as conn, conn.transaction():
                await pipeline_runs.advance_ended(conn, [pipeline_run_id], now=now)
        return len(found)

    # -- scheduler -------------------------------------------------------------------
    async def fetch_due_jobs(
        self,
        until: datetime,
        *,
        limit: int,
        shards: Sequence[int] | None = None,
        shard_count: int = 1,
    ) -> list[Job]:
        select = _due(until, shards, shard_count)
        found = await self._fetch(*select.round_robin("tenant_id", ("next_fire_at", "id"), limit))
        return [rows.job(r) for r in found]

    async def count_due_jobs(
        self,
        until: datetime,
        *,
        limit: int,
        shards: Sequence[int] | None = None,
        shard_count: int = 1,
    ) -> int:
        row = await self._one(*_due(until, shards, shard_count).count(limit))
        return int(row[0])

    async def materialize_runs(
        self,
        runs: Sequence[NewRun],
        advances: Sequence[JobAdvance],
        *,
        guard: ShardGuard | None = None,
    ) -> MaterializeResult:
        if not runs and not advances:
            return MaterializeResult(inserted=0, advanced=0)
        row: asyncpg.Record | None
        if guard is None:
            args = [
                *rows.new_run_columns(runs),
                *rows.target_columns(runs, advances),
                *rows.new_run_keys(runs),
            ]
            row = await self._one(sql.MATERIALIZE_RUNS, *args)
        else:
            row, runs, advances = await self._guarded_materialize(guard, runs, advances)
        advanced = set(row["advanced"]) if row is not None else set()
        stale = list(dict.fromkeys(a.job_id for a in advances if a.job_id not in advanced))
        inserted = row["inserted"] if row is not None else 0
        return MaterializeResult(inserted=inserted, advanced=len(advanced), stale_jobs=stale)

    async def _guarded_materialize(
        self, guard: ShardGuard, runs: Sequence[NewRun], advances: Sequence[JobAdvance]
    ) -> tuple[asyncpg.Record | None, Sequence[NewRun], Sequence[JobAdvance]]:
        """The guard and the write in one transaction; refused jobs count as stale."""
        async with self._connection() as conn, conn.transaction():
            valid = await _shards.valid_shards(conn, guard)
            mine, theirs, refused = guarded(guard, valid, runs, advances)
            row = None
            if mine or theirs:
                args = [
                    *rows.new_run_columns(mine),
                    *rows.target_columns(mine, theirs),
                    *rows.new_run_keys(mine),
                ]
                row = await conn.fetchrow(sql.MATERIALIZE_RUNS, *args)
        refused_set = set(refused)
        return row, mine, [*theirs, *(a for a in advances if a.job_id in refused_set)]

    # -- shards ----------------------------------------------------------------------
    async def acquire_shards(
        self, holder: str, shards: Sequence[int], *, now: datetime, ttl_seconds: float
    ) -> list[ShardLease]:
        if not shards:
            return []
        async with self._connection() as conn, conn.transaction():
            await conn.execute(_shards.ACQUIRE, holder, list(shards), now, ttl_seconds)
            found = await conn.fetch(_shards.HELD, holder, list(shards))
        return [_shards.lease(r) for r in found]

    async def release_shards(self, holder: str, shards: Sequence[int]) -> None:
        if shards:
            await self._execute(_shards.RELEASE, holder, list(shards))

    async def read_gauges(self, *, now: datetime, workers_seen_since: datetime) -> GaugeReading:
        found = await self._fetch(_gauges.READ_GAUGES, now, workers_seen_since, SCHEDULER_TENANT)
        return _gauges.reading(found, now)

    async def list_shard_leases(self) -> list[ShardLease]:
        return [_shards.lease(r) for r in await self._fetch(_shards.ALL)]

    # -- pool rate limits -------------------------------------------------------------
    async def set_pool_rate(self, pool: str, per_second: float | None, *, now: datetime) -> None:
        if per_second is None:
            await self._execute("DELETE FROM pool_rates WHERE pool = $1", pool)
        else:
            await self._execute(sql.SET_POOL_RATE, pool, per_second, now)

    async def pool_rates(self) -> dict[str, float]:
        rows_ = await self._fetch("SELECT pool, per_second FROM pool_rates ORDER BY pool")
        return {r["pool"]: r["per_second"] for r in rows_}

    async def take_pool_tokens(self, pool: str, want: int, *, now: datetime) -> int | None:
        row = await self._fetchrow(sql.TAKE_POOL_TOKENS, pool, want, now)
        return None if row is None else int(row["n"])

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
        urgent: bool = False,
    ) -> Claim:
        """One statement: apply overlap policies, share the batch fairly among tenants,
        lock with SKIP LOCKED, lease, and join each run's job.

        Pools whose runs use none of that (one tenant, uncapped, no concurrency key, no
        overlap policy) are claimed by the lean statement, which checks so itself and
        claims nothing when it finds otherwise; the full one then runs (decision 0047)."""
        if not pools or limit <= 0:
            return Claim()
        unique_pools = list(dict.fromkeys(pools))  # one index scan per pool, not two
        aging = max(priority_aging_seconds, 1e-6)  # a period, never zero: it divides
        args = (worker_id, unique_pools, prefetch_until, limit, now, lease_seconds)
        if urgent:  # planned at every claim, as a tenant's claim is on the pool's
            async with self._urgent_connection() as conn:
                return await self._claim_on(conn, *args, tenant_id, aging, started)
        async with self._connection() as conn:
            await conn.execute(_CLAIM_PLANS[tenant_id is None])
            return await self._claim_on(conn, *args, tenant_id, aging, started)

    async def _claim_on(
        self,
        conn: Connection,
        worker_id: str,
        unique_pools: list[str],
        prefetch_until: datetime,
        limit: int,
        now: datetime,
        lease_seconds: float,
        tenant_id: str | None,
        aging: float,
        started: bool,
    ) -> Claim:
        """claim_runs' statements on ``conn`` (its plan cache mode set)."""
        shape = (tuple(unique_pools), tenant_id)
        if self._lean_claims and self._claim_shapes.get(shape, True):
            found = await conn.fetch(
                _lean.CLAIM_RUNS_LEAN,
                worker_id,
                unique_pools,
                prefetch_until,
                limit,
                now,
                lease_seconds,
                tenant_id,
                aging,
                started,
            )
            if found[0]["lean"]:
                self.claims_by_statement["lean"] += 1
                return Claim(rows.claimed(r) for r in found if r["id"] is not None)
        found = await conn.fetch(
            sql.CLAIM_RUNS,
            worker_id,
            unique_pools,
            prefetch_until,
            limit,
            now,
            lease_seconds,
            REASON_OVERLAP_SKIP,
            tenant_id,
            aging,
            started,
        )
        self.claims_by_statement["full"] += 1
        # Always at least one row, carrying the skip count and whether the lean claim
        # would have done; with nothing claimed, its run columns are NULL.
        if len(self._claim_shapes) >= _CLAIM_SHAPES:
            self._claim_shapes.clear()  # a bound on a dict of hints, each cheap to relearn
        self._claim_shapes[shape] = found[0]["lean"]
        return Claim(
            (rows.claimed(r) for r in found if r["id"] is not None),
            overlap_skipped=found[0]["overlap_skipped"],
        )

    async def heartbeat(
        self,
        worker_id: str,
        leases: Sequence[tuple[int, int]],
        *,
        now: datetime,
        lease_seconds: float,
        reports: Sequence[RunReport] = (),
    ) -> HeartbeatResult:
        if not leases:
            return HeartbeatResult(extended=[], lost=[], cancel_requested=[])
        ordered = sorted(leases)  # ascending run id: the order rows are locked in
        ids, fences = [run_id for run_id, _ in ordered], [fence for _, fence in ordered]
        if reports:
            # The reports ride in the lease rows: stored under their fence, or not at all.
            by_run = {r.run_id: r for r in reports}
            told = [by_run.get(run_id) for run_id in ids]
            found = await self._fetch(
                sql.HEARTBEAT_WITH_REPORTS,
                worker_id,
                ids,
                fences,
                now,
                lease_seconds,
                [None if t is None else t.progress for t in told],
                [None if t is None else t.progress_message for t in told],
                [None if t is None else t.checkpoint for t in told],
            )
        else:
            found = await self._fetch(sql.HEARTBEAT, worker_id, ids, fences, now, lease_seconds)
        held = {r["id"]: r["cancel_requested"] for r in found}
        return HeartbeatResult(
            extended=[run_id for run_id, _ in leases if run_id in held],
            lost=[run_id for run_id, _ in leases if run_id not in held],
            cancel_requested=[run_id for run_id, _ in leases if held.get(run_id)],
        )

    async def mark_started(self, worker_id: str, starts: Sequence[Start]) -> list[int]:
        if not starts:
            return []
        # Ascending run id, the order rows are locked in; a run given twice, its first.
        ordered = sorted({s.run_id: s for s in reversed(starts)}.values(), key=lambda s: s.run_id)
        found = await self._fetch(
            sql.MARK_STARTED,
            worker_id,
            [s.run_id for s in ordered],
            [s.fence for s in ordered],
            [s.started_at for s in ordered],
        )
        marked = {r["id"] for r in found}
        return list(dict.fromkeys(s.run_id for s in starts if s.run_id in marked))

    async def complete_runs(self, completions: Sequence[Completion]) -> list[int]:
        if not completions:
            return []
        if any(c.pipeline_run_id is not None for c in completions):
            # Pipeline tasks: the tasks an ending satisfied start in its transaction.
            async with self._connection() as conn, conn.transaction():
                row = await conn.fetchrow(sql.COMPLETE_RUNS, *rows.completion_columns(completions))
                assert row is not None
                accepted = set(row["accepted"])
                ended = [
                    c
                    for c in completions
                    if c.pipeline_run_id is not None and c.run_id in accepted and c.state.finished
                ]
                if ended:
                    await pipeline_runs.advance_ended(
                        conn,
                        [c.pipeline_run_id for c in ended if c.pipeline_run_id is not None],
                        now=max(c.finished_at for c in ended),
                    )
            return list(dict.fromkeys(c.run_id for c in completions if c.run_id in accepted))
        row = await self._one(sql.COMPLETE_RUNS, *rows.completion_columns(completions))
        accepted = set(row["accepted"])
        return list(dict.fromkeys(c.run_id for c in completions if c.run_id in accepted))

    async def release_runs(self, releases: Sequence[Release], *, now: datetime) -> ReleaseResult:
        if not releases:
            return ReleaseResult(retried=[], dead=[], cancelled=[])
        ordered = sorted(releases, key=lambda r: r.run_id)  # the order rows are locked in
        row = await self._one(
            sql.RELEASE_RUNS,
            [r.run_id for r in ordered],
            [r.fence for r in ordered],
            [r.worker_id for r in ordered],
            [r.started for r in ordered],
            [r.why for r in ordered],
            now,
            REASON_AT_MOST_ONCE_STOPPED,
        )
        return ReleaseResult(
            retried=list(row["retried"]), dead=list(row["dead"]), cancelled=list(row["cancelled"])
        )

    # -- maintenance -----------------------------------------------------------------
    async def rescue_expired(self, *, now: datetime, limit: int = 1000) -> RescueResult:
        row = await self._one(
            sql.RESCUE_EXPIRED, now, limit, REASON_AT_MOST_ONCE_LOST, REASON_LEASE_LOST_LAST
        )
        return _rescued(row)

    async def rescue_runs_of_dead_owner(
        self, owners: Sequence[str], *, now: datetime, limit: int = 1000
    ) -> RescueResult:
        if not owners:
            return RescueResult(retried=[], dead=[], cancelled=[])
        row = await self._one(
            sql.RESCUE_DEAD_OWNERS,
            now,
            limit,
            REASON_AT_MOST_ONCE_LOST,
            REASON_LEASE_LOST_LAST,
            list(owners),
        )
        return _rescued(row)

    async def archive_runs(
        self,
        *,
        now: datetime,
        settle_seconds: float = 10.0,
        partition_seconds: float = 86_400.0,
        partitions_ahead: int = 3,
        limit: int = 5_000,
    ) -> int:
        async with self._connection() as conn:
            return await _history.archive(
                conn,
                now=now,
                settle=timedelta(seconds=settle_seconds),
                width=timedelta(seconds=partition_seconds),
                ahead=partitions_ahead,
                limit=limit,
            )

    async def vacuum_live_tables(
        self, *, min_dead_tuples: int = 10_000, dead_fraction: float = 0.2
    ) -> list[Vacuum]:
        async with self._connection() as conn:
            return await _vacuum.vacuum_live_tables(
                conn, min_dead_tuples=min_dead_tuples, dead_fraction=dead_fraction
            )

    async def delete_history(self, *, before: datetime, limit: int = 10_000) -> int:
        async with self._connection() as conn:
            await _history.drop_partitions(conn, before=before)
            deleted = int(await conn.fetchval(sql.DELETE_HISTORY, before, limit))
            deleted += await _history.delete_default(conn, before=before, limit=limit)
            await conn.execute(sql.DELETE_PIPELINE_HISTORY, before, limit)
        return deleted

    # -- notifications -----------------------------------------------------------------
    async def claim_notifications(
        self, *, now: datetime, limit: int, lease_seconds: float
    ) -> list[Notification]:
        found = await self._fetch(sql.CLAIM_NOTIFICATIONS, now, limit, lease_seconds)
        return sorted((rows.notification(r) for r in found), key=lambda n: n.id)

    async def finish_notifications(
        self, results: Sequence[NotificationResult], *, now: datetime
    ) -> list[int]:
        if not results:
            return []
        ordered = sorted(results, key=lambda r: r.id)
        found = await self._fetch(
            sql.FINISH_NOTIFICATIONS,
            [r.id for r in ordered],
            [r.tries for r in ordered],
            [r.delivered for r in ordered],
            [r.error for r in ordered],
            [r.retry_at for r in ordered],
            now,
        )
        return sorted(r["id"] for r in found)

    async def list_notifications(
        self,
        tenant_id: str,
        *,
        state: NotificationState | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[Notification]:
        select = sql.Select("notifications", ("tenant_id = {}", tenant_id))
        if state is not None:
            select.add("state = {}", state.value)
        if before_id is not None:
            if not rows.is_run_id(before_id):
                return []
            select.add("id < {}", before_id)
        found = await self._fetch(*select.query("id DESC", limit))
        return [rows.notification(r) for r in found]

    async def replay_notifications(
        self, tenant_id: str, ids: Sequence[int], *, now: datetime
    ) -> list[int]:
        wanted = [i for i in ids if rows.is_run_id(i)]
        if not wanted:
            return []
        found = await self._fetch(sql.REPLAY_NOTIFICATIONS, tenant_id, wanted, now)
        replayed = {r["id"] for r in found}
        return list(dict.fromkeys(i for i in ids if i in replayed))

    async def delete_notifications(self, *, before: datetime, limit: int = 10_000) -> int:
        status = await self._execute(sql.DELETE_NOTIFICATIONS, before, limit)
        return int(status.rsplit(" ", 1)[-1])

    # -- run control -----------------------------------------------------------------
    async def cancel_run(self, tenant_id: str, run_id: int, *, now: datetime, actor: str) -> Run:
        if not rows.is_run_id(run_id):
            raise NotFound("run", run_id)
        async with self._connection() as conn, conn.transaction():
            current = await conn.fetchrow(sql.LOCK_RUN, tenant_id, run_id)
            if current is None:
                # Archived (decision 0032): finished, so there is nothing to cancel.
                archived = await conn.fetchrow(sql.GET_RUN, tenant_id, run_id)
                if archived is None:
                    raise NotFound("run", run_id)
                return rows.run(archived)
            verdict = lifecycle.cancel(
                decode.RUN_STATES[current["state"]], current["cancel_requested"]
            )
            if verdict is lifecycle.CancelVerdict.CANCEL:
                reason = lifecycle.cancel_reason(actor)
                row = await conn.fetchrow(sql.CANCEL_PENDING_RUN, run_id, now, reason, actor)
            elif verdict is lifecycle.CancelVerdict.ASK:
                row = await conn.fetchrow(sql.REQUEST_CANCEL, run_id, now, actor)
            else:
                row = await conn.fetchrow(sql.GET_RUN, tenant_id, run_id)
        assert row is not None  # the row is locked: it cannot disappear
        return rows.run(row)

    async def replay_runs(
        self,
        tenant_id: str,
        run_ids: Sequence[int],
        *,
        extra_attempts: int,
        now: datetime,
        actor: str,
    ) -> list[int]:
        ids = [r for r in run_ids if rows.is_run_id(r)]
        if not ids:
            return []
        replayed: set[int] = set()
        async with self._connection() as conn, conn.transaction():
            # The live ones first: one that maintenance is archiving meanwhile is waited
            # for, then found gone; the next statement sees it in history and brings it
            # back (with its attempts and id) to be replayed like the others.
            reason = lifecycle.replay_reason(actor)
            row = await conn.fetchrow(
                sql.REPLAY_RUNS, tenant_id, ids, now, extra_attempts, actor, reason
            )
            assert row is not None  # an aggregate always returns its row
            replayed.update(row["replayed"])
            rest = [r for r in ids if r not in replayed]
            if rest and await _history.restore_dead(conn, tenant_id, rest):
                row = await conn.fetchrow(
                    sql.REPLAY_RUNS, tenant_id, rest, now, extra_attempts, actor, reason
                )
                assert row is not None
                replayed.update(row["replayed"])
        return list(dict.fromkeys(r for r in run_ids if r in replayed))

    # -- reads -----------------------------------------------------------------------
    async def get_run(self, tenant_id: str, run_id: int) -> Run | None:
        if not rows.is_run_id(run_id):
            return None
        row = await self._fetchrow(sql.GET_RUN, tenant_id, run_id)
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
        if job_id is not None and not rows.is_uuid(job_id):
            return []
        select = sql.Select("all_runs", ("tenant_id = {}", tenant_id))
        if job_id is not None:
            select.add("job_id = {}::uuid", job_id)
        if state is not None:
            select.add("state = {}", state.value)
        if before_id is not None and job_id is not None:
            cursor = "scheduled_for < (SELECT scheduled_for FROM all_runs WHERE id = {}::bigint)"
            select.add(cursor, before_id)
        elif before_id is not None:
            select.add("id < {}::bigint", before_id)
        order_by = "id DESC" if job_id is None else "scheduled_for DESC"
        found = await self._fetch(*select.query(order_by, limit))
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
        if job_id is not None and not rows.is_uuid(job_id):
            return []
        select = sql.Select("all_runs r", ("r.tenant_id = {}", tenant_id))
        select.where.append("r.state = 'dead'")
        if pool is not None:
            select.add("r.pool = {}", pool)
        if job_id is not None:
            select.add("r.job_id = {}::uuid", job_id)
        if died_since is not None:
            select.add("r.finished_at >= {}", died_since)
        if before_id is not None:
            select.add("r.id < {}::bigint", before_id)
        found = await self._fetch(*sql.dead_page(select, limit))
        return [
            DeadRun(rows.run(r), r["job_name"], r["last_class"], r["last_message"]) for r in found
        ]

    async def list_attempts(self, tenant_id: str, run_id: int) -> list[Attempt]:
        if not rows.is_run_id(run_id):
            return []
        found = await self._fetch(sql.LIST_ATTEMPTS, tenant_id, run_id)
        return [rows.attempt(r) for r in found]

    async def list_activity(
        self,
        *,
        after_attempt: int,
        finished_since: datetime,
        waiting_before: datetime | None = None,
        limit: int = 500,
    ) -> Activity:
        # One snapshot: an attempt and the run it ended were written in one transaction.
        async with self._connection() as conn, conn.transaction(isolation="repeatable_read"):
            attempts = [
                rows.attempt(r)
                for r in await conn.fetch(sql.ACTIVITY_ATTEMPTS, after_attempt, limit)
            ]
            ids = sorted({a.run_id for a in attempts})
            of_attempts = {
                r["id"]: rows.run(r) for r in await conn.fetch(sql.ACTIVITY_RUNS_BY_ID, ids)
            }
            running = await conn.fetch(sql.ACTIVITY_RUNNING, limit)
            closed = await conn.fetch(sql.ACTIVITY_CLOSED, finished_since, limit)
            waiting = (
                []
                if waiting_before is None
                else await conn.fetch(sql.ACTIVITY_WAITING, waiting_before, limit)
            )
            latest = await conn.fetchval(sql.ACTIVITY_LATEST)
        return Activity(
            attempts=attempts,
            runs_of_attempts=of_attempts,
            running=[rows.run(r) for r in running],
            closed=[rows.run(r) for r in closed],
            waiting=[rows.run(r) for r in waiting],
            latest_attempt=int(latest),
        )

    async def list_audit(self, tenant_id: str, entity_id: str) -> list[AuditEntry]:
        found = await self._fetch(sql.LIST_AUDIT, tenant_id, str(entity_id))
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
        async with self._connection() as conn:
            return await audit.list_entries(
                conn, tenant_id, actor, entity, since, until, before, limit
            )

    async def replace_job_actions(
        self,
        tenant_id: str,
        changes: Sequence[JobSecrets],
        *,
        actor: str,
        now: datetime,
    ) -> int:
        async with self._connection() as conn:
            return await audit.replace_job_actions(conn, tenant_id, changes, actor, now)

    # -- status ----------------------------------------------------------------------
    async def key_running(self, tenant_id: str, key: str) -> tuple[int, int | None]:
        row = await self._fetchrow(sql.KEY_RUNNING, tenant_id, key)
        assert row is not None  # an aggregate always returns its row
        return int(row[0]), row[1]

    async def replication(self) -> Replication:
        row = await self._one(_status.REPLICATION)
        return Replication.of(row["names"], row["commit"], list(row["states"] or ()))

    async def pool_status(
        self, tenant_id: str | None, *, now: datetime, since: datetime
    ) -> list[PoolStatus]:
        async with self._connection() as conn, conn.transaction(readonly=True):
            due = await conn.fetch(_status.DUE, tenant_id, now)
            running = await conn.fetch(_status.RUNNING, tenant_id)
            dead = await conn.fetch(_status.DEAD, tenant_id)
            recent = await conn.fetch(_status.RECENT, tenant_id, now, since)
        return status.merge(*([dict(r) for r in part] for part in (due, running, dead, recent)))

    async def attempt_history(
        self, tenant_id: str | None, *, since: datetime, now: datetime, bucket_seconds: int
    ) -> list[AttemptBucket]:
        width = status.bucket_micros(since, now, bucket_seconds)
        found = await self._fetch(_status.HISTORY, tenant_id, now, since, width)
        return status.buckets(dict(r) for r in found)

    async def count_jobs_by_state(self, tenant_id: str) -> dict[JobState, int]:
        found = await self._fetch(_status.JOBS_BY_STATE, tenant_id)
        return {JobState(r["state"]): int(r["n"]) for r in found}

    async def list_live_workers(self, *, seen_since: datetime) -> list[WorkerInfo]:
        return [rows.worker(r) for r in await self._fetch(_status.LIVE_WORKERS, seen_since)]

    async def runs_around(
        self, tenant_id: str, job_id: str, instant: datetime
    ) -> tuple[Run | None, Run | None]:
        if not rows.is_uuid(job_id):
            return None, None
        before = await self._fetchrow(_status.RUN_AT_OR_BEFORE, tenant_id, job_id, instant)
        after = await self._fetchrow(_status.RUN_AFTER, tenant_id, job_id, instant)
        return (
            None if before is None else rows.run(before),
            None if after is None else rows.run(after),
        )

    # -- wake-ups --------------------------------------------------------------------
    async def notify(self, topic: str) -> None:
        async with self._connection() as conn:
            await conn.execute(sql.NOTIFY, topic)

    async def wait(self, topics: Sequence[str], timeout: float) -> bool:
        """Wait on the store's own LISTEN connection, opened at the first wait."""
        if not topics:
            # Nothing can wake this wait; sleeping keeps a caller's poll loop from spinning.
            await asyncio.sleep(max(timeout, 0.0))
            return False
        return await self._listener.wait(topics, timeout)

    def notified_tenants(self, topics: Sequence[str]) -> frozenset[str] | None:
        """The tenants an enqueue's notification names (see ``_listen``)."""
        return self._listener.take_tenants(topics)


async def _check_max_jobs(conn: Connection, jobs: Sequence[Job]) -> None:
    """Refuse (OverLimit) jobs that would take a tenant past its max_jobs, inside the
    create's transaction; tenants in id order, so two creates never lock in a cycle."""
    per_tenant: dict[str, int] = {}
    for job in jobs:
        per_tenant[job.tenant_id] = per_tenant.get(job.tenant_id, 0) + 1
    for tenant_id in sorted(per_tenant):
        limit = await conn.fetchval(sql.LOCK_MAX_JOBS, tenant_id)
        if limit is None:
            continue
        # Counted no further than one past the quota: enough to decide (issue 18: a full
        # count of a tenant's ten million jobs took seconds on every create).
        live: int = await conn.fetchval(sql.COUNT_LIVE_JOBS, tenant_id, limit + 1)
        if live + per_tenant[tenant_id] > limit:
            raise max_jobs_refusal(live, per_tenant[tenant_id], limit)


def _rescued(row: asyncpg.Record) -> RescueResult:
    return RescueResult(
        retried=list(row["retried"]),
        dead=list(row["dead"]),
        cancelled=list(row["cancelled"]),
        unstarted=list(row["unstarted"]),
    )


def _state_action(before: JobState, after: JobState) -> str:
    """The audit action of a state change: its new state's name, but "resumed" for
    paused → active."""
    if before is JobState.PAUSED and after is JobState.ACTIVE:
        return "resumed"
    return after.value


def _due(until: datetime, shards: Sequence[int] | None, shard_count: int) -> sql.Select:
    """The jobs due by ``until`` (of ``shards``)."""
    select = sql.Select("jobs", ("state = 'active' AND next_fire_at <= {}", until))
    if shards is not None:
        select.add(f"shard_key % {int(shard_count)} = ANY({{}}::int[])", list(shards))
    return select


__all__ = ["PostgresStore"]
