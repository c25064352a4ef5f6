"""Conformance: concurrency keys (decision 0031). A run with a key starts only while fewer
of its tenant's runs with the same key are running than its limit, across claimers; the
others wait pending, and a key at its limit holds back nothing else."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at, make_job, make_run
from cronwheel.store.conformance.queue.concurrency_keys import (
    ConcurrencyKeysContract,
    _claim,
    _keyed,
    _keys,
)
from cronwheel.store.postgres import PostgresStore
from cronwheel.store.postgres import _sql as sql
from cronwheel.store.sqlite import SqliteStore, _fair
from cronwheel.store.sqlite import _rows as rows


class TestConcurrencyKeys(ConcurrencyKeysContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


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


class TestConcurrencyKeysFullStatement(ConcurrencyKeysContract):
    """The same contract through PostgreSQL's full claim statement alone: the ``store``
    above claims one tenant's plain pools with the lean one (decision 0047)."""

    @pytest.fixture
    def store(self, full_claim_store: Any) -> Any:
        return full_claim_store
