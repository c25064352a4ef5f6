"""Conformance: concurrency keys (decision 0031). A run with a key starts only while fewer
of its tenant's runs with the same key are running than its limit, across claimers; the
others wait pending, and a key at its limit holds back nothing else."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from cronwheel.core.model import AttemptOutcome, Concurrency, Job, Overlap, RunState, Tenant
from cronwheel.store.base import Claim, Completion, Store
from cronwheel.store.postgres import PostgresStore
from cronwheel.store.postgres import _sql as sql
from cronwheel.store.sqlite import SqliteStore, _fair
from cronwheel.store.sqlite import _rows as rows
from tests.store.factories import T0, at, make_job, make_run


async def _claim(store: Store, limit: int = 50, now: float = 0.0, **kw: Any) -> Claim:
    return await store.claim_runs(
        "w", ["default"], limit=limit, now=at(now), prefetch_until=at(now), lease_seconds=60, **kw
    )


async def _keyed(store: Store, job: Job, keys: list[str | None], limit: int = 1) -> None:
    """One due run of ``job`` per key, in order, a millisecond apart (None: no key)."""
    runs = [
        make_run(
            job,
            at(-100 + i / 1000),
            concurrency_key=key,
            concurrency_limit=None if key is None else limit,
        )
        for i, key in enumerate(keys)
    ]
    await store.materialize_runs(runs, [])


def _keys(claim: Claim) -> list[str | None]:
    return [c.run.concurrency_key for c in claim]


async def _finish(store: Store, claim: Claim, now: float = 1.0) -> None:
    done = [
        Completion(
            c.run.id, c.run.fence, "w", RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED, at(0), at(now)
        )
        for c in claim
    ]
    await store.complete_runs(done)


async def test_a_key_of_limit_one_never_has_two_running(store: Store) -> None:
    job = make_job()
    await store.create_jobs([job])
    await _keyed(store, job, ["report:42"] * 5)
    first = await _claim(store)
    assert _keys(first) == ["report:42"]
    assert first[0].run.concurrency_limit == 1
    assert len(await _claim(store)) == 0  # the key is full: its runs wait
    pending = await store.list_runs("default", state=RunState.PENDING, limit=10)
    assert len(pending) == 4  # waiting, not failed, not lost
    await _finish(store, first)
    second = await _claim(store, now=1)
    assert _keys(second) == ["report:42"]  # one finished: the next starts
    assert second[0].run.scheduled_for == at(-100 + 1 / 1000)  # in order


async def test_a_limit_of_n_runs_n_at_once(store: Store) -> None:
    job = make_job()
    await store.create_jobs([job])
    await _keyed(store, job, ["k"] * 10, limit=3)
    assert len(await _claim(store)) == 3
    assert len(await _claim(store)) == 0


async def test_different_keys_run_in_parallel(store: Store) -> None:
    job = make_job()
    await store.create_jobs([job])
    await _keyed(store, job, ["report:1", "report:2", "report:3", "report:1", "report:2"])
    claimed = await _claim(store)
    assert sorted(_keys(claimed)) == ["report:1", "report:2", "report:3"]


async def test_a_full_key_holds_back_neither_other_keys_nor_runs_without_one(
    store: Store,
) -> None:
    # A's 300 older runs of one key come first in priority-then-due order: a claim that
    # read them like any other would take one and leave the rest of the batch empty.
    job = make_job()
    await store.create_jobs([job])
    await _keyed(store, job, ["busy"] * 300 + ["other", None, None])
    claimed = await _claim(store, limit=10)
    assert Counter(_keys(claimed)) == {"busy": 1, "other": 1, None: 2}
    again = await _claim(store, limit=10)
    assert len(again) == 0  # busy is full, other is full, nothing else waits


async def test_keys_are_per_tenant(store: Store) -> None:
    for tenant in ("a", "b"):
        await store.create_tenant(Tenant(tenant, tenant, T0))
    a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
    await store.create_jobs([a, b])
    await _keyed(store, a, ["report:42"] * 3)
    await _keyed(store, b, ["report:42"] * 3)
    claimed = await _claim(store)
    assert Counter(c.run.tenant_id for c in claimed) == {"a": 1, "b": 1}


async def test_the_smallest_limit_of_a_key_holds(store: Store) -> None:
    # Two jobs naming the same key with limits 1 and 5: the strictest one holds.
    strict, loose = make_job(), make_job()
    await store.create_jobs([strict, loose])
    await _keyed(store, loose, ["shared"] * 3, limit=5)
    await _keyed(store, strict, ["shared"], limit=1)
    first = await _claim(store, limit=1)
    assert len(first) == 1
    # One of the key's runs is running: whichever limit the next has, the strict job's
    # limit of 1 is full (the key's smallest, running or next).
    if first[0].run.job_id == strict.id:
        assert len(await _claim(store)) == 0


async def test_a_key_holds_across_claimers(store: Store, store2: Store) -> None:
    job = make_job()
    await store.create_jobs([job])
    await _keyed(store, job, ["k1"] * 40 + ["k2"] * 40, limit=2)
    claims = await asyncio.gather(*(_claim(s, 10) for s in (store, store2, store, store2)))
    started = Counter(k for c in claims for k in _keys(c))
    assert started == {"k1": 2, "k2": 2}
    running = await store.list_runs("default", state=RunState.RUNNING, limit=100)
    assert Counter(r.concurrency_key for r in running) == {"k1": 2, "k2": 2}


async def test_keyed_runs_keep_their_tenant_cap_and_overlap_heads_their_key(
    store: Store,
) -> None:
    await store.create_tenant(Tenant("a", "a", T0, max_running=2))
    job = make_job(tenant_id="a")
    await store.create_jobs([job])
    await _keyed(store, job, ["k1", "k2", "k3", None])
    assert len(await _claim(store)) == 2  # max_running counts keyed runs too


async def test_runs_without_keys_take_no_key_lock(store: Store) -> None:
    """Jobs without keys are unaffected: on PostgreSQL their claim does not queue on the
    keys' lock (held here by another session) and counts nothing."""
    job = make_job()
    await store.create_jobs([job])
    await _keyed(store, job, [None] * 5)
    if not isinstance(store, PostgresStore):
        assert len(await _claim(store)) == 5
        return
    async with store._connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('cronwheel.concurrency'))")
        claimed = await asyncio.wait_for(_claim(store), timeout=30)
        assert len(claimed) == 5
        # A keyed run's claim does queue on it, until the lock is released.
        keyed = make_job()
        await store.create_jobs([keyed])
        await _keyed(store, keyed, ["k"])
        waiting = asyncio.ensure_future(_claim(store))
        done, _ = await asyncio.wait([waiting], timeout=0.5)
        assert not done  # it waits for the lock (a bounded check that it is taken)
    assert _keys(await asyncio.wait_for(waiting, timeout=30)) == ["k"]


async def test_a_job_keeps_its_concurrency(store: Store) -> None:
    job = make_job(concurrency=Concurrency("report:{payload.customer}", 2))
    await store.create_jobs([job])
    found = await store.get_job(job.tenant_id, job.id)
    assert found is not None and found.concurrency == Concurrency("report:{payload.customer}", 2)
    updated = replace(found, concurrency=None, version=found.version)
    saved = await store.update_job(updated, expected_version=found.version, actor="t")
    assert saved.concurrency is None


async def test_overlap_heads_sharing_a_key_take_its_room_in_turn(store: Store) -> None:
    # Two jobs queueing their own runs (overlap "queue") that share one key of limit 1:
    # each job's head may start as far as its overlap policy goes, but not both at once.
    first, second = make_job(overlap=Overlap.QUEUE), make_job(overlap=Overlap.QUEUE)
    await store.create_jobs([first, second])
    for job in (first, second):
        run = make_run(job, at(-10), overlap=Overlap.QUEUE)
        await store.materialize_runs(
            [replace(run, concurrency_key="shared", concurrency_limit=1)], []
        )
    claimed = await _claim(store)
    assert _keys(claimed) == ["shared"]
    assert len(await _claim(store)) == 0
    await _finish(store, claimed)
    assert _keys(await _claim(store, now=1)) == ["shared"]


async def test_sqlite_claims_without_keyed_runs_run_no_statement_for_keys(
    tmp_path: Path,
) -> None:
    """The key path costs a claim that meets no keyed run nothing but a probe inside the
    statement that finds the tenants waiting; with one, it reads keys through indexes."""
    path = tmp_path / "keys.db"
    store = await SqliteStore.open(path)
    try:
        await store.migrate()
        job = make_job()
        await store.create_jobs([job])
        await _keyed(store, job, [None] * 3)
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        ask = _fair.Ask(["default"], None, 10, rows.us(at(0)), rows.us(at(0)), 60_000_000)
        assert len(_fair.picks(conn, ask)) == 3
        assert not any("runs_keyed" in s for s in seen[1:]), seen
        conn.execute(
            "UPDATE runs SET concurrency_key = 'k', concurrency_limit = 1"
            " WHERE id = (SELECT min(id) FROM runs)"
        )
        seen.clear()
        assert len(_fair.picks(conn, ask)) == 3
        assert any("INDEXED BY runs_keyed_running" in s for s in seen), seen
        for sql in (_fair._NEXT_KEY.format(only=""), _fair._KEY_SLICE):
            params = {"pool": "p", "tenant": "t", "key": "k", "until": 0, "room": 1, "now": 0}
            plan = [r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            assert not [step for step in plan if "TEMP B-TREE" in step], plan
    finally:
        conn.close()


async def test_postgres_a_claim_behind_a_full_keys_backlog_works_by_the_batch(
    store: Store,
) -> None:
    """20,000 queued runs of one key of limit 1 cost a claim one probe, not a walk: the
    claim touches about a batch of rows, with and without fresh statistics."""
    if not isinstance(store, PostgresStore):
        return
    from tests.store.test_postgres_specific import _work

    job = make_job()
    await store.create_jobs([job])
    backlog = [
        make_run(job, at(-1000 + i / 1000), concurrency_key="busy", concurrency_limit=1)
        for i in range(20_000)
    ]
    for i in range(0, len(backlog), 5000):
        await store.materialize_runs(backlog[i : i + 5000], [])
    others = [make_run(job, at(-1 + i / 1000)) for i in range(300)]
    await store.materialize_runs(others, [])
    await _claim(store, 1)  # the key is full from now on
    batch = 100
    claim = (sql.CLAIM_RUNS, "w", ["default"], at(0), batch, at(0), 60.0, "skip", None, 60.0, True)
    for analyzed in (False, True):
        if analyzed:
            async with store._connection() as conn:
                await conn.execute("ANALYZE")
        assert await _work(store, *claim) < 50 * batch  # a walk of the backlog: > 20,000


async def test_a_tenant_with_only_keyed_runs_keeps_its_cap_and_weight(store: Store) -> None:
    await store.create_tenant(Tenant("a", "a", T0, max_running=2))
    await store.create_tenant(Tenant("b", "b", T0, claim_weight=3.0))
    a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
    await store.create_jobs([a, b])
    await _keyed(store, a, [f"k{i}" for i in range(10)])
    await _keyed(store, b, [f"k{i}" for i in range(10)])
    claimed = await _claim(store, limit=6)
    # A's cap holds with no run of A outside a key; B's weight 3 takes the rounds' rest.
    assert Counter(c.run.tenant_id for c in claimed) == {"a": 2, "b": 4}
    assert len(await _claim(store, limit=6)) == 6  # B's other keys; A is at its cap


async def test_tenants_with_only_keyed_runs_share_a_claim_by_weight(store: Store) -> None:
    await store.create_tenant(Tenant("b", "b", T0, claim_weight=3.0))
    await store.create_tenant(Tenant("c", "c", T0))
    b, c = make_job(tenant_id="b"), make_job(tenant_id="c")
    await store.create_jobs([b, c])
    await _keyed(store, c, [f"k{i}" for i in range(10)])
    await _keyed(store, b, [f"k{i}" for i in range(10)])
    claimed = await _claim(store, limit=4)
    assert Counter(r.run.tenant_id for r in claimed) == {"b": 3, "c": 1}
