"""What only the PostgreSQL store does: wake-ups across processes, concurrent claimers on
many connections, concurrent migrators and schedulers, and surviving a lost connection.

The conformance suite proves the contract on every backend; these tests prove the parts
that exist only when several connections, or several store instances (processes), share
one PostgreSQL database.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import asyncpg
import pytest

from cronwheel.core.model import AttemptOutcome, Overlap, RunState, Tenant
from cronwheel.errors import NotFound, StoreUnavailable
from cronwheel.store.base import Completion, JobAdvance, Start
from cronwheel.store.conformance.factories import T0, at, make_job, make_run
from cronwheel.store.migrate import fresh_schema, migrations
from cronwheel.store.postgres import PostgresStore, _gauges, _rows
from cronwheel.store.postgres import _sql as sql
from tests import pg

pytestmark = pytest.mark.postgres

T = TypeVar("T")

MANUAL = {"kind": "manual"}

ADMIN_DSN = os.environ.get("CRONWHEEL_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    # A fresh loop in a thread: works whether or not the caller's loop is running.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _admin(statement: str) -> None:
    conn = await asyncpg.connect(ADMIN_DSN, timeout=5)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def _dsn_of(database: str) -> str:
    return f"{ADMIN_DSN.rpartition('/')[0]}/{database}"


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    """A database of this module's own, dropped at the end."""
    try:
        _run(_admin("SELECT 1"))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        reason = f"PostgreSQL unreachable at {ADMIN_DSN}: {exc}"
        if pg.REQUIRED:  # CI must run the PostgreSQL suites, never skip them
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    name = f"cronwheel_pgspec_{uuid.uuid4().hex[:12]}"
    _run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield _dsn_of(name)
    finally:
        _run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[PostgresStore]:
    """A migrated, emptied store (shadows the parametrised conformance fixture)."""
    s = await PostgresStore.connect(dsn)
    await s.migrate()
    await s.truncate_all_for_tests()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def other(dsn: str) -> AsyncIterator[PostgresStore]:
    """A second store on the same database: another process's view."""
    s = await PostgresStore.connect(dsn)
    try:
        yield s
    finally:
        await s.close()


async def test_a_run_materialised_by_one_store_wakes_a_waiter_of_another(
    store: PostgresStore, other: PostgresStore
) -> None:
    job = make_job(pool="mail")
    await store.create_jobs([job])
    assert await other.wait(["runs:mail"], timeout=0.01) is False  # now listening
    waiter = asyncio.create_task(other.wait(["runs:reports", "runs:mail"], timeout=30))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await store.materialize_runs([make_run(job, at(0))], [])
    assert await asyncio.wait_for(waiter, 10) is True


async def test_a_pool_name_too_long_for_a_channel_still_wakes(
    store: PostgresStore, other: PostgresStore
) -> None:
    job = make_job(pool="p" * 80)  # 'runs:' + 80 bytes: longer than an identifier
    await store.create_jobs([job])
    topic = f"runs:{job.pool}"
    assert await other.wait([topic], timeout=0.01) is False
    waiter = asyncio.create_task(other.wait([topic], timeout=30))
    await asyncio.sleep(0.05)
    await store.materialize_runs([make_run(job, at(0))], [])
    assert await asyncio.wait_for(waiter, 10) is True
    await store.notify(topic)
    assert await other.wait([topic], timeout=10) is True


async def test_unknown_tenants_and_jobs_are_not_found(store: PostgresStore) -> None:
    with pytest.raises(NotFound) as err:
        await store.create_jobs([make_job(tenant_id="nobody")])
    assert (err.value.what, err.value.ident) == ("tenant", "nobody")
    ghost = make_job()
    with pytest.raises(NotFound) as err:
        await store.create_jobs([], [make_run(ghost, at(0))])
    assert (err.value.what, err.value.ident) == ("job", ghost.id)


async def test_notify_reaches_every_waiter_of_the_topic(
    store: PostgresStore, other: PostgresStore
) -> None:
    assert await other.wait(["jobs"], timeout=0.01) is False
    waiters = [asyncio.create_task(other.wait(["jobs"], timeout=30)) for _ in range(3)]
    await asyncio.sleep(0.05)
    await store.notify("jobs")
    assert await asyncio.wait_for(asyncio.gather(*waiters), 10) == [True, True, True]


async def test_a_notify_for_another_topic_does_not_wake(
    store: PostgresStore, other: PostgresStore
) -> None:
    assert await other.wait(["runs:a"], timeout=0.01) is False
    await store.notify("runs:b")
    assert await other.wait(["runs:a"], timeout=0.3) is False


async def test_a_lost_listen_connection_wakes_waiters_and_is_reopened(
    store: PostgresStore, other: PostgresStore
) -> None:
    assert await other.wait(["runs:default"], timeout=0.01) is False
    waiter = asyncio.create_task(other.wait(["runs:default"], timeout=30))
    await asyncio.sleep(0.05)
    async with store._connection() as conn:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE query LIKE 'LISTEN%' AND datname = current_database()"
        )
    # Notifications may have been missed while it was down: the waiter must poll now.
    assert await asyncio.wait_for(waiter, 10) is True
    assert await other.wait(["runs:default"], timeout=0.01) is False  # listening again
    again = asyncio.create_task(other.wait(["runs:default"], timeout=30))
    await asyncio.sleep(0.05)
    await store.notify("runs:default")
    assert await asyncio.wait_for(again, 10) is True


async def test_an_enqueues_notification_names_its_tenant(
    store: PostgresStore, other: PostgresStore
) -> None:
    # A worker's peek claims for the tenants its notifications named (decision 0037): an
    # enqueue names its own; any other wake-up names nobody, and the take says so.
    topic = "runs:default"
    jobs = {}
    for tenant in ("a", "b"):
        await store.ensure_tenant(tenant, tenant, now=T0)
        jobs[tenant] = make_job(tenant_id=tenant, schedule=MANUAL, next_fire_at=None)
    await store.create_jobs(list(jobs.values()))
    assert await other.wait([topic], timeout=0.01) is False  # listening
    assert other.notified_tenants([topic]) is None  # nothing came

    async def enqueue(tenant: str) -> None:
        await store.enqueue_runs(make_run(jobs[tenant], at(0)), [None])

    await enqueue("a")
    assert await other.wait([topic], timeout=10) is True
    assert other.notified_tenants([topic]) == {"a"}
    assert other.notified_tenants([topic]) is None  # taken

    await enqueue("b")
    await enqueue("a")
    await enqueue("b")
    assert await other.wait([topic], timeout=10) is True
    await _until(lambda: len(other._listener._told.get(topic) or ()) == 2)
    assert other.notified_tenants(["runs:other", topic]) == {"a", "b"}

    await enqueue("a")
    await store.materialize_runs([make_run(jobs["b"], at(60))], [])  # anyone's runs
    assert await other.wait([topic], timeout=10) is True
    await _until(lambda: other._listener._told.get(topic, set()) is None)
    assert other.notified_tenants([topic]) is None

    # Tenants named past the bound: a stream of many tenants' enqueues cannot grow the
    # set, and one fair claim then serves them all.
    async with store._connection() as conn:
        await conn.execute(
            "SELECT pg_notify('runs:default', 't' || g) FROM generate_series(1, 9) AS g"
        )
    assert await other.wait([topic], timeout=10) is True
    await _until(lambda: other._listener._told.get(topic, set()) is None)
    assert other.notified_tenants([topic]) is None


async def _until(check: Callable[[], bool]) -> None:
    """Notifications of one transaction each arrive in order, but not in one read."""
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not within 5 s")


async def test_concurrent_claimers_on_many_connections_share_without_overlap(
    store: PostgresStore, other: PostgresStore
) -> None:
    jobs = [make_job() for _ in range(50)]
    await store.create_jobs(jobs, [make_run(j, at(i % 7)) for i, j in enumerate(jobs)])
    for n in range(1, 4):  # more runs per job: 200 runs in all
        await store.materialize_runs([make_run(j, at(60 * n)) for j in jobs], [])

    async def claim(s: PostgresStore, worker: str) -> list[int]:
        got = await s.claim_runs(
            worker, ["default"], limit=15, now=at(0), prefetch_until=at(3600), lease_seconds=30
        )
        return [c.run.id for c in got]

    batches = await asyncio.gather(*(claim(s, f"w{i}") for i in range(8) for s in (store, other)))
    claimed = [run_id for batch in batches for run_id in batch]
    assert len(claimed) == len(set(claimed)) == 200
    runs = await store.list_runs("default", limit=1000)
    assert {r.state for r in runs} == {RunState.RUNNING}
    assert {r.fence for r in runs} == {1}


async def test_an_urgent_claim_waits_for_no_pooled_connection(dsn: str) -> None:
    # A saturated worker's claims and completions hold the pool's connections; its peek
    # at an enqueue (decision 0028) claims on a connection of its own.
    s = await PostgresStore.connect(dsn, max_size=1)
    try:
        await s.migrate()
        await s.truncate_all_for_tests()
        job = make_job()
        await s.create_jobs([job], [make_run(job, at(0)), make_run(job, at(1))])

        async def urgent() -> list[int]:
            got = await s.claim_runs(
                "w",
                ["default"],
                limit=1,
                now=at(5),
                prefetch_until=at(5),
                lease_seconds=30,
                started=False,
                urgent=True,
            )
            return [c.run.id for c in got]

        async with s._connection():  # the pool's only connection, busy
            first = await asyncio.wait_for(urgent(), 10)
        assert len(first) == 1
        # A lost connection is opened again: at worst the claim that finds it gone fails
        # (asyncpg may not have read the server's goodbye yet; the worker's peek loop
        # retries), never a later one.
        assert s._urgent is not None
        await _admin(f"SELECT pg_terminate_backend({s._urgent.get_server_pid()})")
        try:
            second = await urgent()
        except Exception:
            second = await urgent()
        assert len(second) == 1 and second != first
    finally:
        await s.close()


async def test_claim_skips_rows_locked_by_another_transaction(store: PostgresStore) -> None:
    job = make_job()
    await store.create_jobs([job], [make_run(job, at(0)), make_run(job, at(1))])
    [first, _] = sorted(r.id for r in await store.list_runs("default"))
    async with store._connection() as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", first)
        got = await asyncio.wait_for(
            store.claim_runs(
                "w", ["default"], limit=10, now=at(5), prefetch_until=at(5), lease_seconds=30
            ),
            5,
        )
    assert [c.run.id for c in got] == [first + 1]


@pytest.mark.parametrize("with_advances", [False, True])
async def test_racing_schedulers_insert_each_run_once(
    store: PostgresStore, other: PostgresStore, with_advances: bool
) -> None:
    # A shard changing hands: two schedulers materialise the same jobs, in any order.
    jobs = [make_job() for _ in range(100)]
    await store.create_jobs(jobs)
    runs = [make_run(j, at(60 * n)) for j in jobs for n in range(5)]
    advances = [
        JobAdvance(j.id, j.version, at(300), at(240), expected_next_fire_at=j.next_fire_at)
        for j in jobs
    ]
    if not with_advances:
        advances = []
    even = {j.id for j in jobs[::2]}
    for _ in range(3):
        results = await asyncio.gather(
            store.materialize_runs(runs, advances),
            other.materialize_runs(list(reversed(runs)), list(reversed(advances))),
            store.materialize_runs([r for r in runs if r.job_id in even], advances[::2]),
        )
        assert sum(r.inserted for r in results) == 500
        # Each job advanced once: whoever came second read it before the first advanced
        # it, and wrote nothing for it (compare-and-set on next_fire_at).
        assert sum(r.advanced for r in results) == (100 if with_advances else 0)
        assert sum(len(r.stale_jobs) for r in results) == (150 if with_advances else 0)
        await store.truncate_all_for_tests()
        await store.create_jobs(jobs)


async def test_concurrent_rescuers_rescue_each_run_once(
    store: PostgresStore, other: PostgresStore
) -> None:
    job = make_job()
    await store.create_jobs([job], [make_run(job, at(n)) for n in range(40)])
    await store.claim_runs(
        "w", ["default"], limit=100, now=at(40), prefetch_until=at(40), lease_seconds=10
    )
    results = await asyncio.gather(
        *(s.rescue_expired(now=at(100), limit=7) for _ in range(4) for s in (store, other))
    )
    rescued = [run_id for r in results for run_id in r.retried + r.dead]
    assert len(rescued) == len(set(rescued))
    rest = await store.rescue_expired(now=at(100))
    assert len(rescued) + len(rest.retried) == 40
    for run_id in rescued[:5]:
        [lost] = await store.list_attempts("default", run_id)
        assert (lost.outcome, lost.worker_id) == (AttemptOutcome.LOST, "w")


async def test_heartbeats_and_completions_of_one_worker_do_not_deadlock(
    store: PostgresStore,
) -> None:
    job = make_job()
    await store.create_jobs([job], [make_run(job, at(n)) for n in range(300)])
    claimed = await store.claim_runs(
        "w",
        ["default"],
        limit=300,
        now=at(300),
        prefetch_until=at(300),
        lease_seconds=30,
        started=False,
    )
    leases = [(c.run.id, c.run.fence) for c in claimed]
    done = [
        Completion(
            run_id=c.run.id,
            fence=c.run.fence,
            worker_id="w",
            state=RunState.SUCCEEDED,
            outcome=AttemptOutcome.SUCCEEDED,
            started_at=at(300),
            finished_at=at(301),
        )
        for c in claimed
    ]
    halves = [done[::2], list(reversed(done[1::2]))]
    starts = [Start(run_id, fence, at(300)) for run_id, fence in reversed(leases)]
    results = await asyncio.gather(
        store.heartbeat("w", list(reversed(leases)), now=at(301), lease_seconds=30),
        store.complete_runs(halves[0]),
        store.mark_started("w", starts),
        store.heartbeat("w", leases, now=at(301), lease_seconds=30),
        store.complete_runs(halves[1]),
    )
    assert len(results[1]) + len(results[4]) == 300


def _rows_touched(plan: dict[str, Any]) -> int:
    """Rows a plan node and its children produced or filtered out, over all their loops:
    the work a statement did, independent of the machine's speed."""
    per_loop = plan.get("Actual Rows", 0) + sum(
        plan.get(k, 0)
        for k in (
            "Rows Removed by Filter",
            "Rows Removed by Join Filter",
            "Rows Removed by Index Recheck",
        )
    )
    own = int(per_loop * plan.get("Actual Loops", 1))
    return own + sum(_rows_touched(child) for child in plan.get("Plans", []))


async def _work(store: PostgresStore, statement: str, *args: Any) -> int:
    async with store._connection() as conn:
        explained = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", *args)
    plan = json.loads(explained) if isinstance(explained, str) else explained
    return _rows_touched(plan[0]["Plan"])


async def test_batched_writes_stay_linear_whatever_the_statistics_say(
    store: PostgresStore,
) -> None:
    # Statistics taken while nothing ran make "state = 'running'" look empty: a plan that
    # trusts them scans every running run once per input row (a million rows for 1,000).
    jobs = [
        make_job(overlap=Overlap.REPLACE if i % 10 == 0 else Overlap.ALLOW) for i in range(2000)
    ]
    await store.create_jobs(jobs, [make_run(j, at(0), overlap=j.overlap) for j in jobs])
    await store.materialize_runs([make_run(j, at(1), overlap=j.overlap) for j in jobs], [])
    async with store._connection() as conn:
        await conn.execute("ANALYZE")
    batch = 1000
    # Every plan node touches about a batch of rows; a quadratic plan touches batch².
    linear = 50 * batch
    claimed = await store.claim_runs(
        "w",
        ["default"],
        limit=batch,
        now=at(0),
        prefetch_until=at(0),
        lease_seconds=60,
        started=False,
    )
    assert len(claimed) == batch
    leases = sorted((c.run.id, c.run.fence) for c in claimed)
    ids, fences = [i for i, _ in leases], [f for _, f in leases]
    heartbeat = (sql.HEARTBEAT, "w", ids, fences, at(1), 60.0)
    assert await _work(store, *heartbeat) < linear
    assert await _work(store, sql.MARK_STARTED, "w", ids, fences, [at(0)] * batch) < linear
    async with store._connection() as conn:
        assert (
            await conn.fetchval("SELECT count(*) FROM runs WHERE started_at = $1", at(0)) == batch
        )
    claim = (sql.CLAIM_RUNS, "w2", ["default"], at(1), batch, at(1), 60.0, "skip", None, 60.0, True)
    assert await _work(store, *claim) < linear
    done = [
        Completion(
            c.run.id, c.run.fence, "w", RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED, at(0), at(1)
        )
        for c in claimed
    ]
    assert await _work(store, sql.COMPLETE_RUNS, *_rows.completion_columns(done)) < linear


async def test_a_fair_claim_works_by_the_batch_not_by_the_backlog(
    store: PostgresStore,
) -> None:
    # The tenants waiting are found by a loose index scan and each one's share is read
    # from runs_fair: a claim behind 20,000 runs of one tenant touches about a batch of
    # rows, with or without fresh statistics.
    jobs = [make_job(tenant_id=t) for t in ("a", "b", "c")]
    for t in ("a", "b", "c"):
        await store.ensure_tenant(t, t, now=T0)
    await store.create_jobs(jobs)
    backlog = [make_run(jobs[0], at(-1000 + i / 1000)) for i in range(20_000)]
    for i in range(0, len(backlog), 5000):
        await store.materialize_runs(backlog[i : i + 5000], [])
    await store.materialize_runs([make_run(jobs[1], at(-1)), make_run(jobs[2], at(-1))], [])
    batch = 100
    claim = (sql.CLAIM_RUNS, "w", ["default"], at(0), batch, at(0), 60.0, "skip", None, 60.0, True)
    for analyzed in (False, True):
        if analyzed:
            async with store._connection() as conn:
                await conn.execute("ANALYZE")
        assert await _work(store, *claim) < 50 * batch  # a backlog scan: > 20,000


async def test_concurrent_migrators_apply_each_migration_once(dsn: str) -> None:
    name = f"cronwheel_pgspec_mig_{uuid.uuid4().hex[:8]}"
    await _admin(f'CREATE DATABASE "{name}"')
    stores = [await PostgresStore.connect(_dsn_of(name)) for _ in range(4)]
    try:
        applied = await asyncio.gather(*(s.migrate() for s in stores))
        every = [m.version for m in migrations("postgres")]
        assert sorted(applied, key=len) == [[], [], [], every]
        assert {await s.schema_version() for s in stores} == {every[-1]}
    finally:
        for s in stores:
            await s.close()
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_an_upgrade_applies_only_the_missing_migrations(dsn: str) -> None:
    name = f"cronwheel_pgspec_up_{uuid.uuid4().hex[:8]}"
    await _admin(f'CREATE DATABASE "{name}"')
    store = await PostgresStore.connect(_dsn_of(name))
    try:
        assert await store.schema_version() == 0
        assert await store.migrate(target=1) == [1]
        assert await store.migrate() == [m.version for m in migrations("postgres")][1:]
        assert await store.migrate() == []
        async with store._connection() as conn:
            tenants = await conn.fetch("SELECT id FROM tenants")
        assert [t["id"] for t in tenants] == ["default"]
    finally:
        await store.close()
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_the_schema_has_the_sqlite_tables_columns_and_indexes(
    store: PostgresStore,
) -> None:
    lite = sqlite3.connect(":memory:")
    try:
        lite.executescript(fresh_schema("sqlite"))
        tables = [t for (t,) in lite.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        expected = {t: [c[1] for c in lite.execute(f"PRAGMA table_info({t})")] for t in tables}
        expected_indexes = {
            name
            for (name,) in lite.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            )
        }
    finally:
        lite.close()
    async with store._connection() as conn:
        columns = await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name <> 'schema_migrations'"
            " ORDER BY table_name, ordinal_position"
        )
        indexes = await conn.fetch(
            "SELECT i.relname, t.relname AS table FROM pg_index x"
            " JOIN pg_class i ON i.oid = x.indexrelid"
            " JOIN pg_class t ON t.oid = x.indrelid"
            " WHERE t.relnamespace = current_schema()::regnamespace AND NOT x.indisprimary"
            " AND t.relname <> 'schema_migrations' AND NOT EXISTS"
            " (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)"
        )
    actual: dict[str, list[str]] = {}
    for row in columns:
        if not _history_only(row["table_name"]):
            actual.setdefault(row["table_name"], []).append(row["column_name"])
    assert actual == expected
    assert {row["relname"] for row in indexes if not _history_only(row["table"])} == (
        expected_indexes
    )


def _history_only(relation: str) -> bool:
    """PostgreSQL's own: archived runs and attempts, partitioned by time, and the views
    over live and archived ones (decision 0032). SQLite keeps one runs table."""
    return relation.startswith(("run_history", "attempt_history", "all_runs", "all_attempts"))


async def test_columns_have_their_postgres_types(store: PostgresStore) -> None:
    job = make_job()
    await store.create_jobs([job], [make_run(job, at(0))])
    async with store._connection() as conn:
        types = await conn.fetchrow(
            "SELECT pg_typeof(j.id)::text AS id, pg_typeof(j.payload)::text AS payload,"
            " pg_typeof(r.scheduled_for)::text AS instant, j.payload ->> 'hello' AS hello"
            " FROM jobs j JOIN runs r ON r.job_id = j.id"
        )
    assert types is not None
    assert dict(types) == {
        "id": "uuid",
        "payload": "jsonb",
        "instant": "timestamp with time zone",
        "hello": "world",
    }
    stored = await store.get_job("default", job.id)
    assert stored is not None and isinstance(stored.id, str) and stored == job


async def test_ten_thousand_jobs_in_one_call(store: PostgresStore) -> None:
    jobs = [make_job(f"bulk-{i:05d}") for i in range(10_000)]
    await store.create_jobs(jobs, [make_run(j, T0) for j in jobs[:1000]])
    listed = await store.list_jobs("default", limit=20_000)
    assert [j.id for j in listed] == sorted(j.id for j in jobs)
    assert len(await store.list_runs("default", limit=5000)) == 1000


async def test_an_unreachable_database_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable):
        await PostgresStore.connect("postgresql://postgres@127.0.0.1:1/postgres")


async def test_a_connection_lost_mid_query_is_store_unavailable_and_replaced(
    store: PostgresStore,
) -> None:
    with pytest.raises(StoreUnavailable):
        async with store._connection() as conn:
            await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    assert await store.get_job("default", make_job().id) is None  # the pool reconnects


async def test_a_connection_lost_mid_transaction_is_store_unavailable(
    store: PostgresStore,
) -> None:
    # The transaction's exit then finds the connection closed, and asyncpg's error of
    # that (an InterfaceError) replaces the loss's: a failover once answered a 500 so.
    with pytest.raises(StoreUnavailable):
        async with store._connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    with pytest.raises(StoreUnavailable):
        async with store._urgent_connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    assert await store.get_job("default", make_job().id) is None  # the pool reconnects


def _scans(plan: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """Every (node type, relation, index) of a plan."""
    own = [(plan["Node Type"], plan.get("Relation Name"), plan.get("Index Name"))]
    return own + [s for child in plan.get("Plans", []) for s in _scans(child)]


async def test_the_metrics_read_walks_partial_indexes_not_the_history(
    store: PostgresStore,
) -> None:
    # 10,000 finished runs of history, and a handful the gauges count.
    jobs = [make_job(pool="mail") for _ in range(1000)]
    await store.create_jobs(jobs)
    await store.materialize_runs([make_run(j, at(-i)) for j in jobs for i in range(1, 11)], [])
    claimed = await store.claim_runs(
        "w", ["mail"], limit=10_000, now=at(0), prefetch_until=at(0), lease_seconds=60
    )
    done = [
        Completion(
            c.run.id, c.run.fence, "w", RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED, at(0), at(1)
        )
        for c in claimed
    ]
    assert len(await store.complete_runs(done)) == 10_000
    await store.materialize_runs([make_run(j, at(5)) for j in jobs[:3]], [])
    [held] = await store.claim_runs(
        "w", ["mail"], limit=1, now=at(5), prefetch_until=at(5), lease_seconds=60
    )
    dead = Completion(
        held.run.id, held.run.fence, "w", RunState.DEAD, AttemptOutcome.PERMANENT, at(5), at(6)
    )
    await store.complete_runs([dead])
    await store.claim_runs(
        "w", ["mail"], limit=1, now=at(5), prefetch_until=at(5), lease_seconds=60
    )
    async with store._connection() as conn:
        await conn.execute("ANALYZE")
        args = (at(10), at(0), "@scheduler")
        explained = await conn.fetchval(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {_gauges.READ_GAUGES}", *args
        )
    plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]
    on_runs = [(node, index) for node, relation, index in _scans(plan) if relation == "runs"]
    assert on_runs, plan
    # Each part reads the partial index of what it counts: never a scan of the runs.
    # The probes of a keyed or queued due run's limit (decision 0042) read theirs too.
    indexes = {index for _, index in on_runs}
    assert {"runs_claimable", "runs_leases", "runs_dead"} <= indexes, plan
    assert indexes <= {
        "runs_claimable",
        "runs_leases",
        "runs_dead",
        "runs_keyed_running",
        "runs_running_by_job",
    }, plan
    assert all(node != "Seq Scan" for node, _ in on_runs), plan
    assert _rows_touched(plan) < 100, plan
    g = await store.read_gauges(now=at(10), workers_seen_since=at(0))
    assert (g.due, g.running, g.dead) == ({("mail", 2): 1}, {"mail": 1}, {"default": 1})


def _jobs_probes(plan: dict[str, Any]) -> int:
    """How many times a plan read the jobs table (its nodes' loops)."""
    own = plan.get("Actual Loops", 1) if plan.get("Relation Name") == "jobs" else 0
    return own + sum(_jobs_probes(child) for child in plan.get("Plans", []))


async def test_a_completion_batch_looks_each_job_up_once_for_its_notifications(
    store: PostgresStore,
) -> None:
    # The outbox costs a job without targets one primary-key probe per batch, not one per
    # run: W1's batch of a thousand runs of one job reads its job once.
    for notify in ((), ({"on": ["succeeded"], "url": "https://example.com/n"},)):
        job = make_job(notify=notify)
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(i)) for i in range(1000)], [])
        claimed = await store.claim_runs(
            "w", ["default"], limit=1000, now=at(1000), prefetch_until=at(1000), lease_seconds=60
        )
        done = sorted(
            (
                Completion(
                    c.run.id,
                    c.run.fence,
                    "w",
                    RunState.SUCCEEDED,
                    AttemptOutcome.SUCCEEDED,
                    at(0),
                    at(1),
                )
                for c in claimed
            ),
            key=lambda d: d.run_id,
        )
        async with store._connection() as conn:
            explained = await conn.fetchval(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {sql.COMPLETE_RUNS}",
                *_rows.completion_columns(done),
            )
        plan = json.loads(explained) if isinstance(explained, str) else explained
        assert _jobs_probes(plan[0]["Plan"]) == 1
        written = await store.list_notifications("default", limit=2000)
        assert len(written) == (1000 if notify else 0)


async def test_the_test_reset_empties_every_table_and_restarts_ids(store: PostgresStore) -> None:
    """The cheap reset between tests (store/postgres/_testing.py) leaves what a whole
    TRUNCATE ... RESTART IDENTITY left: empty tables with no dead rows for the next
    test's claims to walk (the files are empty), ids from 1, the default tenant alone."""
    job = make_job()
    await store.create_tenant(Tenant("acme", "acme", T0))
    await store.create_jobs([job], [make_run(job, at(n)) for n in range(100)])
    pool = store._pool
    async with pool.acquire() as conn:
        assert await conn.fetchval("SELECT pg_relation_size('runs')") > 0
    await store.truncate_all_for_tests()
    async with pool.acquire() as conn:
        tables = await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            " AND tablename NOT IN ('schema_migrations', 'tenants')"
        )
        for row in tables:
            count = await conn.fetchval(f'SELECT count(*) FROM "{row["tablename"]}"')
            assert count == 0, row["tablename"]
        assert await conn.fetchval("SELECT pg_relation_size('runs')") == 0
        assert await conn.fetchval("SELECT pg_relation_size('jobs_due')") <= 8192  # metapage
        assert await conn.fetch("SELECT id FROM tenants") == [("default",)]
    await store.create_jobs([job], [make_run(job, at(0))])
    [run] = await store.list_runs(job.tenant_id, job_id=job.id)
    assert run.id == 1
