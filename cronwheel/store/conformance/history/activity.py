"""Conformance: the live view's read of recent activity (the ``cronwheel dev`` console)."""

from __future__ import annotations

from cronwheel.core.model import AttemptOutcome, RunState
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run


class ActivityContract:
    """The live view's read of recent activity (the ``cronwheel dev`` console).

    Part of the ``history`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_activity_reads_attempts_after_a_cursor_with_their_runs(
        self, store: Store
    ) -> None:
        job = make_job(pool="default")
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0)), make_run(job, at(1))], [])
        first, second = await store.claim_runs(
            "w1", ["default"], limit=2, now=at(0), prefetch_until=at(5), lease_seconds=30
        )
        await store.complete_runs(
            [
                Completion(
                    run_id=first.run.id,
                    fence=first.run.fence,
                    worker_id="w1",
                    state=RunState.SUCCEEDED,
                    outcome=AttemptOutcome.SUCCEEDED,
                    started_at=at(0),
                    finished_at=at(0.5),
                )
            ]
        )
        seen = await store.list_activity(after_attempt=0, finished_since=at(-60))
        [attempt] = seen.attempts
        assert (attempt.run_id, attempt.outcome) == (first.run.id, AttemptOutcome.SUCCEEDED)
        assert seen.runs_of_attempts[first.run.id].state is RunState.SUCCEEDED
        # claimed ahead of its instant: held, with a start still to come
        [held] = seen.running
        assert (held.id, held.started_at) == (second.run.id, at(1))
        assert seen.closed == []  # the succeeded run was ended by its attempt
        assert seen.waiting == []
        after = await store.list_activity(after_attempt=attempt.id, finished_since=at(-60))
        assert after.attempts == [] and after.runs_of_attempts == {}
        assert (seen.latest_attempt, after.latest_attempt) == (attempt.id, attempt.id)

    async def test_activity_shows_runs_closed_without_an_attempt_and_waiting_jobs(
        self,
        store: Store,
    ) -> None:
        job, other = make_job(pool="email"), make_job(pool="email")
        await store.create_jobs([job, other])
        await store.materialize_runs(
            [make_run(job, at(0)), make_run(job, at(1)), make_run(other, at(2))], []
        )
        [first, *_] = await store.list_runs("default", job_id=job.id, limit=10)
        cancelled = await store.cancel_run("default", first.id, now=at(3), actor="ops")
        seen = await store.list_activity(
            after_attempt=0, finished_since=at(2), waiting_before=at(10), limit=10
        )
        assert [(r.id, r.state) for r in seen.closed] == [(cancelled.id, RunState.CANCELLED)]
        # one run per waiting job: its earliest pending
        assert sorted((r.job_id, r.scheduled_for) for r in seen.waiting) == sorted(
            [(job.id, at(0)), (other.id, at(2))]
        )
        later = await store.list_activity(
            after_attempt=0, finished_since=at(4), waiting_before=at(0)
        )
        assert later.closed == []
        assert [r.job_id for r in later.waiting] == [job.id]
