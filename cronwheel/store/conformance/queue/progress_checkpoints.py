"""Conformance: a run's progress and checkpoint, stored fenced with the heartbeat or the
completion, and kept for the run's next attempts (0009)."""

from __future__ import annotations

from typing import Any

from cronwheel.core.model import AttemptOutcome, ClaimedRun, Job, RetryPolicy, RunState
from cronwheel.store.base import Completion, RunReport, Store
from cronwheel.store.conformance.factories import at, make_job, make_run


async def _claim(store: Store, now: float, worker: str = "w1") -> ClaimedRun:
    [c] = await store.claim_runs(
        worker, ["default"], limit=1, now=at(now), prefetch_until=at(now), lease_seconds=30
    )
    return c


async def _one_run(store: Store, **job: Any) -> tuple[Job, ClaimedRun]:
    made = make_job(**{"retry": RetryPolicy(max_attempts=5), **job})
    await store.create_jobs([made])
    await store.materialize_runs([make_run(made, at(0))], [])
    return made, await _claim(store, 0)


def _done(c: ClaimedRun, state: RunState, finished: float, **kw: object) -> Completion:
    outcome = AttemptOutcome.SUCCEEDED if state is RunState.SUCCEEDED else AttemptOutcome.FAILED
    return Completion(
        run_id=c.run.id,
        fence=c.run.fence,
        worker_id="w1",
        state=state,
        outcome=outcome,
        started_at=at(0),
        finished_at=at(finished),
        available_at=at(finished) if state is RunState.PENDING else None,
        **kw,  # type: ignore[arg-type]
    )


class ProgressCheckpointsContract:
    """A run's progress and checkpoint, stored fenced with the heartbeat or the.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_heartbeat_stores_progress_and_checkpoint_with_the_lease(
        self, store: Store
    ) -> None:
        job, c = await _one_run(store)
        assert (c.run.progress, c.run.checkpoint_at) == (None, None)
        report = RunReport(c.run.id, 0.5, "half way", '{"offset":500}')
        result = await store.heartbeat(
            "w1", [(c.run.id, c.run.fence)], now=at(3), lease_seconds=30, reports=[report]
        )
        assert result.extended == [c.run.id]
        run = await store.get_run(job.tenant_id, c.run.id)
        assert run is not None and run.lease_expires_at == at(33)
        assert (run.progress, run.progress_message, run.progress_at) == (0.5, "half way", at(3))
        assert (run.checkpoint, run.checkpoint_at) == ({"offset": 500}, at(3))

    async def test_a_report_without_a_checkpoint_keeps_the_stored_one(self, store: Store) -> None:
        job, c = await _one_run(store)
        lease = [(c.run.id, c.run.fence)]
        first = RunReport(c.run.id, 0.25, "a quarter", '{"offset":250}')
        await store.heartbeat("w1", lease, now=at(1), lease_seconds=30, reports=[first])
        # Progress only, without a message: the message goes, the checkpoint stays.
        await store.heartbeat(
            "w1", lease, now=at(2), lease_seconds=30, reports=[RunReport(c.run.id, 0.75)]
        )
        run = await store.get_run(job.tenant_id, c.run.id)
        assert run is not None
        assert (run.progress, run.progress_message, run.progress_at) == (0.75, None, at(2))
        assert (run.checkpoint, run.checkpoint_at) == ({"offset": 250}, at(1))
        # A checkpoint only: the progress stays.
        await store.heartbeat(
            "w1",
            lease,
            now=at(4),
            lease_seconds=30,
            reports=[RunReport(c.run.id, checkpoint="[1]")],
        )
        run = await store.get_run(job.tenant_id, c.run.id)
        assert run is not None and (run.progress, run.progress_at) == (0.75, at(2))
        assert (run.checkpoint, run.checkpoint_at) == ([1], at(4))

    async def test_a_heartbeat_stores_reports_of_many_runs_in_one_call(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(-i)) for i in range(3)], [])
        claimed = await store.claim_runs(
            "w1", ["default"], limit=3, now=at(0), prefetch_until=at(0), lease_seconds=30
        )
        leases = [(c.run.id, c.run.fence) for c in claimed]
        # Only two of the three report: the third's lease is extended all the same.
        reports = [
            RunReport(c.run.id, 0.1 * n, checkpoint=str(n)) for n, c in enumerate(claimed[:2])
        ]
        result = await store.heartbeat("w1", leases, now=at(5), lease_seconds=30, reports=reports)
        assert sorted(result.extended) == sorted(r for r, _ in leases)
        runs = [await store.get_run(job.tenant_id, c.run.id) for c in claimed]
        assert [(r.progress, r.checkpoint) for r in runs if r] == [(0.0, 0), (0.1, 1), (None, None)]
        assert [r.lease_expires_at for r in runs if r] == [at(35)] * 3

    async def test_a_stale_workers_heartbeat_does_not_overwrite_the_checkpoint(
        self, store: Store
    ) -> None:
        job, first = await _one_run(store, timeout_seconds=5)
        await store.heartbeat(
            "w1",
            [(first.run.id, first.run.fence)],
            now=at(1),
            lease_seconds=2,
            reports=[RunReport(first.run.id, 0.5, "mine", '"w1 at 50%"')],
        )
        # w1's lease expires; the run is rescued and w2 takes it, checkpoints on its own.
        await store.rescue_expired(now=at(40))
        second = await _claim(store, 40, "w2")
        assert second.run.fence > first.run.fence
        await store.heartbeat(
            "w2",
            [(second.run.id, second.run.fence)],
            now=at(41),
            lease_seconds=30,
            reports=[RunReport(second.run.id, 0.6, "w2's", '"w2 at 60%"')],
        )
        # w1 did not notice and reports again, under its old fence: lost, nothing written.
        stale = await store.heartbeat(
            "w1",
            [(first.run.id, first.run.fence)],
            now=at(42),
            lease_seconds=30,
            reports=[RunReport(first.run.id, 0.9, "stale", '"w1 at 90%"')],
        )
        assert (stale.extended, stale.lost) == ([], [first.run.id])
        run = await store.get_run(job.tenant_id, first.run.id)
        assert run is not None
        assert (run.checkpoint, run.checkpoint_at) == ("w2 at 60%", at(41))
        assert (run.progress, run.progress_message) == (0.6, "w2's")
        # Nor can its completion write one.
        late = _done(first, RunState.SUCCEEDED, 43, checkpoint='"late"', progress=1.0)
        assert await store.complete_runs([late]) == []
        run = await store.get_run(job.tenant_id, first.run.id)
        assert run is not None and run.checkpoint == "w2 at 60%" and run.progress == 0.6

    async def test_the_next_attempt_is_claimed_with_the_last_checkpoint(self, store: Store) -> None:
        _, c = await _one_run(store)
        await store.heartbeat(
            "w1",
            [(c.run.id, c.run.fence)],
            now=at(1),
            lease_seconds=30,
            reports=[RunReport(c.run.id, 0.5, checkpoint='{"done":[1,2]}')],
        )
        # The attempt fails: the retry is claimed with the checkpoint.
        assert await store.complete_runs([_done(c, RunState.PENDING, 2)]) == [c.run.id]
        retry = await _claim(store, 2)
        assert retry.run.attempt == 2
        assert (retry.run.checkpoint, retry.run.checkpoint_at) == ({"done": [1, 2]}, at(1))
        assert (retry.run.progress, retry.run.progress_at) == (0.5, at(1))

    async def test_a_completion_stores_the_reports_no_heartbeat_carried(self, store: Store) -> None:
        job, c = await _one_run(store)
        done = _done(c, RunState.PENDING, 4, progress=0.3, progress_message="x", checkpoint="[3]")
        assert await store.complete_runs([done]) == [c.run.id]
        run = await store.get_run(job.tenant_id, c.run.id)
        assert run is not None and run.state is RunState.PENDING
        assert (run.progress, run.progress_message, run.progress_at) == (0.3, "x", at(4))
        assert (run.checkpoint, run.checkpoint_at) == ([3], at(4))
        # A completion without reports keeps them.
        again = await _claim(store, 4)
        assert await store.complete_runs([_done(again, RunState.SUCCEEDED, 5)]) == [c.run.id]
        run = await store.get_run(job.tenant_id, c.run.id)
        assert run is not None and run.state is RunState.SUCCEEDED
        assert (run.progress, run.checkpoint, run.checkpoint_at) == (0.3, [3], at(4))

    async def test_a_rescued_or_replayed_run_keeps_its_checkpoint(self, store: Store) -> None:
        job, c = await _one_run(store, retry=RetryPolicy(max_attempts=1))
        await store.heartbeat(
            "w1",
            [(c.run.id, c.run.fence)],
            now=at(1),
            lease_seconds=2,
            reports=[RunReport(c.run.id, checkpoint='{"page":7}')],
        )
        rescued = await store.rescue_expired(now=at(40))  # its last attempt: dead
        assert rescued.dead == [c.run.id]
        assert await store.replay_runs(
            job.tenant_id, [c.run.id], extra_attempts=1, now=at(41), actor="test"
        ) == [c.run.id]
        replayed = await _claim(store, 41)
        assert (replayed.run.checkpoint, replayed.run.checkpoint_at) == ({"page": 7}, at(1))
