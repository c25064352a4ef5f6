"""Conformance: overlap policies applied at claim time, one run per job at a time."""

from __future__ import annotations

from cronwheel.core.model import Job, Overlap, RunState
from cronwheel.store.base import Claim, Store
from cronwheel.store.conformance.factories import at, make_job, make_run


async def _claim(store: Store, now: float, worker: str = "w", prefetch: float = 0) -> Claim:
    return await store.claim_runs(
        worker,
        ["default"],
        limit=10,
        now=at(now),
        prefetch_until=at(now + prefetch),
        lease_seconds=60,
    )


async def _job(store: Store, overlap: Overlap, *occurrences: float) -> Job:
    job = make_job(overlap=overlap)
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(t), overlap=overlap) for t in occurrences], [])
    return job


async def _states(store: Store, job: Job) -> list[tuple[float, str, str | None]]:
    runs = await store.list_runs(job.tenant_id, job_id=job.id)
    return sorted(
        ((r.scheduled_for - at(0)).total_seconds(), r.state.value, r.reason) for r in runs
    )


class OverlapContract:
    """Overlap policies applied at claim time, one run per job at a time.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_allow_runs_are_prefetched_and_may_overlap(self, store: Store) -> None:
        job = await _job(store, Overlap.ALLOW, 0, 1)
        assert len(await _claim(store, 0, prefetch=2)) == 2
        assert [s for _, s, _ in await _states(store, job)] == ["running", "running"]

    async def test_policy_runs_are_claimed_only_once_due_and_one_at_a_time(
        self, store: Store
    ) -> None:
        await _job(store, Overlap.REPLACE, 0, 1, 5)
        [first] = await _claim(store, 1, prefetch=10)  # 0 and 1 are due; only the earliest goes
        assert first.run.scheduled_for == at(0)

    async def test_skip_records_the_occurrence_as_skipped(self, store: Store) -> None:
        job = await _job(store, Overlap.SKIP, 0, 10)
        [first] = await _claim(store, 0)
        assert await _claim(store, 10) == []
        states = await _states(store, job)
        assert states[0][1] == "running"
        assert states[1][1] == "skipped" and "overlap" in (states[1][2] or "")
        assert (await store.get_run(job.tenant_id, first.run.id)).state is RunState.RUNNING  # type: ignore[union-attr]

    async def test_a_claim_reports_the_runs_it_skipped(self, store: Store) -> None:
        # The count comes back with the claim itself (the worker's skip counter reads it),
        # whether or not the claim also took runs, and a skip is reported once.
        await _job(store, Overlap.SKIP, 0, 10, 20)
        first = await _claim(store, 0)
        assert len(first) == 1 and first.overlap_skipped == 0
        allowed = await _job(store, Overlap.ALLOW, 20)
        both = await _claim(store, 20)
        assert [c.run.job_id for c in both] == [allowed.id]
        assert both.overlap_skipped == 2
        again = await _claim(store, 20)
        assert again == [] and again.overlap_skipped == 0

    async def test_a_claim_that_skips_nothing_reports_none(self, store: Store) -> None:
        await _job(store, Overlap.SKIP, 0)
        assert (await _claim(store, 0)).overlap_skipped == 0
        assert (await _claim(store, 0)).overlap_skipped == 0

    async def test_skip_runs_normally_when_nothing_is_running(self, store: Store) -> None:
        job = await _job(store, Overlap.SKIP, 10)
        assert len(await _claim(store, 10)) == 1
        assert [s for _, s, _ in await _states(store, job)] == ["running"]

    async def test_queue_waits_for_the_running_run(self, store: Store) -> None:
        job = await _job(store, Overlap.QUEUE, 0, 10)
        [first] = await _claim(store, 0)
        assert await _claim(store, 10) == []
        assert [s for _, s, _ in await _states(store, job)] == ["running", "pending"]
        await store.rescue_expired(now=at(1000))  # the first run's lease ends: nothing runs now
        [again] = await _claim(store, 1000)
        assert again.run.scheduled_for == at(0)  # the queue keeps its order
        assert first.run.id == again.run.id

    async def test_replace_asks_the_running_run_to_cancel(self, store: Store) -> None:
        job = await _job(store, Overlap.REPLACE, 0, 10)
        [first] = await _claim(store, 0, worker="w1")
        [second] = await _claim(store, 10, worker="w2")
        assert second.run.scheduled_for == at(10)
        beat = await store.heartbeat(
            "w1", [(first.run.id, first.run.fence)], now=at(11), lease_seconds=60
        )
        assert beat.cancel_requested == [first.run.id]
        assert [s for _, s, _ in await _states(store, job)] == ["running", "running"]
