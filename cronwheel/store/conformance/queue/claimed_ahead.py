"""Conformance: attempts are charged only when made (issue 26, item 3). A run claimed
ahead of its start (``claim_runs(started=False)``) has no ``started_at`` until the worker
marks it started (``mark_started``) or completes it. A rescue of such a run charges it
nothing: an at-most-once run (its start is stored before it begins) is unclaimed, as a
release before the start is; any other may have begun (its start is stored beside its
action), so its attempt is recorded ``lost``, its budget given one more, and it is never
claimed again under the same attempt number ("Duplicates under overload", decision 0037)."""

from __future__ import annotations

from datetime import timedelta

from cronwheel.core.model import (
    REASON_AT_MOST_ONCE_LOST,
    REASON_LEASE_LOST_LAST,
    AttemptOutcome,
    ClaimedRun,
    Delivery,
    Job,
    RetryPolicy,
    RunState,
)
from cronwheel.store.base import Completion, Start, Store
from cronwheel.store.conformance.factories import at, make_job, make_run, succeeded

LEASE = 30.0
TARGETS = ({"on": ["succeeded", "failed", "dead"], "url": "http://127.0.0.1:9/a"},)


async def _runs(store: Store, job: Job, *due: float) -> None:
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(t)) for t in due or (0,)], [])


async def _ahead(
    store: Store, *, now: float = 0, until: float | None = None, worker: str = "w"
) -> list[ClaimedRun]:
    claimed = await store.claim_runs(
        worker,
        ["default"],
        limit=10,
        now=at(now),
        prefetch_until=at(now if until is None else until),
        lease_seconds=LEASE,
        started=False,
    )
    return list(claimed)


def _start(c: ClaimedRun, when: float) -> Start:
    return Start(c.run.id, c.run.fence, at(when))


class ClaimedAheadContract:
    """Attempts are charged only when made (issue 26, item 3). A run claimed.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_run_claimed_ahead_has_no_start_and_the_rest_of_a_claim(
        self, store: Store
    ) -> None:
        await _runs(store, make_job(), 10)
        [c] = await _ahead(store, now=1, until=10)
        assert c.run.started_at is None
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.fence, run.attempt, run.lease_owner, run.started_at) == (
            RunState.RUNNING,
            1,
            1,
            "w",
            None,
        )
        # Leased through its wait, as any claim.
        assert run.lease_expires_at == at(10) + timedelta(seconds=LEASE)

    async def test_a_claim_that_starts_its_runs_records_their_start(self, store: Store) -> None:
        await _runs(store, make_job(), 10)
        [c] = await store.claim_runs(
            "w", ["default"], limit=10, now=at(1), prefetch_until=at(10), lease_seconds=LEASE
        )
        assert c.run.started_at == at(10)

    async def test_a_rescued_run_that_never_started_is_claimable_again_and_charged_nothing(
        self,
        store: Store,
    ) -> None:
        job = make_job(delivery=Delivery.AT_MOST_ONCE, retry=RetryPolicy(max_attempts=1))
        await _runs(store, job, 0, 1)
        first, second = await _ahead(store, until=1)
        result = await store.rescue_expired(now=at(60))
        assert (result.retried, result.dead, result.cancelled) == ([], [], [])
        assert result.unstarted == [first.run.id, second.run.id]
        for c in (first, second):
            run = await store.get_run("default", c.run.id)
            assert run is not None
            assert (run.state, run.attempt, run.max_attempts, run.fence) == (
                RunState.PENDING,
                0,
                1,
                1,
            )
            assert (run.available_at, run.started_at, run.finished_at, run.last_error) == (
                c.run.available_at,
                None,
                None,
                None,
            )
            assert (run.lease_owner, run.lease_expires_at, run.reason) == (None, None, c.run.reason)
            assert await store.list_attempts("default", c.run.id) == []
        # Its one attempt is still to be made: claimable, not dead.
        again = await _ahead(store, now=61)
        assert [(c.run.id, c.run.attempt, c.run.fence) for c in again] == [
            (first.run.id, 1, 2),
            (second.run.id, 1, 2),
        ]

    async def test_a_run_whose_start_was_not_stored_is_never_claimed_again_as_the_same_attempt(
        self,
        store: Store,
    ) -> None:
        # At-least-once: its worker begins it and stores its start beside the action (or
        # in its completion). A worker whose loop or store lagged past the lease has begun
        # it all the same: the rescue must not give that attempt back to be made again.
        await _runs(store, make_job(retry=RetryPolicy(max_attempts=1)), 0, 1)
        first, second = await _ahead(store, until=1)
        result = await store.rescue_expired(now=at(60))
        assert (result.retried, result.dead, result.cancelled, result.unstarted) == (
            [first.run.id, second.run.id],
            [],
            [],
            [],
        )
        for c in (first, second):
            run = await store.get_run("default", c.run.id)
            assert run is not None
            # Not charged: its budget grew by one; due when it was; no start (none stored).
            assert (run.state, run.attempt, run.max_attempts, run.fence) == (
                RunState.PENDING,
                1,
                2,
                1,
            )
            assert (run.available_at, run.started_at, run.finished_at) == (
                c.run.available_at,
                None,
                None,
            )
            assert run.last_error is not None and "may not have begun" in run.last_error
            assert (run.lease_owner, run.lease_expires_at, run.reason) == (None, None, c.run.reason)
            [lost] = await store.list_attempts("default", c.run.id)
            assert (lost.attempt, lost.fence, lost.worker_id, lost.outcome) == (
                1,
                1,
                "w",
                AttemptOutcome.LOST,
            )
            assert (lost.started_at, lost.finished_at, lost.error_class) == (
                None,
                at(60),
                "LeaseExpired",
            )
            assert lost.error_message == run.last_error
        # Claimed again: a new attempt under a new fence, within the budget, not dead.
        again = await _ahead(store, now=61)
        assert [(c.run.id, c.run.attempt, c.run.fence, c.run.max_attempts) for c in again] == [
            (first.run.id, 2, 2, 2),
            (second.run.id, 2, 2, 2),
        ]

    async def test_an_unstarted_run_gets_its_previous_attempts_start_and_error_back(
        self,
        store: Store,
    ) -> None:
        # Unclaimed (at-most-once: it never began); the completion below is the store's
        # write as given, whatever the lifecycle would have made of the failure.
        job = make_job(delivery=Delivery.AT_MOST_ONCE, retry=RetryPolicy(max_attempts=3))
        await _runs(store, job)
        [c] = await _ahead(store)
        assert await store.mark_started("w", [_start(c, 1)]) == [c.run.id]
        failed = Completion(
            run_id=c.run.id,
            fence=c.run.fence,
            worker_id="w",
            state=RunState.PENDING,
            outcome=AttemptOutcome.FAILED,
            started_at=at(1),
            finished_at=at(2),
            error_class="RuntimeError",
            error_message="boom",
            available_at=at(5),
        )
        assert await store.complete_runs([failed]) == [c.run.id]
        [again] = await _ahead(store, now=5)
        assert (again.run.attempt, again.run.started_at) == (2, None)
        result = await store.rescue_expired(now=at(60))
        assert (result.unstarted, result.retried) == ([c.run.id], [])
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.attempt, run.max_attempts, run.fence) == (RunState.PENDING, 1, 3, 2)
        assert (run.started_at, run.available_at, run.last_error) == (at(1), at(5), "boom")
        assert [a.attempt for a in await store.list_attempts("default", c.run.id)] == [1]

    async def test_an_unstarted_at_most_once_run_is_pending_not_dead(self, store: Store) -> None:
        job = make_job(delivery=Delivery.AT_MOST_ONCE, retry=RetryPolicy(max_attempts=1))
        await _runs(store, job)
        [c] = await _ahead(store)
        result = await store.rescue_expired(now=at(60))
        assert (result.unstarted, result.dead) == ([c.run.id], [])
        run = await store.get_run("default", c.run.id)
        assert run is not None and (run.state, run.attempt, run.reason) == (
            RunState.PENDING,
            0,
            c.run.reason,
        )
        assert await store.list_attempts("default", c.run.id) == []

    async def test_a_marked_run_is_rescued_with_a_lost_attempt_from_its_start(
        self, store: Store
    ) -> None:
        await _runs(store, make_job(retry=RetryPolicy(max_attempts=2)))
        [c] = await _ahead(store)
        assert await store.mark_started("w", [_start(c, 3)]) == [c.run.id]
        run = await store.get_run("default", c.run.id)
        assert run is not None and run.started_at == at(3)
        result = await store.rescue_expired(now=at(60))
        assert (result.retried, result.dead, result.unstarted) == ([c.run.id], [], [])
        [attempt] = await store.list_attempts("default", c.run.id)
        assert (attempt.attempt, attempt.outcome, attempt.error_class, attempt.started_at) == (
            1,
            AttemptOutcome.LOST,
            "LeaseExpired",
            at(3),
        )
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.attempt, run.available_at) == (RunState.PENDING, 1, at(60))
        # Its last attempt, marked and lost: dead, as any run lost on its last attempt.
        [again] = await _ahead(store, now=60)
        await store.mark_started("w", [_start(again, 61)])
        result = await store.rescue_expired(now=at(200))
        assert (result.retried, result.dead, result.unstarted) == ([], [c.run.id], [])
        run = await store.get_run("default", c.run.id)
        assert run is not None and (run.state, run.reason) == (
            RunState.DEAD,
            REASON_LEASE_LOST_LAST,
        )

    async def test_a_marked_at_most_once_run_is_dead_when_rescued(self, store: Store) -> None:
        job = make_job(delivery=Delivery.AT_MOST_ONCE, retry=RetryPolicy(max_attempts=3))
        await _runs(store, job)
        [c] = await _ahead(store)
        await store.mark_started("w", [_start(c, 0)])
        result = await store.rescue_expired(now=at(60))
        assert (result.dead, result.unstarted) == ([c.run.id], [])
        run = await store.get_run("default", c.run.id)
        assert run is not None and (run.state, run.reason) == (
            RunState.DEAD,
            REASON_AT_MOST_ONCE_LOST,
        )

    async def test_a_mark_is_fenced_to_the_owner_of_an_unmarked_running_run(
        self, store: Store
    ) -> None:
        await _runs(store, make_job(), 0, 1, 2, 3)
        mine, stale, done, marked = await _ahead(store, until=3)
        await store.complete_runs([succeeded(done, at(1))])
        assert await store.mark_started("w", [_start(marked, 1)]) == [marked.run.id]
        starts = [
            Start(stale.run.id, stale.run.fence + 1, at(2)),  # a fence it does not hold
            _start(done, 2),  # finished
            _start(marked, 2),  # marked already: its start stays
        ]
        assert await store.mark_started("w", starts) == []
        assert await store.mark_started("other", [_start(mine, 2)]) == []  # not its lease
        for c, started in ((mine, None), (stale, None), (done, at(1)), (marked, at(1))):
            run = await store.get_run("default", c.run.id)
            assert run is not None and run.started_at == started, c.run.id
        # The same run twice in a batch: its first start; and an empty batch writes nothing.
        assert await store.mark_started("w", [_start(mine, 4), _start(mine, 5)]) == [mine.run.id]
        run = await store.get_run("default", mine.run.id)
        assert run is not None and run.started_at == at(4)
        assert await store.mark_started("w", []) == []

    async def test_a_cancelled_unstarted_run_is_cancelled_without_an_attempt(
        self, store: Store
    ) -> None:
        job = make_job(delivery=Delivery.AT_MOST_ONCE, retry=RetryPolicy(max_attempts=1))
        await _runs(store, job)
        [c] = await _ahead(store)
        await store.cancel_run("default", c.run.id, now=at(1), actor="t")
        result = await store.rescue_expired(now=at(60))
        assert (result.cancelled, result.retried, result.unstarted) == ([c.run.id], [], [])
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.attempt, run.finished_at, run.started_at, run.last_error) == (
            RunState.CANCELLED,
            0,
            at(60),
            None,
            None,
        )
        assert (run.lease_owner, run.cancel_requested) == (None, False)
        assert await store.list_attempts("default", c.run.id) == []

    async def test_a_cancelled_run_whose_start_was_not_stored_is_cancelled_after_its_attempt(
        self, store: Store
    ) -> None:
        await _runs(store, make_job(retry=RetryPolicy(max_attempts=1)))
        [c] = await _ahead(store)
        await store.cancel_run("default", c.run.id, now=at(1), actor="t")
        result = await store.rescue_expired(now=at(60))
        assert (result.cancelled, result.retried, result.unstarted) == ([c.run.id], [], [])
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.attempt, run.max_attempts, run.finished_at, run.started_at) == (
            RunState.CANCELLED,
            1,
            1,
            at(60),
            None,
        )
        assert (run.lease_owner, run.cancel_requested) == (None, False)
        [lost] = await store.list_attempts("default", c.run.id)
        assert (lost.attempt, lost.outcome, lost.started_at) == (1, AttemptOutcome.LOST, None)

    async def test_a_dead_owners_runs_that_never_started_are_unclaimed(self, store: Store) -> None:
        job = make_job(delivery=Delivery.AT_MOST_ONCE, retry=RetryPolicy(max_attempts=1))
        await _runs(store, job, 0, 1, 2)
        begun, waiting, cancelled = await _ahead(store, until=2, worker="gone")
        await store.mark_started("gone", [_start(begun, 0)])
        await store.cancel_run("default", cancelled.run.id, now=at(1), actor="t")
        result = await store.rescue_runs_of_dead_owner(["gone"], now=at(3))
        assert (result.retried, result.dead, result.cancelled, result.unstarted) == (
            [],
            [begun.run.id],
            [cancelled.run.id],
            [waiting.run.id],
        )
        [lost] = await store.list_attempts("default", begun.run.id)
        assert (lost.outcome, lost.error_class, lost.started_at) == (
            AttemptOutcome.LOST,
            "WorkerGone",
            at(0),
        )
        assert await store.list_attempts("default", waiting.run.id) == []
        assert await store.list_attempts("default", cancelled.run.id) == []
        run = await store.get_run("default", waiting.run.id)
        assert run is not None and (run.state, run.attempt) == (RunState.PENDING, 0)
        [again] = await _ahead(store, now=3, until=3)
        assert again.run.id == waiting.run.id

    async def test_the_completion_of_an_unmarked_run_records_its_own_start(
        self, store: Store
    ) -> None:
        await _runs(store, make_job(), 10)
        [c] = await _ahead(store, until=10)
        done = succeeded(c, at(12), started_at=at(10.5))
        assert await store.complete_runs([done]) == [c.run.id]
        [attempt] = await store.list_attempts("default", c.run.id)
        assert (attempt.started_at, attempt.finished_at) == (at(10.5), at(12))
        run = await store.get_run("default", c.run.id)
        assert run is not None and (run.state, run.started_at) == (RunState.SUCCEEDED, at(10.5))

    async def test_an_unstarted_rescue_is_no_event(self, store: Store) -> None:
        # Neither an unclaimed run nor the uncharged lost attempt of a run whose start was
        # not stored is a failure to tell of: only the started run's lost attempt is.
        await _runs(store, make_job(notify=TARGETS, retry=RetryPolicy(max_attempts=2)), 0, 1)
        once = make_job(
            notify=TARGETS, delivery=Delivery.AT_MOST_ONCE, retry=RetryPolicy(max_attempts=2)
        )
        await _runs(store, once, 2)
        begun, waiting, unclaimed = await _ahead(store, until=2)
        await store.mark_started("w", [_start(begun, 0)])
        result = await store.rescue_expired(now=at(60))
        assert (result.retried, result.unstarted) == (
            [begun.run.id, waiting.run.id],
            [unclaimed.run.id],
        )
        events = [(n.run_id, n.event.value) for n in await store.list_notifications("default")]
        assert events == [(begun.run.id, "failed")]
