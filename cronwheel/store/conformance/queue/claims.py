"""Conformance: claiming runs — order, pools, prefetch, leases, fences (I3)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from cronwheel.core.model import Priority, RunState
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at, make_job, make_run


class ClaimsContract:
    """Claiming runs — order, pools, prefetch, leases, fences (I3).

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_claim_orders_by_priority_then_due_time(self, store: Store) -> None:
        low, critical = make_job(priority=Priority.LOW), make_job(priority=Priority.CRITICAL)
        normal = make_job()
        await store.create_jobs([low, critical, normal])
        await store.materialize_runs(
            [
                make_run(low, at(-30)),
                make_run(normal, at(-10)),
                make_run(critical, at(-5)),
                make_run(normal, at(-20)),
            ],
            [],
        )
        claimed = await store.claim_runs(
            "w1", ["default"], limit=10, now=at(0), prefetch_until=at(0), lease_seconds=30
        )
        assert [(c.run.job_id, c.run.scheduled_for) for c in claimed] == [
            (critical.id, at(-5)),
            (normal.id, at(-20)),
            (normal.id, at(-10)),
            (low.id, at(-30)),
        ]

    async def test_claim_takes_only_its_pools_and_what_is_due(self, store: Store) -> None:
        mail, other = make_job(pool="mail"), make_job(pool="reports")
        await store.create_jobs([mail, other])
        await store.materialize_runs(
            [
                make_run(mail, at(0)),
                make_run(mail, at(5)),
                make_run(mail, at(60)),
                make_run(other, at(0)),
            ],
            [],
        )
        claimed = await store.claim_runs(
            "w1", ["mail"], limit=10, now=at(0), prefetch_until=at(5), lease_seconds=30
        )
        assert [c.run.scheduled_for for c in claimed] == [at(0), at(5)]
        assert (
            await store.claim_runs(
                "w1", ["mail"], limit=10, now=at(0), prefetch_until=at(5), lease_seconds=30
            )
            == []
        )

    async def test_a_claim_leases_fences_and_carries_the_job(self, store: Store) -> None:
        job = make_job(timeout_seconds=7.0)
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(10))], [])
        [claimed] = await store.claim_runs(
            "w1", ["default"], limit=5, now=at(0), prefetch_until=at(10), lease_seconds=30
        )
        run = claimed.run
        assert (run.state, run.attempt, run.fence, run.lease_owner) == (
            RunState.RUNNING,
            1,
            1,
            "w1",
        )
        # a prefetched run's lease covers its wait until it is due
        assert run.lease_expires_at == at(40)
        assert (claimed.job_name, claimed.action, claimed.payload) == (
            job.name,
            job.action,
            job.payload,
        )
        assert (claimed.retry, claimed.timeout_seconds, claimed.delivery) == (
            job.retry,
            7.0,
            job.delivery,
        )

    async def test_claim_respects_the_limit(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(-i)) for i in range(10)], [])
        got = await store.claim_runs(
            "w", ["default"], limit=3, now=at(0), prefetch_until=at(0), lease_seconds=5
        )
        assert len(got) == 3
        assert (
            await store.claim_runs(
                "w", [], limit=3, now=at(0), prefetch_until=at(0), lease_seconds=5
            )
            == []
        )

    async def test_an_urgent_claim_is_the_same_claim(self, store: Store) -> None:
        # A worker's peek (decision 0028) claims with urgent=True, beside its other claims:
        # the same order, leases and fences, never a run another claim holds.
        low, critical = make_job(priority=Priority.LOW), make_job(priority=Priority.CRITICAL)
        await store.create_jobs([low, critical])
        await store.materialize_runs(
            [make_run(low, at(-30)), make_run(critical, at(-5)), make_run(low, at(-20))], []
        )
        urgent, plain = await asyncio.gather(
            store.claim_runs(
                "w1",
                ["default"],
                limit=2,
                now=at(0),
                prefetch_until=at(0),
                lease_seconds=30,
                started=False,
                urgent=True,
            ),
            store.claim_runs(
                "w1", ["default"], limit=10, now=at(0), prefetch_until=at(0), lease_seconds=30
            ),
        )
        assert len(urgent) + len(plain) == 3
        assert {c.run.id for c in urgent}.isdisjoint(c.run.id for c in plain)
        alone = await store.claim_runs(
            "w1", ["default"], limit=2, now=at(0), prefetch_until=at(60), lease_seconds=30
        )
        assert alone == []
        again = [make_run(low, at(1)), make_run(critical, at(2))]
        await store.materialize_runs(again, [])
        got = await store.claim_runs(
            "w1",
            ["default"],
            limit=5,
            now=at(0),
            prefetch_until=at(5),
            lease_seconds=30,
            started=False,
            urgent=True,
        )
        assert [(c.run.job_id, c.run.scheduled_for) for c in got] == [
            (critical.id, at(2)),
            (low.id, at(1)),
        ]
        assert {(c.run.state, c.run.fence, c.run.started_at) for c in got} == {
            (RunState.RUNNING, 1, None)
        }
        assert [c.run.lease_expires_at for c in got] == [at(32), at(31)]

    async def test_concurrent_claimers_never_get_the_same_run(
        self, store: Store, store2: Store
    ) -> None:
        jobs = [make_job() for _ in range(10)]
        await store.create_jobs(jobs)
        await store.materialize_runs([make_run(j, at(-s)) for j in jobs for s in range(30)], [])

        async def drain(s: Store, worker: str) -> list[int]:
            got: list[int] = []
            while batch := await s.claim_runs(
                worker, ["default"], limit=7, now=at(0), prefetch_until=at(0), lease_seconds=60
            ):
                got.extend(c.run.id for c in batch)
            return got

        results = await asyncio.gather(
            *(drain(s, f"w{i}") for i, s in enumerate([store, store2] * 2))
        )
        claimed = [run_id for r in results for run_id in r]
        assert len(claimed) == 300
        assert len(set(claimed)) == 300

    async def test_lease_until_uses_now_for_overdue_runs(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(-100))], [])
        [c] = await store.claim_runs(
            "w", ["default"], limit=1, now=at(0), prefetch_until=at(0), lease_seconds=2.5
        )
        assert c.run.lease_expires_at == at(0) + timedelta(seconds=2.5)

    async def test_a_claim_for_one_tenant_takes_only_its_runs(self, store: Store) -> None:
        await store.ensure_tenant("acme", "Acme", now=at(0))
        ours, theirs = make_job(tenant_id="acme"), make_job()
        await store.create_jobs([ours, theirs])
        await store.materialize_runs([make_run(ours, at(0)), make_run(theirs, at(-1))], [])
        claimed = await store.claim_runs(
            "w",
            ["default"],
            limit=10,
            now=at(0),
            prefetch_until=at(0),
            lease_seconds=5,
            tenant_id="acme",
        )
        assert [c.run.job_id for c in claimed] == [ours.id]
        rest = await store.claim_runs(
            "w", ["default"], limit=10, now=at(0), prefetch_until=at(0), lease_seconds=5
        )
        assert [c.run.job_id for c in rest] == [theirs.id]
