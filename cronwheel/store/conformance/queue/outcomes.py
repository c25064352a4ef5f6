"""Conformance: truthful states. A job's last outcome, why a run is dead, a permanent
attempt, idempotent control verbs, and which pools live workers serve."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronwheel.core.model import (
    REASON_LEASE_LOST_LAST,
    REASON_PERMANENT,
    AttemptOutcome,
    JobState,
    RetryPolicy,
    RunState,
    WorkerInfo,
)
from cronwheel.errors import Conflict
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run


async def _claim_one(store: Store, now_s: float, pool: str = "default") -> tuple[int, int]:
    [c] = await store.claim_runs(
        "w", [pool], limit=1, now=at(now_s), prefetch_until=at(now_s), lease_seconds=5
    )
    return c.run.id, c.run.fence


def _done(
    run_id: int,
    fence: int,
    state: RunState,
    finished_s: float,
    *,
    outcome: AttemptOutcome = AttemptOutcome.FAILED,
    reason: str | None = None,
    error: str | None = "boom",
) -> Completion:
    return Completion(
        run_id=run_id,
        fence=fence,
        worker_id="w",
        state=state,
        outcome=outcome,
        started_at=at(finished_s - 1),
        finished_at=at(finished_s),
        error_class=None if error is None else "RuntimeError",
        error_message=error,
        available_at=at(finished_s + 1) if state is RunState.PENDING else None,
        reason=reason,
    )


def _worker(worker_id: str, tenant_id: str, pools: tuple[str, ...], seen_s: float) -> WorkerInfo:
    return WorkerInfo(
        id=worker_id,
        tenant_id=tenant_id,
        host="h",
        pools=pools,
        capacity=1,
        in_flight=0,
        started_at=at(0),
        last_seen_at=at(seen_s),
    )


class OutcomesContract:
    """Truthful states. A job's last outcome, why a run is dead, a permanent.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_last_run_is_the_newest_finished_run_of_each_job(self, store: Store) -> None:
        job, idle, other = make_job(), make_job(), make_job(tenant_id="default")
        await store.create_jobs([job, idle, other])
        await store.materialize_runs(
            [make_run(job, at(0)), make_run(job, at(1)), make_run(job, at(2))], []
        )
        assert await store.last_runs("default", [job.id, idle.id]) == {}

        first = await _claim_one(store, 0)
        second = await _claim_one(store, 1)
        # The later occurrence finishes first; the earlier one goes dead afterwards: the
        # newest finished run is the dead one, whatever their scheduled instants.
        await store.complete_runs(
            [_done(*second, RunState.SUCCEEDED, 10, outcome=AttemptOutcome.SUCCEEDED, error=None)]
        )
        await store.complete_runs([_done(*first, RunState.DEAD, 20, reason="attempts exhausted")])

        found = await store.last_runs("default", [job.id, idle.id, other.id, "not-a-job"])
        assert list(found) == [job.id]
        last = found[job.id]
        assert (last.id, last.state, last.finished_at) == (first[0], RunState.DEAD, at(20))
        assert (last.scheduled_for, last.attempt) == (at(0), 1)
        assert (last.reason, last.last_error) == ("attempts exhausted", "boom")
        assert await store.last_runs("someone-else", [job.id]) == {}

        # A replayed run is pending again: the job's last outcome is the one before it.
        assert await store.replay_runs(
            "default", [first[0]], extra_attempts=1, now=at(30), actor="ops"
        ) == [first[0]]
        again = (await store.last_runs("default", [job.id]))[job.id]
        assert (again.id, again.state) == (second[0], RunState.SUCCEEDED)

    async def test_a_skipped_or_cancelled_run_is_a_last_outcome_too(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0))], [])
        [run] = await store.list_runs("default")
        await store.cancel_run("default", run.id, now=at(5), actor="ops")
        last = (await store.last_runs("default", [job.id]))[job.id]
        assert (last.state, last.reason) == (RunState.CANCELLED, "cancelled by ops")

    async def test_a_dead_completion_records_its_reason_and_a_permanent_attempt(
        self,
        store: Store,
    ) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0), reason="triggered by api")], [])
        run_id, fence = await _claim_one(store, 0)
        retry = _done(run_id, fence, RunState.PENDING, 1)
        assert await store.complete_runs([retry]) == [run_id]
        pending = await store.get_run("default", run_id)
        assert pending is not None
        assert pending.reason == "triggered by api"  # a retry keeps why the run exists

        run_id, fence = await _claim_one(store, 2)
        final = _done(
            run_id,
            fence,
            RunState.DEAD,
            3,
            outcome=AttemptOutcome.PERMANENT,
            reason=REASON_PERMANENT,
        )
        assert await store.complete_runs([final]) == [run_id]
        dead = await store.get_run("default", run_id)
        assert dead is not None
        assert (dead.state, dead.reason, dead.last_error) == (
            RunState.DEAD,
            REASON_PERMANENT,
            "boom",
        )
        attempts = await store.list_attempts("default", run_id)
        assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED, AttemptOutcome.PERMANENT]

        await store.replay_runs("default", [run_id], extra_attempts=1, now=at(4), actor="ops")
        replayed = await store.get_run("default", run_id)
        assert replayed is not None
        assert (replayed.state, replayed.reason) == (RunState.PENDING, "replayed by ops")

    async def test_a_lease_lost_on_the_last_attempt_says_so(self, store: Store) -> None:
        job = make_job(retry=RetryPolicy(max_attempts=2))
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0), max_attempts=2)], [])
        run_id, _ = await _claim_one(store, 0)
        rescued = await store.rescue_expired(now=at(6))
        assert rescued.retried == [run_id]
        retried = await store.get_run("default", run_id)
        assert retried is not None and retried.reason is None  # not dead: no verdict

        await _claim_one(store, 7)
        rescued = await store.rescue_expired(now=at(13))
        assert rescued.dead == [run_id]
        dead = await store.get_run("default", run_id)
        assert dead is not None
        assert dead.reason == REASON_LEASE_LOST_LAST
        assert dead.last_error is not None and "did not report" in dead.last_error

    async def test_setting_the_state_a_job_is_in_changes_nothing(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        paused = await store.set_job_state(
            "default", job.id, JobState.PAUSED, next_fire_at=at(60), now=at(1), actor="ops"
        )
        again = await store.set_job_state(
            "default", job.id, JobState.PAUSED, next_fire_at=at(999), now=at(2), actor="ops"
        )
        assert again == paused  # same version, same next fire time, same updated_at
        assert [e.action for e in await store.list_audit("default", job.id)] == [
            "created",
            "paused",
        ]

        cancelled = await store.set_job_state(
            "default", job.id, JobState.CANCELLED, next_fire_at=None, now=at(3), actor="ops"
        )
        assert (
            await store.set_job_state(
                "default", job.id, JobState.CANCELLED, next_fire_at=None, now=at(4), actor="ops"
            )
            == cancelled
        )
        with pytest.raises(Conflict):
            await store.set_job_state(
                "default", job.id, JobState.ACTIVE, next_fire_at=None, now=at(5), actor="ops"
            )
        assert len(await store.list_audit("default", job.id)) == 3

    async def test_cancelling_a_running_run_twice_asks_once(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0))], [])
        run_id, _ = await _claim_one(store, 0)
        first = await store.cancel_run("default", run_id, now=at(1), actor="ops")
        second = await store.cancel_run("default", run_id, now=at(2), actor="ops")
        assert first == second
        assert first.cancel_requested and first.state is RunState.RUNNING
        actions = [e.action for e in await store.list_audit("default", str(run_id))]
        assert actions == ["cancel_requested"]

    async def test_served_pools_are_those_of_live_workers_for_the_tenant(
        self, store: Store
    ) -> None:
        since = at(100) - timedelta(seconds=60)
        assert await store.served_pools("default", seen_since=since) == set()
        # An in-process worker (cronwheel worker, cronwheel dev) claims for every tenant,
        # whichever tenant it registered under; a remote one only for its own.
        await store.register_worker(_worker("host-1-abc", "default", ("email", "default"), 90))
        await store.register_worker(_worker("acme/w1", "acme", ("reports",), 95))
        await store.register_worker(_worker("acme/old", "acme", ("billing",), 10))  # gone quiet
        await store.register_worker(_worker("@scheduler-1", "@scheduler", (), 99))
        assert await store.served_pools("default", seen_since=since) == {"email", "default"}
        assert await store.served_pools("acme", seen_since=since) == {"email", "default", "reports"}
        assert await store.served_pools("beta", seen_since=since) == {"email", "default"}
        await store.remove_worker("host-1-abc")
        assert await store.served_pools("beta", seen_since=since) == set()
