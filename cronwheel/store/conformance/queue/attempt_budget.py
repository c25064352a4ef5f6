"""Conformance: no claim exceeds a run's attempt budget, and an at-most-once run that
started is never started again, whatever releases and rescues happen (issue 13, item 12)."""

from __future__ import annotations

from typing import Any

from cronwheel.core.model import (
    REASON_AT_MOST_ONCE_LOST,
    REASON_AT_MOST_ONCE_STOPPED,
    REASON_LEASE_LOST_LAST,
    AttemptOutcome,
    ClaimedRun,
    Delivery,
    Job,
    Overlap,
    RetryPolicy,
    RunState,
)
from cronwheel.store.base import Completion, Release, Store
from cronwheel.store.conformance.factories import at, make_job, make_run

AT_MOST_ONCE: dict[str, Any] = {
    "delivery": Delivery.AT_MOST_ONCE,
    "retry": RetryPolicy(max_attempts=1),
}


async def _claim(store: Store, *, now: float = 0, until: float | None = None) -> list[ClaimedRun]:
    return await store.claim_runs(
        "w1",
        ["default"],
        limit=10,
        now=at(now),
        prefetch_until=at(now if until is None else until),
        lease_seconds=30,
    )


async def _one_run(store: Store, job: Job, *, due: float = 0) -> None:
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(due))], [])


def _release(c: ClaimedRun, *, started: bool) -> Release:
    return Release(c.run.id, c.run.fence, "w1", started, "the worker is stopping")


class AttemptBudgetContract:
    """No claim exceeds a run's attempt budget, and an at-most-once run that.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_claim_never_exceeds_a_runs_attempt_budget(self, store: Store) -> None:
        # What a release used to do: a run on its last attempt sent back to pending as it was.
        await _one_run(store, make_job(retry=RetryPolicy(max_attempts=1)))
        [c] = await _claim(store)
        back = Completion(
            run_id=c.run.id,
            fence=c.run.fence,
            worker_id="w1",
            state=RunState.PENDING,
            outcome=AttemptOutcome.CANCELLED,
            started_at=None,
            finished_at=at(1),
            available_at=at(1),
        )
        assert await store.complete_runs([back]) == [c.run.id]
        assert await _claim(store, now=2) == []
        run = await store.get_run("default", c.run.id)
        assert run is not None and (run.attempt, run.max_attempts) == (1, 1)

    async def test_an_exhausted_run_does_not_hold_back_its_jobs_next_run(
        self, store: Store
    ) -> None:
        job = make_job(retry=RetryPolicy(max_attempts=1), overlap=Overlap.QUEUE)
        await store.create_jobs([job])
        runs = [make_run(job, at(t), overlap=Overlap.QUEUE) for t in (0, 1)]
        await store.materialize_runs(runs, [])
        [c] = await _claim(store, now=1)
        done = Completion(
            run_id=c.run.id,
            fence=c.run.fence,
            worker_id="w1",
            state=RunState.PENDING,
            outcome=AttemptOutcome.CANCELLED,
            started_at=None,
            finished_at=at(1),
            available_at=at(1),
        )
        await store.complete_runs([done])
        [next_run] = await _claim(store, now=2)
        assert next_run.run.id != c.run.id and next_run.run.scheduled_for == at(1)

    async def test_a_started_at_most_once_run_released_is_dead(self, store: Store) -> None:
        await _one_run(store, make_job(**AT_MOST_ONCE))
        [c] = await _claim(store)
        result = await store.release_runs([_release(c, started=True)], now=at(5))
        assert (result.retried, result.dead, result.cancelled) == ([], [c.run.id], [])
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.reason, run.finished_at, run.lease_owner) == (
            RunState.DEAD,
            REASON_AT_MOST_ONCE_STOPPED,
            at(5),
            None,
        )
        [attempt] = await store.list_attempts("default", c.run.id)
        assert (attempt.outcome, attempt.error_class, attempt.error_message) == (
            AttemptOutcome.CANCELLED,
            "WorkerShutdown",
            "the worker is stopping",
        )
        assert attempt.started_at == at(0)
        assert await _claim(store, now=6) == []

    async def test_an_at_most_once_run_released_before_it_started_keeps_its_one_start(
        self,
        store: Store,
    ) -> None:
        await _one_run(store, make_job(**AT_MOST_ONCE), due=10)
        [c] = await _claim(store, until=10)  # prefetched: due in 10 s
        assert (c.run.attempt, c.run.fence) == (1, 1)
        result = await store.release_runs([_release(c, started=False)], now=at(1))
        assert (result.retried, result.dead) == ([c.run.id], [])
        # It never started: the claim is undone but for the fence (fences only grow).
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.available_at, run.attempt, run.max_attempts, run.fence) == (
            RunState.PENDING,
            at(10),  # still due at its own instant
            0,
            1,
            1,
        )
        assert (run.lease_owner, run.lease_expires_at, run.started_at, run.last_error) == (
            None,
            None,
            None,
            None,
        )
        assert await store.list_attempts("default", c.run.id) == []

        [again] = await _claim(store, now=10)
        assert (again.run.attempt, again.run.max_attempts, again.run.fence) == (1, 1, 2)
        # Started this time, then released: it never starts a second time.
        result = await store.release_runs([_release(again, started=True)], now=at(11))
        assert result.dead == [c.run.id]
        [attempt] = await store.list_attempts("default", c.run.id)
        assert (attempt.attempt, attempt.fence, attempt.error_class) == (1, 2, "WorkerShutdown")
        assert await _claim(store, now=12) == []

    async def test_a_retry_released_before_it_started_leaves_the_history_as_it_was(
        self,
        store: Store,
    ) -> None:
        await _one_run(store, make_job(retry=RetryPolicy(max_attempts=3)))
        [first] = await _claim(store)
        failed = Completion(
            run_id=first.run.id,
            fence=first.run.fence,
            worker_id="w1",
            state=RunState.PENDING,
            outcome=AttemptOutcome.FAILED,
            started_at=at(0),
            finished_at=at(1),
            error_class="Boom",
            error_message="boom",
            available_at=at(20),
        )
        assert await store.complete_runs([failed]) == [first.run.id]
        before = await store.get_run("default", first.run.id)
        assert before is not None
        [retry] = await _claim(store, now=15, until=20)  # the retry, prefetched
        assert (retry.run.attempt, retry.run.fence) == (2, 2)

        result = await store.release_runs([_release(retry, started=False)], now=at(16))
        assert (result.retried, result.dead, result.cancelled) == ([first.run.id], [], [])
        run = await store.get_run("default", first.run.id)
        assert run is not None
        assert (run.state, run.attempt, run.max_attempts, run.fence, run.available_at) == (
            RunState.PENDING,
            1,
            3,
            2,
            at(20),
        )
        assert (run.last_error, run.started_at, run.finished_at, run.lease_owner) == (
            before.last_error,
            before.started_at,
            None,
            None,
        )
        [attempt] = await store.list_attempts("default", first.run.id)
        assert (attempt.attempt, attempt.outcome) == (1, AttemptOutcome.FAILED)
        assert run.started_at == attempt.started_at  # the start of its attempt 1 again
        # Due at its own instant, not before: the next claim is attempt 2 again.
        assert await _claim(store, now=19) == []
        [again] = await _claim(store, now=20)
        assert (again.run.attempt, again.run.max_attempts, again.run.fence) == (2, 3, 3)

    async def test_a_release_before_the_start_of_a_run_asked_to_cancel_records_no_attempt(
        self,
        store: Store,
    ) -> None:
        await _one_run(store, make_job(), due=10)
        [c] = await _claim(store, until=10)
        await store.cancel_run("default", c.run.id, now=at(1), actor="ops")
        result = await store.release_runs([_release(c, started=False)], now=at(2))
        assert (result.retried, result.dead, result.cancelled) == ([], [], [c.run.id])
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.attempt, run.fence, run.finished_at, run.lease_owner) == (
            RunState.CANCELLED,
            0,
            1,
            at(2),
            None,
        )
        assert await store.list_attempts("default", c.run.id) == []

    async def test_one_release_batch_records_attempts_only_for_runs_that_started(
        self,
        store: Store,
    ) -> None:
        jobs = [make_job(retry=RetryPolicy(max_attempts=2)) for _ in range(4)]
        await store.create_jobs(jobs)
        await store.materialize_runs([make_run(j, at(0)) for j in jobs], [])
        claimed = sorted(await _claim(store), key=lambda c: c.run.id)
        assert len(claimed) == 4
        started = {claimed[0].run.id, claimed[2].run.id}
        releases = [_release(c, started=c.run.id in started) for c in claimed]
        result = await store.release_runs(list(reversed(releases)), now=at(3))
        assert sorted(result.retried) == [c.run.id for c in claimed]
        for c in claimed:
            run = await store.get_run("default", c.run.id)
            attempts = await store.list_attempts("default", c.run.id)
            assert run is not None and run.state is RunState.PENDING
            if c.run.id in started:
                assert (run.attempt, run.max_attempts, run.available_at) == (1, 3, at(3))
                assert [(a.attempt, a.error_class) for a in attempts] == [(1, "WorkerShutdown")]
            else:
                assert (run.attempt, run.max_attempts, run.available_at) == (0, 2, at(0))
                assert attempts == []

    async def test_a_started_at_least_once_run_released_is_pending_with_its_budget(
        self,
        store: Store,
    ) -> None:
        await _one_run(store, make_job(retry=RetryPolicy(max_attempts=1)))
        [c] = await _claim(store)
        result = await store.release_runs([_release(c, started=True)], now=at(5))
        assert (result.retried, result.dead) == ([c.run.id], [])
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.available_at, run.finished_at, run.last_error) == (
            RunState.PENDING,
            at(5),
            None,
            "the worker is stopping",
        )
        [again] = await _claim(store, now=5)
        assert (again.run.attempt, again.run.max_attempts, again.run.fence) == (2, 2, 2)

    async def test_a_release_is_fenced_and_honours_a_cancel_request(self, store: Store) -> None:
        await _one_run(store, make_job())
        [c] = await _claim(store)
        stale = Release(c.run.id, c.run.fence - 1, "w1", True, "late")
        refused = await store.release_runs([stale], now=at(1))
        assert (refused.retried, refused.dead, refused.cancelled) == ([], [], [])
        await store.cancel_run("default", c.run.id, now=at(2), actor="ops")
        result = await store.release_runs([_release(c, started=True)], now=at(3))
        assert result.cancelled == [c.run.id]
        run = await store.get_run("default", c.run.id)
        assert run is not None and run.state is RunState.CANCELLED
        # Released once: a second release of the same fence changes nothing.
        again = await store.release_runs([_release(c, started=True)], now=at(4))
        assert (again.retried, again.dead, again.cancelled) == ([], [], [])
        assert len(await store.list_attempts("default", c.run.id)) == 1

    async def test_a_rescued_at_most_once_run_is_dead_whatever_its_budget(
        self, store: Store
    ) -> None:
        # The run's budget says 3 (the job was at-least-once when it was planned), the job
        # now says at-most-once: its worker vanished, and the run may have started.
        job = make_job(retry=RetryPolicy(max_attempts=3), delivery=Delivery.AT_MOST_ONCE)
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0), max_attempts=3)], [])
        [c] = await _claim(store)
        result = await store.rescue_expired(now=at(31))
        assert (result.retried, result.dead) == ([], [c.run.id])
        run = await store.get_run("default", c.run.id)
        assert run is not None and (run.state, run.reason) == (
            RunState.DEAD,
            REASON_AT_MOST_ONCE_LOST,
        )
        assert await _claim(store, now=32) == []

    async def test_a_run_lost_on_its_last_attempt_says_why_it_is_dead(self, store: Store) -> None:
        await _one_run(store, make_job(retry=RetryPolicy(max_attempts=1)))
        [c] = await _claim(store)
        assert (await store.rescue_expired(now=at(31))).dead == [c.run.id]
        run = await store.get_run("default", c.run.id)
        assert run is not None and (run.state, run.reason) == (
            RunState.DEAD,
            REASON_LEASE_LOST_LAST,
        )
