"""Conformance: the jobs list in every order (creation, name, next fire time; either
way), paged with a keyset cursor that gives every job exactly once, with every filter,
while jobs are inserted, and read by walking an index (migration 0010)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from cronwheel.core.model import (
    JobKey,
    JobOrder,
    JobState,
)
from cronwheel.store.base import Store
from cronwheel.store.conformance.catalogue.job_orders import (
    PLAN_JOBS,
    PREFIX_NAMES,
    JobOrdersContract,
    _index_conds,
    _plan_store,
    _queries,
    expected,
    walk,
)
from cronwheel.store.conformance.factories import at, make_job
from cronwheel.store.postgres import PostgresStore
from cronwheel.store.sqlite import SqliteStore


@pytest.fixture
async def sqlite_store(tmp_path: Any) -> Any:
    """A SQLite store alone: what the next test checks is SQLite's own (PostgreSQL plans
    starts_with on jobs_tenant_name_id by its statistics)."""
    opened = await SqliteStore.open(tmp_path / "orders.db")
    await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


class TestJobOrders(JobOrdersContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


async def test_every_order_walks_an_index_without_sorting(store: Store) -> None:
    await _plan_store(store)
    if isinstance(store, PostgresStore):
        from cronwheel.store.postgres.store import jobs_query as pg_query

        async with store._connection() as conn:
            await conn.execute("ANALYZE jobs")
            for label, order, options in _queries():
                statement, *args = pg_query("default", order=order, limit=51, **options)
                plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {statement}", *args)
                text = plan if isinstance(plan, str) else json.dumps(plan)
                assert '"Sort"' not in text and "Seq Scan" not in text, (label, options, text)
                # The creation order may walk the primary key instead: also no sort.
                assert '"Index Scan"' in text, (label, options, text)
                if options["after"] is not None:  # the scan starts at the cursor
                    conds = _index_conds(plan if not isinstance(plan, str) else json.loads(plan))
                    assert any(" > " in c or " < " in c for c in conds), (label, options, text)
        return
    assert isinstance(store, SqliteStore)
    from cronwheel.store.sqlite.store import jobs_query as lite_query

    def plans(c: Any) -> list[tuple[str, dict[str, Any], list[str]]]:
        found = []
        for label, order, options in _queries():
            statement, params = lite_query("default", order=order, limit=51, **options)
            details = [r["detail"] for r in c.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
            found.append((label, options, details))
        return found

    for label, options, details in await store._db.read(plans):
        assert not any("TEMP B-TREE" in d for d in details), (label, options, details)
        assert any("USING INDEX jobs_tenant_" in d for d in details), (label, options, details)
        if options["after"] is not None:  # searched from the cursor, not walked up to it
            assert any(re.search(r"\(tenant_id=\? AND .*[<>]", d) for d in details), (
                label,
                options,
                details,
            )


# -- plans: a filter that matches few jobs reads those, not the tenant's jobs -------------
async def test_a_rare_pool_or_state_is_read_from_its_own_index(store: Store) -> None:
    """A pool of a few jobs among thousands, and the few paused ones, are a range of an
    index (0017), first page and later ones: without it, a page walked the tenant's jobs
    until it had found enough (3 s a page at 10,000,000 jobs, bench/atrest.py)."""
    common = [make_job(f"job-{i:05d}") for i in range(PLAN_JOBS)]
    rare = [make_job(f"gpu-{i}", pool="gpu") for i in range(5)]
    paused = [make_job(f"paused-{i}", state=JobState.PAUSED, next_fire_at=None) for i in range(5)]
    await store.create_jobs([*common, *rare, *paused])
    cursor = JobKey(sorted(j.id for j in rare)[1])
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("pool", {"pool": "gpu"}, "jobs_tenant_pool_id"),
        ("pool after", {"pool": "gpu", "after": cursor}, "jobs_tenant_pool_id"),
        ("paused", {"state": JobState.PAUSED}, "jobs_tenant_state_id"),
        ("paused after", {"state": JobState.PAUSED, "after": cursor}, "jobs_tenant_state_id"),
    ]
    assert [j.id for j in await store.list_jobs("default", pool="gpu")] == [j.id for j in rare]
    found = await store.list_jobs("default", state=JobState.PAUSED)
    assert [j.id for j in found] == [j.id for j in paused]
    if isinstance(store, PostgresStore):
        from cronwheel.store.postgres.store import jobs_query as pg_query

        async with store._connection() as conn:
            await conn.execute("ANALYZE jobs")
            for label, options, index in cases:
                statement, *args = pg_query("default", limit=51, **options)
                plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {statement}", *args)
                text = plan if isinstance(plan, str) else json.dumps(plan)
                assert f'"Index Name": "{index}"' in text, (label, text)
                assert '"Sort"' not in text, (label, text)
        return
    assert isinstance(store, SqliteStore)
    from cronwheel.store.sqlite.store import jobs_query as lite_query

    def plans(c: Any) -> list[tuple[str, str, list[str]]]:
        found = []
        for label, options, index in cases:
            statement, params = lite_query("default", limit=51, **options)
            details = [r["detail"] for r in c.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
            found.append((label, index, details))
        return found

    for label, index, details in await store._db.read(plans):
        assert any(f"USING INDEX {index} " in d for d in details), (label, details)
        assert not any("TEMP B-TREE" in d for d in details), (label, details)


async def test_a_rare_name_prefix_is_a_range_of_the_name_index_on_sqlite(
    sqlite_store: SqliteStore,
) -> None:
    """SQLite has no statistics to choose by: the store counts a prefix's names (no
    further than PREFIX_SORT_LIMIT) and reads few from the name index, many by walking
    the order's own index (at 10,000,000 jobs a rare prefix took 3.5 s a page)."""
    store = sqlite_store
    from cronwheel.store.sqlite.store import PREFIX_SORT_LIMIT, few_names, jobs_query

    many = PREFIX_SORT_LIMIT + 10
    await store.create_jobs([make_job(f"job-{i:05d}") for i in range(many)])
    await store.create_jobs([make_job(f"rare-{i}") for i in range(3)])

    def plans(c: Any) -> dict[str, Any]:
        found: dict[str, Any] = {"few": (few_names(c, "default", "rare-"),)}
        found["many"] = (few_names(c, "default", "job-"),)
        for label, order, prefix in (
            ("rare created", JobOrder.CREATED, "rare-"),
            ("rare next fire", JobOrder.NEXT_FIRE, "rare-"),
            ("common created", JobOrder.CREATED, "job-"),
            ("by name", JobOrder.NAME, "rare-"),
        ):
            by_range = order is JobOrder.NAME or few_names(c, "default", prefix)
            statement, params = jobs_query(
                "default", name_prefix=prefix, order=order, limit=51, prefix_range=by_range
            )
            found[label] = [
                r["detail"] for r in c.execute(f"EXPLAIN QUERY PLAN {statement}", params)
            ]
        return found

    found = await store._db.read(plans)
    assert found["few"] == (True,) and found["many"] == (False,)
    for label in ("rare created", "rare next fire", "by name"):
        assert any(
            "USING INDEX jobs_tenant_name_id (tenant_id=? AND name>? AND name<?)" in d
            for d in found[label]
        ), (label, found[label])
    assert not any("TEMP B-TREE" in d for d in found["by name"]), found["by name"]
    assert not any("jobs_tenant_name_id" in d for d in found["common created"]), found
    assert [j.name for j in await store.list_jobs("default", name_prefix="rare-")] == [
        "rare-0",
        "rare-1",
        "rare-2",
    ]


@pytest.mark.parametrize("sort_limit", [10_000, 2])
async def test_a_name_prefix_finds_the_names_that_start_with_it(
    store: Store, sort_limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every order, a page at a time, with the last code points a range must get right;
    on SQLite both ways of reading (a name range sorted, or a walk: PREFIX_SORT_LIMIT)."""
    from cronwheel.store.sqlite import store as lite

    monkeypatch.setattr(lite, "PREFIX_SORT_LIMIT", sort_limit)
    jobs = [make_job(n, next_fire_at=at(i)) for i, n in enumerate(PREFIX_NAMES)]
    await store.create_jobs(jobs)
    for prefix in ("a", "ab", "ab\U0010ffff", "a\ud7ff", "\U0010ffff", "é", "c"):
        for order in JobOrder:
            want = expected([j for j in jobs if j.name.startswith(prefix)], order)
            assert await walk(store, order, 2, name_prefix=prefix) == want, (prefix, order)
