"""Conformance: runs enqueued to a manual job, each with its own payload."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from cronwheel.core.model import ClaimedRun, Job, JobState, NewRun, RunState
from cronwheel.errors import Conflict, NotFound, StaleVersion
from cronwheel.store.base import ENQUEUE_CHUNK, Store
from cronwheel.store.conformance.factories import at, make_job, make_run

MANUAL = {"kind": "manual"}
_US = timedelta(microseconds=1)


def _manual_job(**overrides: Any) -> Job:
    return make_job(schedule=MANUAL, next_fire_at=None, **overrides)


def _template(job: Job, now_s: float = 0, **overrides: object) -> NewRun:
    return make_run(job, at(now_s), reason="enqueued by tester", **overrides)


def _texts(*payloads: object) -> list[str | None]:
    return [None if p is None else json.dumps(p) for p in payloads]


async def _claim_all(
    store: Store, now_s: float, pools: list[str] | None = None
) -> list[ClaimedRun]:
    return await store.claim_runs(
        "w",
        pools or ["default"],
        limit=100,
        now=at(now_s),
        prefetch_until=at(now_s),
        lease_seconds=30,
    )


class EnqueueContract:
    """Runs enqueued to a manual job, each with its own payload.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_each_payload_becomes_a_pending_run_due_now_in_order(self, store: Store) -> None:
        job = _manual_job()
        await store.create_jobs([job])
        ids = await store.enqueue_runs(_template(job), _texts({"k": 1}, None, [1, "two"]))
        assert len(ids) == 3 and ids == sorted(ids)
        runs = sorted(await store.list_runs(job.tenant_id, job_id=job.id), key=lambda r: r.id)
        assert [r.id for r in runs] == ids
        assert [r.payload for r in runs] == [{"k": 1}, None, [1, "two"]]
        assert {(r.state, r.available_at, r.reason) for r in runs} == {
            (RunState.PENDING, at(0), "enqueued by tester")
        }
        # One microsecond apart from the enqueue instant: each its own key.
        assert [r.scheduled_for for r in runs] == [at(0), at(0) + _US, at(0) + 2 * _US]
        assert len({r.idempotency_key for r in runs}) == 3

    async def test_a_claim_hands_the_runs_own_payload_or_else_the_jobs(self, store: Store) -> None:
        job = _manual_job(payload={"from": "job"})
        await store.create_jobs([job])
        ids = await store.enqueue_runs(_template(job), _texts({"from": "run"}, None))
        claimed = sorted(await _claim_all(store, 1), key=lambda c: c.run.id)
        assert [(c.run.id, c.payload) for c in claimed] == [
            (ids[0], {"from": "run"}),
            (ids[1], {"from": "job"}),
        ]

    async def test_a_later_enqueue_starts_after_the_jobs_latest_run(self, store: Store) -> None:
        job = _manual_job()
        await store.create_jobs([job])
        first = await store.enqueue_runs(_template(job, 10), _texts(1, 2))
        # An enqueue stamped earlier (another API process whose clock is behind) and one at
        # the very same instant both follow the runs already there: no run is dropped.
        behind = await store.enqueue_runs(_template(job, 5), _texts(3))
        same = await store.enqueue_runs(_template(job, 10), _texts(4))
        runs = {r.id: r for r in await store.list_runs(job.tenant_id, job_id=job.id)}
        instants = [runs[i].scheduled_for for i in [*first, *behind, *same]]
        assert instants == [at(10) + k * _US for k in range(4)]
        assert [runs[i].payload for i in [*first, *behind, *same]] == [1, 2, 3, 4]

    async def test_a_big_batch_spans_statements_all_or_nothing(self, store: Store) -> None:
        job = _manual_job()
        await store.create_jobs([job])
        n = 2 * ENQUEUE_CHUNK + 345
        ids = await store.enqueue_runs(_template(job), _texts(*range(n)))
        assert len(set(ids)) == n and ids == sorted(ids)
        runs = await store.list_runs(job.tenant_id, job_id=job.id, limit=n)
        assert sorted(r.payload for r in runs) == list(range(n))
        assert len({r.scheduled_for for r in runs}) == n

    async def test_racing_enqueues_to_one_job_lose_no_run(
        self, store: Store, store2: Store
    ) -> None:
        job = _manual_job()
        await store.create_jobs([job])
        batches = [
            store.enqueue_runs(_template(job), _texts(*(f"a{i}" for i in range(700)))),
            store2.enqueue_runs(_template(job), _texts(*(f"b{i}" for i in range(700)))),
            store.enqueue_runs(_template(job), _texts(*(f"c{i}" for i in range(700)))),
        ]
        results = await asyncio.gather(*batches)
        assert [len(r) for r in results] == [700, 700, 700]
        runs = await store.list_runs(job.tenant_id, job_id=job.id, limit=5000)
        assert len(runs) == 2100 == len({r.scheduled_for for r in runs})
        assert sorted(r.id for r in runs) == sorted(i for r in results for i in r)

    async def test_unknown_and_foreign_jobs_are_not_found(self, store: Store) -> None:
        job = _manual_job()
        await store.create_jobs([job])
        for template in (
            _template(replace(job, id="not-a-uuid")),
            _template(replace(job, id=make_job().id)),
            _template(replace(job, tenant_id="someone-else")),
        ):
            with pytest.raises(NotFound):
                await store.enqueue_runs(template, _texts(1))
        assert await store.list_runs(job.tenant_id, job_id=job.id) == []

    async def test_a_job_not_active_or_changed_takes_no_runs(self, store: Store) -> None:
        job = _manual_job()
        await store.create_jobs([job])
        with pytest.raises(StaleVersion):
            await store.enqueue_runs(_template(job, job_version=job.version + 1), _texts(1))
        paused = await store.set_job_state(
            job.tenant_id, job.id, JobState.PAUSED, next_fire_at=None, now=at(1), actor="ops"
        )
        with pytest.raises(Conflict, match="paused"):
            await store.enqueue_runs(_template(job, job_version=paused.version), _texts(1))
        assert await store.list_runs(job.tenant_id, job_id=job.id) == []
        assert await store.enqueue_runs(_template(job, job_version=paused.version), []) == []

    async def test_an_enqueue_wakes_the_pools_workers(self, store: Store) -> None:
        job = _manual_job(pool="mail")
        await store.create_jobs([job])
        assert await store.wait(["runs:mail"], timeout=0.01) is False  # now listening
        waiter = asyncio.create_task(store.wait(["runs:mail"], timeout=30))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await store.enqueue_runs(_template(job), _texts({"to": "a@example.com"}))
        assert await asyncio.wait_for(waiter, 10) is True
        [claimed] = await _claim_all(store, 1, ["mail"])
        assert claimed.payload == {"to": "a@example.com"}
