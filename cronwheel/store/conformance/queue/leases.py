"""Conformance: heartbeats, fenced completion, and rescue of expired leases (I3, I4)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from cronwheel.core.model import AttemptOutcome, ClaimedRun, Job, RetryPolicy, RunState
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run

MICROSECOND = timedelta(microseconds=1)


async def _claimed(
    store: Store, job: Job | None = None, *, n: int = 1, ttl: float = 30
) -> list[ClaimedRun]:
    job = job or make_job()
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(-i)) for i in range(n)], [])
    return await store.claim_runs(
        "w1", ["default"], limit=n, now=at(0), prefetch_until=at(0), lease_seconds=ttl
    )


def _done(c: ClaimedRun, state: RunState = RunState.SUCCEEDED, **kw: object) -> Completion:
    outcome = AttemptOutcome.SUCCEEDED if state is RunState.SUCCEEDED else AttemptOutcome.FAILED
    return Completion(
        run_id=c.run.id,
        fence=c.run.fence,
        worker_id="w1",
        state=state,
        outcome=kw.pop("outcome", outcome),  # type: ignore[arg-type]
        started_at=at(0),
        finished_at=at(2),
        lag_seconds=0.004,
        **kw,  # type: ignore[arg-type]
    )


class LeasesContract:
    """Heartbeats, fenced completion, and rescue of expired leases (I3, I4).

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_heartbeat_extends_every_lease_in_one_call(self, store: Store) -> None:
        claimed = await _claimed(store, n=3, ttl=10)
        leases = [(c.run.id, c.run.fence) for c in claimed]
        result = await store.heartbeat("w1", leases, now=at(5), lease_seconds=10)
        assert sorted(result.extended) == sorted(r for r, _ in leases)
        assert (result.lost, result.cancel_requested) == ([], [])
        run = await store.get_run("default", claimed[0].run.id)
        assert run is not None and run.lease_expires_at == at(15)

    async def test_heartbeat_never_shortens_a_lease(self, store: Store) -> None:
        [c] = await _claimed(store, ttl=60)
        await store.heartbeat("w1", [(c.run.id, c.run.fence)], now=at(1), lease_seconds=5)
        run = await store.get_run("default", c.run.id)
        assert run is not None and run.lease_expires_at == at(60)

    async def test_heartbeat_with_a_stale_fence_reports_the_run_lost(self, store: Store) -> None:
        [c] = await _claimed(store)
        result = await store.heartbeat(
            "w1", [(c.run.id, c.run.fence - 1)], now=at(1), lease_seconds=30
        )
        assert (result.extended, result.lost) == ([], [c.run.id])
        other = await store.heartbeat("w2", [(c.run.id, c.run.fence)], now=at(1), lease_seconds=30)
        assert other.lost == [c.run.id]

    async def test_heartbeat_reports_a_cancel_request(self, store: Store) -> None:
        [c] = await _claimed(store)
        cancelled = await store.cancel_run("default", c.run.id, now=at(1), actor="ops")
        assert (cancelled.state, cancelled.cancel_requested) == (RunState.RUNNING, True)
        result = await store.heartbeat("w1", [(c.run.id, c.run.fence)], now=at(2), lease_seconds=30)
        assert (result.extended, result.cancel_requested) == ([c.run.id], [c.run.id])

    async def test_complete_records_the_attempt(self, store: Store) -> None:
        [c] = await _claimed(store)
        assert await store.complete_runs([_done(c)]) == [c.run.id]
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.finished_at, run.lease_owner, run.lease_expires_at) == (
            RunState.SUCCEEDED,
            at(2),
            None,
            None,
        )
        [attempt] = await store.list_attempts("default", c.run.id)
        assert (attempt.attempt, attempt.worker_id, attempt.fence, attempt.outcome) == (
            1,
            "w1",
            1,
            AttemptOutcome.SUCCEEDED,
        )
        assert (attempt.started_at, attempt.finished_at, attempt.lag_seconds) == (
            at(0),
            at(2),
            0.004,
        )

    async def test_a_stale_fence_changes_nothing(self, store: Store) -> None:
        [c] = await _claimed(store, ttl=5)
        await store.rescue_expired(now=at(5))
        [again] = await store.claim_runs(
            "w2", ["default"], limit=1, now=at(6), prefetch_until=at(6), lease_seconds=30
        )
        assert again.run.fence == c.run.fence + 1
        assert await store.complete_runs([_done(c)]) == []  # the first worker is fenced out
        run = await store.get_run("default", c.run.id)
        assert run is not None and (run.state, run.lease_owner) == (RunState.RUNNING, "w2")
        assert [a.outcome for a in await store.list_attempts("default", c.run.id)] == [
            AttemptOutcome.LOST
        ]

    async def test_a_retry_goes_back_to_pending_and_a_second_completion_is_refused(
        self,
        store: Store,
    ) -> None:
        [c] = await _claimed(store)
        retry = _done(
            c, RunState.PENDING, available_at=at(30), error_class="ValueError", error_message="boom"
        )
        assert await store.complete_runs([retry]) == [c.run.id]
        assert await store.complete_runs([_done(c)]) == []
        run = await store.get_run("default", c.run.id)
        assert run is not None
        assert (run.state, run.available_at, run.finished_at, run.last_error) == (
            RunState.PENDING,
            at(30),
            None,
            "boom",
        )
        [next_try] = await store.claim_runs(
            "w1", ["default"], limit=1, now=at(30), prefetch_until=at(30), lease_seconds=30
        )
        assert (next_try.run.attempt, next_try.run.fence) == (2, 2)

    async def test_completions_are_applied_in_one_batch(self, store: Store) -> None:
        claimed = await _claimed(store, n=4)
        batch = [
            _done(claimed[0]),
            _done(claimed[1], RunState.DEAD, error_class="PermanentError", error_message="no"),
            _done(claimed[2], RunState.CANCELLED, outcome=AttemptOutcome.CANCELLED),
            replace(_done(claimed[3]), fence=99),
        ]
        accepted = await store.complete_runs(batch)
        assert sorted(accepted) == sorted(c.run.id for c in claimed[:3])
        states = [(await store.get_run("default", c.run.id)).state for c in claimed]  # type: ignore[union-attr]
        assert states == [RunState.SUCCEEDED, RunState.DEAD, RunState.CANCELLED, RunState.RUNNING]

    async def test_a_run_reported_twice_in_one_batch_is_completed_once(self, store: Store) -> None:
        claimed = await _claimed(store, n=2)
        twice = _done(claimed[0])
        batch = [twice, _done(claimed[1], RunState.PENDING, available_at=at(30)), twice]
        assert sorted(await store.complete_runs(batch)) == sorted(c.run.id for c in claimed)
        assert len(await store.list_attempts("default", claimed[0].run.id)) == 1
        retried = await store.get_run("default", claimed[1].run.id)
        assert retried is not None and (retried.state, retried.available_at) == (
            RunState.PENDING,
            at(30),
        )

    async def test_a_lease_is_claimable_again_exactly_when_it_expires(self, store: Store) -> None:
        [c] = await _claimed(store, ttl=30)
        expiry = at(30)
        just_before = await store.rescue_expired(now=expiry - MICROSECOND)
        assert (just_before.retried, just_before.dead) == ([], [])
        assert (
            await store.claim_runs(
                "w2",
                ["default"],
                limit=1,
                now=expiry - MICROSECOND,
                prefetch_until=expiry,
                lease_seconds=30,
            )
            == []
        )
        rescued = await store.rescue_expired(now=expiry)
        assert rescued.retried == [c.run.id]
        [again] = await store.claim_runs(
            "w2", ["default"], limit=1, now=expiry, prefetch_until=expiry, lease_seconds=30
        )
        assert (again.run.id, again.run.attempt, again.run.fence, again.run.lease_owner) == (
            c.run.id,
            2,
            2,
            "w2",
        )
        [lost] = await store.list_attempts("default", c.run.id)
        assert (lost.outcome, lost.worker_id, lost.fence, lost.error_class) == (
            AttemptOutcome.LOST,
            "w1",
            1,
            "LeaseExpired",
        )
        assert lost.finished_at == expiry

    async def test_a_run_lost_on_its_last_attempt_is_dead(self, store: Store) -> None:
        [c] = await _claimed(store, make_job(retry=RetryPolicy(max_attempts=1)), ttl=5)
        result = await store.rescue_expired(now=at(10))
        assert (result.retried, result.dead) == ([], [c.run.id])
        run = await store.get_run("default", c.run.id)
        assert run is not None and (run.state, run.finished_at) == (RunState.DEAD, at(10))
        assert "lease expired" in (run.last_error or "")

    async def test_a_cancelled_run_whose_worker_died_ends_cancelled(self, store: Store) -> None:
        [c] = await _claimed(store, ttl=5)
        await store.cancel_run("default", c.run.id, now=at(1), actor="ops")
        result = await store.rescue_expired(now=at(5))
        assert result.cancelled == [c.run.id]
        run = await store.get_run("default", c.run.id)
        assert run is not None and run.state is RunState.CANCELLED

    async def test_rescue_respects_its_limit(self, store: Store) -> None:
        await _claimed(store, n=5, ttl=1)
        first = await store.rescue_expired(now=at(2), limit=2)
        rest = await store.rescue_expired(now=at(2), limit=100)
        assert (len(first.retried), len(rest.retried)) == (2, 3)

    async def test_the_runs_of_a_dead_owner_are_rescued_before_their_lease_expires(
        self,
        store: Store,
    ) -> None:
        [mine] = await _claimed(store, ttl=30)
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0))], [])
        [other] = await store.claim_runs(
            "w2", ["default"], limit=1, now=at(0), prefetch_until=at(0), lease_seconds=30
        )
        result = await store.rescue_runs_of_dead_owner(["w1"], now=at(1))
        assert (result.retried, result.dead, result.cancelled) == ([mine.run.id], [], [])
        run = await store.get_run("default", mine.run.id)
        assert run is not None and (run.state, run.available_at) == (RunState.PENDING, at(1))
        [lost] = await store.list_attempts("default", mine.run.id)
        assert (lost.outcome, lost.worker_id, lost.error_class, lost.finished_at) == (
            AttemptOutcome.LOST,
            "w1",
            "WorkerGone",
            at(1),
        )
        # another owner's lease is left to its lease rule
        still = await store.get_run("default", other.run.id)
        assert still is not None and (still.state, still.lease_owner) == (RunState.RUNNING, "w2")
        assert await store.list_attempts("default", other.run.id) == []

    async def test_a_dead_owners_run_on_its_last_attempt_is_dead(self, store: Store) -> None:
        [c] = await _claimed(store, make_job(retry=RetryPolicy(max_attempts=1)), ttl=30)
        result = await store.rescue_runs_of_dead_owner(["w1", "w9"], now=at(1))
        assert result.dead == [c.run.id]
        assert (await store.rescue_runs_of_dead_owner([], now=at(2))).retried == []
