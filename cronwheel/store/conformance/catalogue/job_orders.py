"""Conformance: the jobs list in every order (creation, name, next fire time; either
way), paged with a keyset cursor that gives every job exactly once, with every filter,
while jobs are inserted, and read by walking an index (migration 0010)."""

from __future__ import annotations

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
from cronwheel.store.conformance.factories import T0, at, make_job, make_run

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


def _index_conds(node: Any) -> list[str]:
    """Every ``Index Cond`` of a JSON plan: what an index scan searches by, not filters."""
    if isinstance(node, list):
        return [c for item in node for c in _index_conds(item)]
    if not isinstance(node, dict):
        return []
    found = [node["Index Cond"]] if "Index Cond" in node else []
    return found + [c for value in node.values() for c in _index_conds(value)]


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


class JobOrdersContract:
    """The jobs list in every order (creation, name, next fire time; either.

    Part of the ``catalogue`` seam's contract: subclass it with a ``store`` fixture to
    run it against a store (:mod:`cronwheel.store.conformance`)."""

    @pytest.mark.parametrize("order", ALL, ids=[o.value for o in ALL])
    async def test_each_order_pages_through_every_job_once(
        self, store: Store, order: JobOrder
    ) -> None:
        jobs = await _mixed(store)
        assert len(jobs) == 12
        want = expected(jobs, order)
        assert [j.id for j in await store.list_jobs("default", order=order)] == want
        for size in (1, 2, 3, 12):
            assert await walk(store, order, size) == want, size

    async def test_jobs_that_will_not_fire_come_last_then_first(self, store: Store) -> None:
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

    async def test_names_sort_by_code_point_on_both_stores(self, store: Store) -> None:
        """Upper case before lower case, accents and other scripts after ASCII: the same
        byte order on SQLite (BINARY) and PostgreSQL (COLLATE "C"), whatever the locale."""
        await _mixed(store)
        names = [j.name for j in await store.list_jobs("default", order=JobOrder.NAME)]
        assert names == [
            "Alpha", "Zulu", "a b", "a-1", "a_1", "alpha", "beta", "beta", "by-hand", "zeta",
            "émile", "日本",
        ]  # fmt: skip

    @pytest.mark.parametrize("order", ALL, ids=[o.value for o in ALL])
    async def test_a_cursor_stays_stable_while_jobs_are_inserted(
        self, store: Store, order: JobOrder
    ) -> None:
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
    async def test_every_filter_in_every_order(self, store: Store, order: JobOrder) -> None:
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

    async def test_a_position_of_another_order_is_refused(self, store: Store) -> None:
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
