"""Conformance: the metrics scrape's one read of the store (``read_gauges``)."""

from __future__ import annotations

from dataclasses import replace

from cronwheel.core.model import SCHEDULER_TENANT, AttemptOutcome, Priority, RunState
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.catalogue.tenants_keys_workers import make_worker
from cronwheel.store.conformance.factories import T0, at, make_job, make_run
from cronwheel.store.conformance.status.status import held_scenario


class GaugesContract:
    """The metrics scrape's one read of the store (``read_gauges``).

    Part of the ``status`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_gauges_count_due_running_dead_and_live_workers(self, store: Store) -> None:
        await store.ensure_tenant("acme", "Acme", now=T0)
        reports = make_job(pool="reports")
        urgent = make_job(pool="reports", priority=Priority.HIGH)
        mail = make_job(pool="mail")
        acme = make_job(pool="mail", tenant_id="acme")
        await store.create_jobs([reports, urgent, mail, acme])
        await store.materialize_runs(
            [
                make_run(reports, at(1)),
                make_run(reports, at(4)),
                make_run(reports, at(100)),  # not due yet: not counted
                make_run(urgent, at(2)),
                make_run(mail, at(0)),
                make_run(mail, at(3)),
                make_run(acme, at(0)),
            ],
            [],
        )
        # mail: one run held by a worker, one dead, one succeeded (history: not counted)
        claimed = await store.claim_runs(
            "w1", ["mail"], limit=3, now=at(5), prefetch_until=at(5), lease_seconds=60
        )
        of = {(c.run.job_id, c.run.scheduled_for): c for c in claimed}
        held, dying, done = of[mail.id, at(3)], of[mail.id, at(0)], of[acme.id, at(0)]
        finished = [
            Completion(
                run_id=c.run.id,
                fence=c.run.fence,
                worker_id="w1",
                state=state,
                outcome=outcome,
                started_at=at(5),
                finished_at=at(6),
            )
            for c, state, outcome in (
                (dying, RunState.DEAD, AttemptOutcome.PERMANENT),
                (done, RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED),
            )
        ]
        assert len(await store.complete_runs(finished)) == 2
        assert held.run.state is RunState.RUNNING
        await store.register_worker(
            make_worker("w1", pools=("reports", "mail"), last_seen_at=at(9))
        )
        await store.register_worker(make_worker("w2", pools=("reports",), last_seen_at=at(9)))
        await store.register_worker(make_worker("old", pools=("reports",), last_seen_at=at(-60)))
        scheduler = make_worker(
            "s1", tenant_id=SCHEDULER_TENANT, pools=("reports",), last_seen_at=at(9)
        )
        await store.register_worker(scheduler)

        g = await store.read_gauges(now=at(10), workers_seen_since=at(0))

        assert g.read_at == at(10)
        assert g.due == {
            ("reports", Priority.NORMAL): 2,
            ("reports", Priority.HIGH): 1,
        }
        assert g.oldest_due == {"reports": at(1)}
        assert g.running == {"mail": 1}
        assert g.dead == {"default": 1}
        assert g.workers == {"reports": 2, "mail": 1}

    async def test_runs_held_back_by_a_limit_are_not_the_oldest_due_run(self, store: Store) -> None:
        """``cronwheel_oldest_due_run_age_seconds`` leaves out the runs a full concurrency
        key or an ``overlap: queue`` job's running run holds back, and
        ``cronwheel_runs_held`` counts them (issue 29, decision 0042)."""
        await held_scenario(store)
        g = await store.read_gauges(now=at(100), workers_seen_since=at(0))
        assert g.due == {("keyed", Priority.NORMAL): 3, ("queued", Priority.NORMAL): 2}
        assert g.oldest_due == {"keyed": at(50), "queued": at(60)}
        assert g.held == {("keyed", "concurrency_key"): 2, ("queued", "overlap_queue"): 1}

    async def test_gauges_of_an_empty_store_are_empty(self, store: Store) -> None:
        g = await store.read_gauges(now=T0, workers_seen_since=T0)
        assert (g.due, g.oldest_due, g.running, g.dead, g.workers) == ({}, {}, {}, {}, {})

    async def test_a_dead_run_of_another_tenant_counts_for_that_tenant(self, store: Store) -> None:
        await store.ensure_tenant("acme", "Acme", now=T0)
        job = make_job(pool="mail", tenant_id="acme")
        await store.create_jobs([job])
        await store.materialize_runs([replace(make_run(job, at(0)), max_attempts=1)], [])
        [claimed] = await store.claim_runs(
            "w1", ["mail"], limit=1, now=at(0), prefetch_until=at(0), lease_seconds=60
        )
        dead = Completion(
            run_id=claimed.run.id,
            fence=claimed.run.fence,
            worker_id="w1",
            state=RunState.DEAD,
            outcome=AttemptOutcome.FAILED,
            started_at=at(0),
            finished_at=at(1),
        )
        assert await store.complete_runs([dead]) == [claimed.run.id]
        g = await store.read_gauges(now=at(2), workers_seen_since=at(0))
        assert g.dead == {"acme": 1}
        assert g.due == {} and g.running == {}
