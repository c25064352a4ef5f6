"""Conformance: cancel, replay (the dead-letter queue), listings and retention."""

from __future__ import annotations

import pytest

from cronwheel.core.model import AttemptOutcome, RetryPolicy, RunState
from cronwheel.errors import NotFound
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run


async def _dead_run(store: Store) -> int:
    job = make_job(retry=RetryPolicy(max_attempts=1))
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(0))], [])
    [c] = await store.claim_runs(
        "w", ["default"], limit=1, now=at(0), prefetch_until=at(0), lease_seconds=5
    )
    done = Completion(
        run_id=c.run.id,
        fence=c.run.fence,
        worker_id="w",
        state=RunState.DEAD,
        outcome=AttemptOutcome.FAILED,
        started_at=at(0),
        finished_at=at(1),
        error_class="RuntimeError",
        error_message="broken",
    )
    await store.complete_runs([done])
    return c.run.id


class ControlContract:
    """Cancel, replay (the dead-letter queue), listings and retention.

    Part of the ``run_control`` seam's contract: subclass it with a ``store`` fixture to
    run it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_cancelled_pending_run_is_never_claimed(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0))], [])
        [run] = await store.list_runs(job.tenant_id)
        cancelled = await store.cancel_run(job.tenant_id, run.id, now=at(-1), actor="ops")
        assert (cancelled.state, cancelled.finished_at) == (RunState.CANCELLED, at(-1))
        assert (
            await store.claim_runs(
                "w", ["default"], limit=5, now=at(5), prefetch_until=at(5), lease_seconds=5
            )
            == []
        )
        assert [e.action for e in await store.list_audit(job.tenant_id, str(run.id))] == [
            "cancelled"
        ]

    async def test_cancelling_a_finished_run_changes_nothing(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs(
            [make_run(job, at(0), state=RunState.SKIPPED, reason="overlap")], []
        )
        [run] = await store.list_runs(job.tenant_id)
        again = await store.cancel_run(job.tenant_id, run.id, now=at(1), actor="ops")
        assert (again.state, again.reason) == (RunState.SKIPPED, "overlap")

    async def test_cancel_of_another_tenants_run_is_not_found(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0))], [])
        [run] = await store.list_runs(job.tenant_id)
        with pytest.raises(NotFound):
            await store.cancel_run("someone-else", run.id, now=at(1), actor="x")
        assert await store.get_run("someone-else", run.id) is None

    async def test_replay_gives_a_dead_run_a_fresh_budget(self, store: Store) -> None:
        run_id = await _dead_run(store)
        dead = await store.list_runs("default", state=RunState.DEAD)
        assert [r.id for r in dead] == [run_id]
        assert await store.replay_runs(
            "default", [run_id, 12345], extra_attempts=2, now=at(10), actor="ops"
        ) == [run_id]
        run = await store.get_run("default", run_id)
        assert run is not None
        assert (run.state, run.available_at, run.max_attempts, run.finished_at) == (
            RunState.PENDING,
            at(10),
            3,
            None,
        )
        [c] = await store.claim_runs(
            "w", ["default"], limit=1, now=at(10), prefetch_until=at(10), lease_seconds=5
        )
        assert (c.run.attempt, c.run.idempotency_key) == (2, run.idempotency_key)
        assert (
            await store.replay_runs("default", [run_id], extra_attempts=2, now=at(11), actor="ops")
            == []
        )
        assert [e.action for e in await store.list_audit("default", str(run_id))] == ["replayed"]

    async def test_replay_is_tenant_scoped(self, store: Store) -> None:
        run_id = await _dead_run(store)
        assert (
            await store.replay_runs("other", [run_id], extra_attempts=1, now=at(10), actor="x")
            == []
        )

    async def test_runs_of_a_job_newest_first_with_a_cursor(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        # inserted out of order: listing follows scheduled_for, not insertion
        await store.materialize_runs([make_run(job, at(s)) for s in (3, 1, 4, 0, 2)], [])
        page1 = await store.list_runs(job.tenant_id, job_id=job.id, limit=2)
        page2 = await store.list_runs(
            job.tenant_id, job_id=job.id, before_id=page1[-1].id, limit=10
        )
        assert [r.scheduled_for for r in page1 + page2] == [at(s) for s in (4, 3, 2, 1, 0)]
        everything = await store.list_runs(job.tenant_id, limit=2)
        rest = await store.list_runs(job.tenant_id, before_id=everything[-1].id)
        ids = [r.id for r in everything + rest]
        assert ids == sorted(ids, reverse=True) and len(ids) == 5

    async def test_retention_deletes_only_old_finished_runs(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        old_id = await _dead_run(store)
        await store.materialize_runs([make_run(job, at(50))], [])
        assert await store.delete_history(before=T0) == 0
        assert await store.delete_history(before=at(3600)) == 1
        assert await store.get_run("default", old_id) is None
        assert await store.list_attempts("default", old_id) == []
        assert len(await store.list_runs("default", job_id=job.id)) == 1

    async def test_retention_deletes_finished_pipeline_runs_with_their_tasks(
        self, store: Store
    ) -> None:
        """Pipeline runs are history too: a finished one older than the retention goes with
        its task rows; a running one stays, whatever its age."""
        from cronwheel.core.model import new_id
        from cronwheel.core.pipelines.definition import parse_definition
        from cronwheel.core.pipelines.model import Pipeline, PipelineRunStart

        d = parse_definition({"tasks": {"a": {"action": {"type": "handler", "name": "a"}}}})
        pipeline = Pipeline(new_id(), "default", "kept", 1, d.to_dict(), d.fingerprint(), T0, T0, 1)
        await store.create_pipeline(pipeline, actor="alice")
        job = make_job(next_fire_at=None)
        await store.create_jobs([job])
        started = []
        for _ in range(2):
            start = PipelineRunStart.of(pipeline, job_id=job.id, job_version=1, actor="t", now=T0)
            started.append(await store.start_pipeline_run(start))
        done, running = started
        await store.cancel_pipeline_run("default", done.id, now=at(1), actor="alice")
        assert (await store.get_pipeline_run("default", done.id)).state == "cancelled"  # type: ignore[union-attr]
        await store.delete_history(before=at(3600))
        assert await store.get_pipeline_run("default", done.id) is None
        kept = await store.get_pipeline_run("default", running.id)
        assert kept is not None and kept.state == "running" and len(kept.tasks) == 1
