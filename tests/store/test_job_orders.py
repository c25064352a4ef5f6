"""Conformance: the jobs list in every order (creation, name, next fire time; either
way), paged with a keyset cursor that gives every job exactly once, with every filter,
while jobs are inserted, and read by walking an index (migration 0010)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pytest

from cronwheel.core.model import (
    AttemptOutcome,
    Job,
    JobKey,
    JobOrder,
    JobState,
    LastOutcome,
    RunState,
)
from cronwheel.errors import InvalidInput
from cronwheel.store.base import Completion, Store
from cronwheel.store.postgres import PostgresStore
from cronwheel.store.sqlite import SqliteStore
from tests.store.factories import T0, at, make_job, make_run

ALL = list(JobOrder)
NEVER = datetime.max.replace(tzinfo=T0.tzinfo)


def sort_value(order: JobOrder, job: Job) -> tuple[Any, ...]:
    """What the order sorts by, in Python: the reference the stores must agree with."""
    if order.sort_key == "name":
        return (job.name, job.id)
    if order.sort_key == "next_fire":
        fires = job.state is JobState.ACTIVE and job.next_fire_at is not None
        return (job.next_fire_at if fires else NEVER, job.id)
    return (job.id,)


def expected(jobs: Sequence[Job], order: JobOrder) -> list[str]:
    ranked = sorted(jobs, key=lambda j: sort_value(order, j), reverse=order.descending)
    return [j.id for j in ranked]


async def walk(store: Store, order: JobOrder, size: int, **filters: Any) -> list[str]:
    """Every page of the list in ``order``, each starting after the previous one's last."""
    seen: list[str] = []
    after: JobKey | None = None
    while True:
        page = await store.list_jobs("default", order=order, after=after, limit=size, **filters)
        seen += [j.id for j in page]
        if len(page) < size:
            return seen
        after = order.key(page[-1])


async def _mixed(store: Store) -> list[Job]:
    """Jobs whose names and next fire times tie, differ by case, accents and one
    microsecond, and some that will not fire (paused, cancelled, finished, manual)."""
    shared = at(3600)
    jobs = [
        make_job("beta", next_fire_at=shared),
        make_job("Alpha", next_fire_at=at(10)),
        make_job("alpha", next_fire_at=shared),
        make_job("émile", next_fire_at=at(10).replace(microsecond=1), pool="other"),
        make_job("zeta", next_fire_at=None, state=JobState.PAUSED),
        make_job("a b", next_fire_at=shared, schedule={"kind": "interval", "every_seconds": 9}),
        make_job("Zulu", next_fire_at=None, state=JobState.COMPLETED),
        make_job("日本", next_fire_at=at(-5)),
        make_job("a-1", next_fire_at=shared),
        make_job("a_1", next_fire_at=at(1), state=JobState.PAUSED),  # kept for a resume
        make_job("by-hand", next_fire_at=None, schedule={"kind": "manual"}),
    ]
    await store.create_jobs(jobs)
    # A cancelled job keeps its name, and a new one takes it: the same name twice.
    await store.set_job_state(
        "default", jobs[0].id, JobState.CANCELLED, next_fire_at=None, now=T0, actor="t"
    )
    again = make_job("beta", next_fire_at=shared)
    await store.create_jobs([again])
    return await store.list_jobs("default", limit=100)


@pytest.mark.parametrize("order", ALL, ids=[o.value for o in ALL])
async def test_each_order_pages_through_every_job_once(store: Store, order: JobOrder) -> None:
    jobs = await _mixed(store)
    assert len(jobs) == 12
    want = expected(jobs, order)
    assert [j.id for j in await store.list_jobs("default", order=order)] == want
    for size in (1, 2, 3, 12):
        assert await walk(store, order, size) == want, size


async def test_jobs_that_will_not_fire_come_last_then_first(store: Store) -> None:
    """Not active (a paused job keeps the next fire time a resume starts from), or
    active without a next fire time (a manual job)."""
    jobs = await _mixed(store)
    idle = {j.id for j in jobs if j.state is not JobState.ACTIVE or j.next_fire_at is None}
    assert sorted(j.name for j in jobs if j.id in idle) == [
        "Zulu", "a_1", "beta", "by-hand", "zeta"
    ]  # fmt: skip
    ascending = await store.list_jobs("default", order=JobOrder.NEXT_FIRE)
    assert {j.id for j in ascending[-5:]} == idle
    descending = await store.list_jobs("default", order=JobOrder.NEXT_FIRE_DESC)
    assert {j.id for j in descending[:5]} == idle
    fires = [j.next_fire_at for j in jobs if j.id not in idle]
    assert [j.next_fire_at for j in descending[5:]] == sorted(fires, reverse=True)  # type: ignore[type-var]


async def test_names_sort_by_code_point_on_both_stores(store: Store) -> None:
    """Upper case before lower case, accents and other scripts after ASCII: the same
    byte order on SQLite (BINARY) and PostgreSQL (COLLATE "C"), whatever the locale."""
    await _mixed(store)
    names = [j.name for j in await store.list_jobs("default", order=JobOrder.NAME)]
    assert names == [
        "Alpha", "Zulu", "a b", "a-1", "a_1", "alpha", "beta", "beta", "by-hand", "zeta",
        "émile", "日本",
    ]  # fmt: skip


@pytest.mark.parametrize("order", ALL, ids=[o.value for o in ALL])
async def test_a_cursor_stays_stable_while_jobs_are_inserted(store: Store, order: JobOrder) -> None:
    """Jobs created between pages appear once if they sort after the cursor, and never
    push a job already shown into a later page, nor one not shown out of the list."""
    start = await _mixed(store)
    seen: list[Job] = []
    after: JobKey | None = None
    for n in range(100):
        page = await store.list_jobs("default", order=order, after=after, limit=2)
        seen += page
        if len(page) < 2:
            break
        after = order.key(page[-1])
        # One before the cursor, one after it, one that ties with it but for its id.
        await store.create_jobs(
            [
                make_job(f"{'' if n % 2 else '~'}new-{n}", next_fire_at=at(n * 997 % 4000)),
                make_job(f"new-{n}-b", next_fire_at=None if n % 3 == 0 else at(-n)),
            ]
        )
    ids = [j.id for j in seen]
    assert len(ids) == len(set(ids))
    assert {j.id for j in start} <= set(ids)
    ranked = [sort_value(order, j) for j in seen]
    assert ranked == sorted(ranked, reverse=order.descending)


@pytest.mark.parametrize("order", ALL, ids=[o.value for o in ALL])
async def test_every_filter_in_every_order(store: Store, order: JobOrder) -> None:
    jobs = await _mixed(store)
    dead = next(j for j in jobs if j.name == "alpha")
    await store.materialize_runs([make_run(dead, at(0))], [])
    [claimed] = await store.claim_runs(
        "w", ["default"], limit=1, now=at(0), prefetch_until=at(0), lease_seconds=30
    )
    await store.complete_runs(
        [
            Completion(
                claimed.run.id, claimed.run.fence, "w", RunState.DEAD, AttemptOutcome.FAILED,
                at(0), at(1), error_class="E", error_message="boom",
            )
        ]
    )  # fmt: skip
    some = next(j for j in jobs if j.name == "a-1").id
    cases: list[tuple[dict[str, Any], Callable[[Job], bool]]] = [
        ({"state": JobState.ACTIVE}, lambda j: j.state is JobState.ACTIVE),
        ({"state": JobState.PAUSED}, lambda j: j.state is JobState.PAUSED),
        ({"pool": "default"}, lambda j: j.pool == "default"),
        ({"name_prefix": "a"}, lambda j: j.name.startswith("a")),
        ({"name": "beta"}, lambda j: j.name == "beta"),
        ({"schedule_kind": "cron"}, lambda j: j.schedule["kind"] == "cron"),
        ({"last_outcome": LastOutcome.DEAD}, lambda j: j.id == dead.id),
        ({"last_outcome": LastOutcome.NONE}, lambda j: j.id != dead.id),
        ({"id_prefix": some[:-2]}, lambda j: j.id.startswith(some[:-2])),
        (
            {"state": JobState.ACTIVE, "name_prefix": "a", "schedule_kind": "cron"},
            lambda j: (
                j.state is JobState.ACTIVE
                and j.name.startswith("a")
                and j.schedule["kind"] == "cron"
            ),
        ),
    ]
    for filters, keep in cases:
        want = expected([j for j in jobs if keep(j)], order)
        assert want, filters
        assert await walk(store, order, 2, **filters) == want, filters
    assert await store.list_jobs("nobody", order=order) == []


async def test_a_position_of_another_order_is_refused(store: Store) -> None:
    job = make_job()
    await store.create_jobs([job])
    for order, value in (
        (JobOrder.NAME, at(0)),
        (JobOrder.NAME, None),
        (JobOrder.NEXT_FIRE_DESC, "a name"),
        (JobOrder.CREATED, "a name"),
    ):
        with pytest.raises(InvalidInput) as err:
            await store.list_jobs("default", order=order, after=JobKey(job.id, value))
        assert err.value.field == "after"


# -- plans: a page walks an index, it never sorts the tenant's jobs ------------------------
PLAN_JOBS = 5_000


def _queries() -> list[tuple[str, JobOrder, dict[str, Any]]]:
    """Each order both ways, first and later pages, alone and with the usual filters."""
    middle = {
        "created": JobKey("0190d5f0-0000-7000-8000-000000000000"),
        "name": JobKey("0190d5f0-0000-7000-8000-000000000000", "job-02500"),
        "next_fire": JobKey("0190d5f0-0000-7000-8000-000000000000", at(2500)),
    }
    found = []
    for order in JobOrder:
        for after in (None, middle[order.sort_key]):
            for filters in ({}, {"state": JobState.ACTIVE}, {"pool": "default"}):
                found.append((order.value, order, {"after": after, **filters}))
    return found


async def _plan_store(store: Store) -> None:
    jobs = [
        make_job(
            f"job-{i:05d}",
            next_fire_at=None if i % 10 == 0 else at(i % 3000),
            state=JobState.PAUSED if i % 10 == 0 else JobState.ACTIVE,
        )
        for i in range(PLAN_JOBS)
    ]
    await store.create_jobs(jobs)
    for tenant in ("t1", "t2"):  # other tenants' jobs, as the index holds them too
        await store.ensure_tenant(tenant, tenant, now=T0)
        await store.create_jobs([make_job(tenant_id=tenant) for _ in range(PLAN_JOBS)])


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


def _index_conds(node: Any) -> list[str]:
    """Every ``Index Cond`` of a JSON plan: what an index scan searches by, not filters."""
    if isinstance(node, list):
        return [c for item in node for c in _index_conds(item)]
    if not isinstance(node, dict):
        return []
    found = [node["Index Cond"]] if "Index Cond" in node else []
    return found + [c for value in node.values() for c in _index_conds(value)]


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


# -- a name prefix: the same jobs whichever way a page reads them --------------------------
PREFIX_NAMES = [
    "a",
    "ab",
    "abc",
    "ab\U0010ffff",
    "ab\U0010ffffz",
    "ac",
    "aé",
    "a\ud7ffz",
    "a\ue000",
    "b",
    "\U0010ffff",
    "\U0010ffffx",
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
