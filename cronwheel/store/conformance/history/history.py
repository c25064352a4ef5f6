"""Conformance: the reads of the dashboard's overview, the attempts of the last hour per
pool and minute, and the tenant's jobs per state."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronwheel.core.model import AttemptOutcome, JobState, RunState
from cronwheel.store.base import AttemptBucket, Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run

OK = (RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED)
FAIL = (RunState.DEAD, AttemptOutcome.FAILED)
TIMED_OUT = (RunState.DEAD, AttemptOutcome.TIMED_OUT)
CANCELLED = (RunState.CANCELLED, AttemptOutcome.CANCELLED)


async def _finish(
    store: Store, tenant: str, pool: str, ends: list[tuple[float, tuple[RunState, AttemptOutcome]]]
) -> None:
    """One run of a new job of ``tenant`` in ``pool`` per end: claimed, then finished at
    its second with its outcome."""
    job = make_job(pool=pool, tenant_id=tenant)
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(-100 + i)) for i in range(len(ends))], [])
    claimed = await store.claim_runs(
        "w1",
        [pool],
        limit=len(ends),
        now=at(-50),
        prefetch_until=at(-50),
        lease_seconds=3600,
        tenant_id=tenant,
    )
    assert len(claimed) == len(ends)
    await store.complete_runs(
        [
            Completion(
                run_id=c.run.id,
                fence=c.run.fence,
                worker_id="w1",
                state=state,
                outcome=outcome,
                started_at=at(-50),
                finished_at=at(t),
                lag_seconds=0.1,
                reason="attempts exhausted" if state is RunState.DEAD else None,
            )
            for c, (t, (state, outcome)) in zip(claimed, ends, strict=True)
        ]
    )


class HistoryContract:
    """The reads of the dashboard's overview, the attempts of the last hour per.

    Part of the ``history`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_attempt_history_counts_per_pool_and_bucket(self, store: Store) -> None:
        await store.ensure_tenant("t2", "Two", now=at(0))
        # Bucket k of 60 s holds (60k, 60(k+1)]: 0 is before the window, 60 the end of bucket 0.
        await _finish(
            store,
            "default",
            "email",
            [
                (0, OK),
                (11, OK),
                (12, FAIL),
                (60, OK),
                (61, TIMED_OUT),
                (61.5, CANCELLED),
                (180, OK),
            ],
        )
        await _finish(store, "default", "batch", [(100, FAIL)])
        await _finish(store, "t2", "email", [(30, FAIL), (181, OK)])

        mine = await store.attempt_history("default", since=at(0), now=at(180), bucket_seconds=60)
        assert mine == [
            AttemptBucket("batch", 1, finished=1, failures=1),
            AttemptBucket("email", 0, finished=3, failures=1),
            AttemptBucket("email", 1, finished=2, failures=1),  # a cancel is not a failure
            AttemptBucket("email", 2, finished=1, failures=0),
        ]
        every = await store.attempt_history(None, since=at(0), now=at(180), bucket_seconds=60)
        assert [(b.pool, b.bucket, b.finished, b.failures) for b in every] == [
            ("batch", 1, 1, 1),
            ("email", 0, 4, 2),  # t2's attempt at 30 s counts too; its one at 181 s is after now
            ("email", 1, 2, 1),
            ("email", 2, 1, 0),
        ]
        assert (
            await store.attempt_history("nobody", since=at(0), now=at(180), bucket_seconds=60) == []
        )
        assert (
            await store.attempt_history("default", since=at(200), now=at(300), bucket_seconds=60)
            == []
        )

    async def test_attempt_history_is_bounded(self, store: Store) -> None:
        with pytest.raises(ValueError, match="bucket_seconds"):
            await store.attempt_history(None, since=at(0), now=at(60), bucket_seconds=0)
        with pytest.raises(ValueError, match="at most 1440"):
            await store.attempt_history(
                None, since=at(0), now=at(0) + timedelta(days=2), bucket_seconds=60
            )
        day = await store.attempt_history(
            None, since=at(0), now=at(0) + timedelta(days=1), bucket_seconds=60
        )
        assert day == []

    async def test_jobs_by_state_of_one_tenant(self, store: Store) -> None:
        await store.ensure_tenant("t2", "Two", now=at(0))
        jobs = [make_job() for _ in range(3)] + [make_job(tenant_id="t2")]
        await store.create_jobs(jobs)
        await store.set_job_state(
            "default", jobs[0].id, JobState.PAUSED, next_fire_at=None, now=at(1), actor="test"
        )
        assert await store.count_jobs_by_state("default") == {
            JobState.ACTIVE: 2,
            JobState.PAUSED: 1,
        }
        assert await store.count_jobs_by_state("t2") == {JobState.ACTIVE: 1}
        assert await store.count_jobs_by_state("nobody") == {}
