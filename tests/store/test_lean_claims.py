"""PostgreSQL's two claim statements (decision 0047): the lean one, for pools whose runs
use no claim policy, gives the full one's result run for run and in order, refuses
(claiming and locking nothing) whenever a policy is in use, and a pool switches between
them as policies come and go, with every limit holding."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import pytest

from cronwheel.core.model import REASON_OVERLAP_SKIP, ClaimedRun, Overlap, Priority, Tenant
from cronwheel.store.conformance.factories import T0, at, make_job, make_run
from cronwheel.store.conformance.queue.policies_on import PoliciesOnContract
from cronwheel.store.postgres import PostgresStore, _lean
from cronwheel.store.postgres import _rows as rows
from cronwheel.store.postgres import _sql as sql
from cronwheel.store.postgres.store import STATEMENT_CACHE_BYTES


class Both:
    """One claim's arguments, as each statement takes them."""

    def __init__(
        self,
        pools: Sequence[str],
        *,
        limit: int,
        now: datetime,
        prefetch_until: datetime,
        tenant_id: str | None = None,
        aging: float = 60.0,
        started: bool = True,
    ) -> None:
        common = ("w", list(pools), prefetch_until, limit, now, 30.0)
        self.lean = (*common, tenant_id, aging, started)
        self.full = (*common, REASON_OVERLAP_SKIP, tenant_id, aging, started)


async def _each(store: PostgresStore, claim: Both) -> tuple[Any, Any]:
    """What each statement answers on the same data: each in a transaction rolled back."""
    answers = []
    for statement, args in ((_lean.CLAIM_RUNS_LEAN, claim.lean), (sql.CLAIM_RUNS, claim.full)):
        async with store._connection() as conn:
            tx = conn.transaction()
            await tx.start()
            try:
                answers.append(await conn.fetch(statement, *args))
            finally:
                await tx.rollback()
    return answers[0], answers[1]


def _claimed(found: Sequence[Any]) -> list[ClaimedRun]:
    return [rows.claimed(r) for r in found if r["id"] is not None]


async def _scenario(store: PostgresStore, seed: int) -> tuple[random.Random, str, list[str], bool]:
    """One tenant's runs in a few pools: mixed priorities, due times old enough to age,
    some not yet due, some out of attempts, some already running; and in some, another
    tenant's runs beside them (claimed for the one tenant only, as a remote worker
    does: True)."""
    rnd = random.Random(seed)
    tenant = rnd.choice(["default", "t"])
    if tenant != "default":
        await store.create_tenant(Tenant(tenant, tenant, T0, claim_weight=rnd.choice([1, 2.5])))
    pools = ["a", "b", "c"][: rnd.randint(1, 3)]
    jobs = [
        make_job(tenant_id=tenant, pool=rnd.choice(pools), priority=rnd.choice(list(Priority)))
        for _ in range(rnd.randint(1, 4))
    ]
    await store.create_jobs(jobs)
    # Distinct due times (a thousandth of a second apart at least): the order is total.
    instants = rnd.sample(range(-400_000, 30_000), 120)
    runs = [make_run(rnd.choice(jobs), at(ms / 1000)) for ms in instants]
    await store.materialize_runs(runs, [])
    crowded = rnd.random() < 0.5
    if crowded:
        await store.create_tenant(Tenant("x", "x", T0))
        theirs = make_job(tenant_id="x", pool=pools[0])
        await store.create_jobs([theirs])
        await store.materialize_runs([make_run(theirs, at(-i)) for i in range(500, 530)], [])
    async with store._connection() as conn:
        await conn.execute(
            "UPDATE runs SET attempt = max_attempts WHERE id IN "
            "(SELECT id FROM runs ORDER BY random() LIMIT 10)"
        )
    await store.claim_runs(
        "other",
        pools,
        limit=5,
        now=at(0),
        prefetch_until=at(0),
        lease_seconds=30,
        tenant_id=tenant if crowded else None,
    )
    return rnd, tenant, pools, crowded


@pytest.mark.parametrize("seed", range(12))
async def test_the_lean_claim_is_the_full_claim_on_one_tenants_pools(
    pg_store: PostgresStore, seed: int
) -> None:
    rnd, tenant, pools, crowded = await _scenario(pg_store, seed)
    for _ in range(4):
        asked = rnd.sample([*pools, "empty"], rnd.randint(1, len(pools) + 1))
        claim = Both(
            asked,
            limit=rnd.randint(1, 40),
            now=at(0),
            prefetch_until=at(rnd.choice([0, 5, 20, 40])),
            tenant_id=tenant if crowded else rnd.choice([None, tenant]),
            aging=rnd.choice([30.0, 60.0, 1000.0]),
            started=rnd.choice([True, False]),
        )
        lean, full = await _each(pg_store, claim)
        assert lean[0]["lean"] and full[0]["lean"]
        assert _claimed(lean) == _claimed(full)
        # Then one of them for real, so that the next claim meets what it left.
        await pg_store.claim_runs(
            "w",
            asked,
            limit=rnd.randint(1, 20),
            now=at(0),
            prefetch_until=at(5),
            lease_seconds=30,
            tenant_id=claim.lean[6],
        )
    assert pg_store.claims_by_statement == {"lean": 5}  # the scenario's own claim, too


async def test_the_lean_claim_ages_low_priority_as_the_full_one_does(
    pg_store: PostgresStore,
) -> None:
    # A low run waiting for ten aging periods goes before fresh critical ones.
    low, critical = make_job(priority=Priority.LOW), make_job(priority=Priority.CRITICAL)
    await pg_store.create_jobs([low, critical])
    await pg_store.materialize_runs(
        [make_run(low, at(-600))] + [make_run(critical, at(-i)) for i in range(1, 6)], []
    )
    lean, full = await _each(pg_store, Both(["default"], limit=3, now=at(0), prefetch_until=at(0)))
    assert _claimed(lean) == _claimed(full)
    assert [c.run.job_id for c in _claimed(lean)] == [low.id, critical.id, critical.id]


async def _policy(store: PostgresStore, policy: str) -> None:
    """A policy in use by the default pool's runs, or beside it where it changes nothing."""
    job = make_job()
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(-i)) for i in range(1, 4)], [])
    if policy in ("key", "key in another pool", "key not due"):
        keyed = make_job(pool="other" if policy == "key in another pool" else "default")
        await store.create_jobs([keyed])
        due = at(3600) if policy == "key not due" else at(-10)
        await store.materialize_runs(
            [make_run(keyed, due, concurrency_key="k", concurrency_limit=1)], []
        )
    elif policy in ("tenant", "tenant in another pool", "tenant not due"):
        await store.create_tenant(Tenant("b", "b", T0))
        theirs = make_job(tenant_id="b", pool="other" if "another" in policy else "default")
        await store.create_jobs([theirs])
        due = at(3600) if policy == "tenant not due" else at(-10)
        await store.materialize_runs([make_run(theirs, due)], [])
    elif policy in ("overlap", "overlap not due"):
        queued = make_job(overlap=Overlap.QUEUE)
        await store.create_jobs([queued])
        due = at(3600) if policy == "overlap not due" else at(-10)
        await store.materialize_runs([make_run(queued, due, overlap=Overlap.QUEUE)], [])
    elif policy == "cap":
        await store.update_tenant(Tenant("default", "default", T0, max_running=10))


@pytest.mark.parametrize(
    "policy", ["key", "key not due", "tenant", "tenant not due", "overlap", "cap"]
)
async def test_the_lean_claim_refuses_a_pool_with_a_policy_in_use(
    pg_store: PostgresStore, policy: str
) -> None:
    # A keyed run or another tenant's counts even before it is due: the full claim counts
    # its tenant in the shares (and locks the key), which changes what it takes.
    await _policy(pg_store, policy)
    claim = Both(["default"], limit=10, now=at(0), prefetch_until=at(0))
    lean, full = await _each(pg_store, claim)
    assert [(r["lean"], r["id"]) for r in lean] == [(False, None)]
    assert not full[0]["lean"] and _claimed(full)
    # It took no lock either: a claim beside it (NOWAIT) finds every run free.
    async with pg_store._connection() as conn, conn.transaction():
        await conn.fetch(_lean.CLAIM_RUNS_LEAN, *claim.lean)
        async with pg_store._connection() as other:
            pending = await other.fetch(
                "SELECT id FROM runs WHERE state = 'pending' FOR UPDATE NOWAIT"
            )
    assert len(pending) >= 3  # the plain runs, and the policy's own if it has any


@pytest.mark.parametrize(
    "policy", ["key in another pool", "tenant in another pool", "overlap not due"]
)
async def test_a_policy_that_changes_nothing_leaves_the_claim_lean(
    pg_store: PostgresStore, policy: str
) -> None:
    await _policy(pg_store, policy)
    lean, full = await _each(pg_store, Both(["default"], limit=10, now=at(0), prefetch_until=at(0)))
    assert lean[0]["lean"] and full[0]["lean"]
    assert _claimed(lean) == _claimed(full) and len(_claimed(lean)) == 3


async def test_a_pool_switches_to_the_full_claim_and_back(pg_store: PostgresStore) -> None:
    plain, keyed = make_job(), make_job()
    await pg_store.create_jobs([plain, keyed])
    await pg_store.materialize_runs([make_run(plain, at(-i)) for i in range(1, 21)], [])

    async def claim(limit: int) -> list[ClaimedRun]:
        return list(
            await pg_store.claim_runs(
                "w", ["default"], limit=limit, now=at(0), prefetch_until=at(0), lease_seconds=30
            )
        )

    assert len(await claim(2)) == 2
    assert pg_store.claims_by_statement == {"lean": 1}
    # The store's hint still says lean: the lean statement finds the key and refuses, and
    # the full one claims in the same call.
    await pg_store.materialize_runs(
        [make_run(keyed, at(-30 - i), concurrency_key="k", concurrency_limit=1) for i in range(2)],
        [],
    )
    assert [c.run.concurrency_key for c in await claim(3)] == ["k", None, None]
    assert pg_store.claims_by_statement == {"lean": 1, "full": 1}
    # While a keyed run waits, claims go straight to the full statement.
    assert [c.run.concurrency_key for c in await claim(3)] == [None] * 3
    assert pg_store.claims_by_statement == {"lean": 1, "full": 2}
    async with pg_store._connection() as conn:  # the key's waiting run is cancelled
        await conn.execute(
            "UPDATE runs SET state = 'cancelled', finished_at = $1"
            " WHERE state = 'pending' AND concurrency_key IS NOT NULL",
            at(0),
        )
    assert len(await claim(3)) == 3  # full, and it finds the pool plain again
    assert len(await claim(3)) == 3
    assert pg_store.claims_by_statement == {"lean": 2, "full": 3}


class TestPoliciesOnSwitchStatements(PoliciesOnContract):
    """The contract of a policy turned on, on PostgreSQL, checking that the pool was
    claimed by the lean statement before and by the full one after."""

    @pytest.fixture
    async def store(
        self, pg_store: PostgresStore, request: pytest.FixtureRequest
    ) -> AsyncIterator[PostgresStore]:
        yield pg_store
        if "arriving" in request.node.name:
            return  # which statement its first claim used depends on the race
        used = pg_store.claims_by_statement
        assert used["lean"] >= 1 and used["full"] >= 1, dict(used)


async def _plans(store: PostgresStore, statement: str) -> tuple[int, int]:
    """How many times this session's prepared ``statement`` ran with a generic plan and
    with a custom one (pg_prepared_statements is per session: the store has one)."""
    async with store._connection() as conn:
        row = await conn.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
            statement,
        )
    return (0, 0) if row is None else (row["generic_plans"], row["custom_plans"])


async def test_a_full_claim_is_prepared_once_per_session(
    pg_store: PostgresStore, pg_dsn: str
) -> None:
    # asyncpg keeps a prepared statement only up to its max_cacheable_statement_size: a
    # longer claim statement is planned again at every claim (STATEMENT_CACHE_BYTES).
    await pg_store.create_tenant(Tenant("a", "a", T0))
    await pg_store.create_tenant(Tenant("b", "b", T0))
    a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
    await pg_store.create_jobs([a, b])
    await pg_store.materialize_runs(
        [make_run(job, at(-i)) for job in (a, b) for i in range(1, 11)], []
    )
    one = await PostgresStore.connect(pg_dsn, min_size=1, max_size=1)  # one session
    try:
        for _ in range(5):
            found = await one.claim_runs(
                "w", ["default"], limit=2, now=at(0), prefetch_until=at(0), lease_seconds=30
            )
            assert len(found) == 2
        assert one.claims_by_statement == {"full": 5}
        assert await _plans(one, sql.CLAIM_RUNS) == (5, 0)
        assert all(
            len(statement.encode()) <= STATEMENT_CACHE_BYTES
            for statement in (sql.CLAIM_RUNS, _lean.CLAIM_RUNS_LEAN)
        )
    finally:
        await one.close()


async def test_a_workers_claims_are_planned_once_and_a_tenants_at_every_claim(
    pg_store: PostgresStore, pg_dsn: str
) -> None:
    # Decision 0047's addendum: a worker's claim has no parameter whose value changes its
    # plan (generic); a claim for one tenant needs the tenant as an index condition,
    # behind another tenant's backlog (custom), whatever PostgreSQL's "auto" would pick
    # from the costs of the claims before.
    await pg_store.create_tenant(Tenant("a", "a", T0))
    await pg_store.create_tenant(Tenant("b", "b", T0))
    a, b, plain = make_job(tenant_id="a"), make_job(tenant_id="b"), make_job(pool="plain")
    await pg_store.create_jobs([a, b, plain])
    await pg_store.materialize_runs([make_run(a, at(-i / 100)) for i in range(1, 3001)], [])
    await pg_store.materialize_runs([make_run(b, at(-i)) for i in range(1, 21)], [])
    await pg_store.materialize_runs([make_run(plain, at(-i)) for i in range(1, 21)], [])
    one = await PostgresStore.connect(pg_dsn, min_size=1, max_size=1)  # one session
    try:

        async def claim(pool: str, limit: int, tenant_id: str | None = None) -> int:
            found = await one.claim_runs(
                "w",
                [pool],
                limit=limit,
                now=at(0),
                prefetch_until=at(0),
                lease_seconds=30,
                tenant_id=tenant_id,
            )
            return len(found)

        for _ in range(7):
            assert await claim("plain", 1) == 1
        assert await _plans(one, _lean.CLAIM_RUNS_LEAN) == (7, 0)
        for _ in range(8):
            assert await claim("default", 100, "a") == 100
            assert await claim("default", 1, "b") == 1
        assert await _plans(one, _lean.CLAIM_RUNS_LEAN) == (7, 16)
        assert one.claims_by_statement == {"lean": 23}
    finally:
        await one.close()


async def test_a_peeks_claim_is_planned_at_every_claim(pg_store: PostgresStore) -> None:
    # The peek's connection lives as long as the worker: a plan made at its first claim
    # would be a plan for the table then, however large it has grown since (W6: B's runs
    # 258-396 ms late in the first second of a 100,000-run drain; bench/README.md, "Which
    # pass, narrowed").
    job = make_job()
    await pg_store.create_jobs([job])
    await pg_store.materialize_runs([make_run(job, at(-i)) for i in range(1, 11)], [])
    for _ in range(3):
        found = await pg_store.claim_runs(
            "w",
            ["default"],
            limit=2,
            now=at(0),
            prefetch_until=at(0),
            lease_seconds=30,
            started=False,
            urgent=True,
        )
        assert len(found) == 2
    [(kind, count)] = pg_store.claims_by_statement.items()
    statement = _lean.CLAIM_RUNS_LEAN if kind == "lean" else sql.CLAIM_RUNS
    assert pg_store._urgent is not None
    row = await pg_store._urgent.fetchrow(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
        statement,
    )
    assert row is not None and (row["generic_plans"], row["custom_plans"]) == (0, count)
