"""Conformance: the cheap reads of ``cronwheel status`` and ``cronwheel jobs why``."""

from __future__ import annotations

from datetime import timedelta

from cronwheel.core.model import (
    SHARED_WORKERS,
    AttemptOutcome,
    Overlap,
    RunState,
    WorkerInfo,
)
from cronwheel.store.base import Completion, PoolStatus, Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run


def _done(
    claimed: object, state: RunState, outcome: AttemptOutcome, lag: float, t: float
) -> Completion:
    run = claimed.run  # type: ignore[attr-defined]
    return Completion(
        run_id=run.id,
        fence=run.fence,
        worker_id="w1",
        state=state,
        outcome=outcome,
        started_at=at(t),
        finished_at=at(t),
        lag_seconds=lag,
        reason="attempts exhausted" if state is RunState.DEAD else None,
    )


async def _scenario(store: Store) -> None:
    """default/email: 3 succeeded (lags 0.1, 0.2, 0.9), 1 dead, 1 due, 1 not due yet;
    default/batch: 1 running; tenant t2/email: 3 running."""
    await store.ensure_tenant("t2", "Two", now=T0)
    email, batch = make_job(pool="email"), make_job(pool="batch")
    other = make_job(pool="email", tenant_id="t2")
    await store.create_jobs([email, batch, other])
    runs = [make_run(email, at(i)) for i in range(6)]
    runs[5] = make_run(email, at(500))
    runs += [make_run(batch, at(0)), make_run(other, at(0)), make_run(other, at(1))]
    runs += [make_run(other, at(2))]
    await store.materialize_runs(runs, [])
    claimed = await store.claim_runs(
        "w1",
        ["email"],
        limit=4,
        now=at(10),
        prefetch_until=at(10),
        lease_seconds=30,
        tenant_id="default",
    )
    outcomes = [(RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED, lag) for lag in (0.2, 0.9, 0.1)]
    outcomes.append((RunState.DEAD, AttemptOutcome.FAILED, 3.0))
    await store.complete_runs(
        [_done(c, s, o, lag, 11) for c, (s, o, lag) in zip(claimed, outcomes, strict=True)]
    )
    await store.claim_runs(
        "w1", ["batch"], limit=1, now=at(10), prefetch_until=at(10), lease_seconds=30
    )
    await store.claim_runs(
        "w2",
        ["email"],
        limit=5,
        now=at(12),
        prefetch_until=at(12),
        lease_seconds=30,
        tenant_id="t2",
    )


async def held_scenario(store: Store) -> Completion:
    """Runs held back by a limit, at 100 s (issue 29): pool keyed has a key of limit 1 with
    one run running and two due behind it (held), and a key of limit 2 with one due run
    and room (not held); pool queued has a job under ``overlap: queue`` with one run
    running and one due behind it (held), and an ordinary run due at 60 s. Returns the
    completion that frees the full key."""
    full = make_job(pool="keyed", next_fire_at=None)
    roomy = make_job(pool="keyed", next_fire_at=None)
    queued = make_job(pool="queued", overlap=Overlap.QUEUE, next_fire_at=None)
    plain = make_job(pool="queued", next_fire_at=None)
    await store.create_jobs([full, roomy, queued, plain])
    key = {"concurrency_key": "report:acme", "concurrency_limit": 1}
    queue = {"overlap": Overlap.QUEUE}
    await store.materialize_runs(
        [make_run(full, at(t), **key) for t in (0, 1, 2)]
        + [make_run(queued, at(t), **queue) for t in (0, 1)],
        [],
    )
    [running] = await store.claim_runs(
        "w1", ["keyed"], limit=5, now=at(5), prefetch_until=at(5), lease_seconds=600
    )
    [_] = await store.claim_runs(
        "w1", ["queued"], limit=5, now=at(5), prefetch_until=at(5), lease_seconds=600
    )
    await store.materialize_runs(
        [
            make_run(roomy, at(50), concurrency_key="report:beta", concurrency_limit=2),
            make_run(plain, at(60)),
        ],
        [],
    )
    return _done(running, RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED, 0.0, 100)


class StatusContract:
    """The cheap reads of ``cronwheel status`` and ``cronwheel jobs why``.

    Part of the ``status`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_pool_status_counts_one_tenant_or_all(self, store: Store) -> None:
        await _scenario(store)
        now = at(20)
        mine = await store.pool_status("default", now=now, since=now - timedelta(minutes=5))
        assert mine == [
            PoolStatus("batch", running=1),
            PoolStatus(
                "email",
                due=1,
                oldest_due_at=at(4),
                dead=1,
                finished=4,
                failures=1,
                lag_p50=0.2,  # nearest rank: ceil(0.5 * 4) = 2nd of 0.1, 0.2, 0.9, 3.0
                lag_p99=3.0,
            ),
        ]
        every = {p.pool: p for p in await store.pool_status(None, now=now, since=at(0))}
        assert every["email"].due + every["email"].running == 1 + 3  # t2's runs count too
        # An attempt outside the window counts no more.
        later = await store.pool_status("default", now=at(400), since=at(100))
        assert [(p.pool, p.finished, p.lag_p50) for p in later] == [
            ("batch", 0, None),
            ("email", 0, None),
        ]

    async def test_runs_held_back_by_a_limit_are_counted_apart_not_as_waiting(
        self, store: Store
    ) -> None:
        """A run waiting for its full concurrency key, or for the running run of its
        ``overlap: queue`` job, waits because a limit works: it is due (counted in
        ``due``), counted apart, and not the pool's oldest due run (issue 29)."""
        free_the_key = await held_scenario(store)
        now = at(100)
        found = await store.pool_status(None, now=now, since=at(0))
        assert found == [
            PoolStatus("keyed", due=3, held_by_key=2, oldest_due_at=at(50), running=1),
            PoolStatus("queued", due=2, held_by_overlap=1, oldest_due_at=at(60), running=1),
        ]
        # The key's run finishes: the two behind it wait no more for it, they are late.
        await store.complete_runs([free_the_key])
        keyed = (await store.pool_status("default", now=now, since=at(0)))[0]
        assert (keyed.due, keyed.held_by_key, keyed.oldest_due_at) == (3, 0, at(1))

    async def test_pool_status_of_another_tenant_shows_nothing_of_ours(self, store: Store) -> None:
        await _scenario(store)
        seen = await store.pool_status("nobody", now=at(20), since=at(0))
        assert seen == []

    async def test_live_workers_of_every_tenant(self, store: Store) -> None:
        for worker_id, tenant, seen in (("a", "t2", 10), ("b", SHARED_WORKERS, 10), ("c", "x", 0)):
            await store.register_worker(
                WorkerInfo(worker_id, tenant, "h", ("p",), 1, 0, at(0), at(seen))
            )
        found = await store.list_live_workers(seen_since=at(5))
        assert [(w.id, w.tenant_id) for w in found] == [("a", "t2"), ("b", SHARED_WORKERS)]

    async def test_runs_around_an_instant(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0)), make_run(job, at(60))], [])
        before, after = await store.runs_around("default", job.id, at(30))
        assert before is not None and after is not None
        assert (before.scheduled_for, after.scheduled_for) == (at(0), at(60))
        exact, _ = await store.runs_around("default", job.id, at(60))
        assert exact is not None and exact.scheduled_for == at(60)
        assert await store.runs_around("t2", job.id, at(30)) == (None, None)
        assert await store.runs_around("default", "not-a-job", at(30)) == (None, None)

    async def test_replication_of_a_server_without_standby_is_none(self, store: Store) -> None:
        """The tests' server streams to no standby, and an SQLite file never does: ``none``.
        A synchronous standby is seen by tests/e2e/test_pg_standby.py."""
        found = await store.replication()
        assert (found.mode, found.standbys) == ("none", 0)
