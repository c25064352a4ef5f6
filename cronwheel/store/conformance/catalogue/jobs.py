"""Conformance: job definitions — create, read, list, update, state changes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cronwheel.core.model import (
    AttemptOutcome,
    Backoff,
    Delivery,
    JobKey,
    JobOrder,
    JobState,
    LastOutcome,
    MisfireMode,
    MisfirePolicy,
    Overlap,
    Priority,
    RetryPolicy,
    RunState,
)
from cronwheel.errors import Conflict, InvalidInput, NotFound, StaleVersion
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run


class JobsContract:
    """Job definitions — create, read, list, update, state changes.

    Part of the ``catalogue`` seam's contract: subclass it with a ``store`` fixture to
    run it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_create_then_get_returns_the_same_job(self, store: Store) -> None:
        job = make_job(
            "report",
            pool="reports",
            priority=Priority.HIGH,
            retry=RetryPolicy(5, Backoff.FIXED, 2.0, 10.0, 60.0),
            misfire=MisfirePolicy(MisfireMode.FIRE_LAST, 3),
            overlap=Overlap.QUEUE,
            delivery=Delivery.AT_MOST_ONCE,
            timeout_seconds=12.5,
            jitter_seconds=30.0,
            catchup_seconds=5.0,
            last_fire_at=at(-60),
        )
        await store.create_jobs([job])
        assert await store.get_job(job.tenant_id, job.id) == job

    async def test_another_tenant_sees_nothing(self, store: Store) -> None:
        await store.ensure_tenant("acme", "Acme", now=T0)
        job = make_job()
        await store.create_jobs([job])
        assert await store.get_job("acme", job.id) is None
        assert await store.list_jobs("acme") == []
        with pytest.raises(NotFound):
            await store.set_job_state(
                "acme", job.id, JobState.PAUSED, next_fire_at=None, now=T0, actor="t"
            )

    async def test_name_is_unique_per_tenant_among_live_jobs(self, store: Store) -> None:
        await store.ensure_tenant("acme", "Acme", now=T0)
        first = make_job("nightly")
        await store.create_jobs([first])
        with pytest.raises(Conflict) as err:
            await store.create_jobs([make_job("nightly")])
        assert err.value.field == "name"
        await store.create_jobs([make_job("nightly", tenant_id="acme")])
        await store.set_job_state(
            first.tenant_id, first.id, JobState.CANCELLED, next_fire_at=None, now=T0, actor="t"
        )
        await store.create_jobs([make_job("nightly")])  # a cancelled job frees its name

    async def test_a_failing_batch_writes_nothing(self, store: Store) -> None:
        taken = make_job("taken")
        await store.create_jobs([taken])
        fresh = make_job("fresh")
        with pytest.raises(Conflict):
            await store.create_jobs([fresh, make_job("taken")], [make_run(fresh, at(1))])
        assert await store.get_job(fresh.tenant_id, fresh.id) is None
        assert await store.list_runs(fresh.tenant_id) == []

    async def test_create_with_runs_is_atomic_and_runs_are_pending(self, store: Store) -> None:
        job = make_job(schedule={"kind": "immediate"})
        await store.create_jobs([job], [make_run(job, T0)])
        [run] = await store.list_runs(job.tenant_id, job_id=job.id)
        assert (run.state, run.scheduled_for, run.attempt, run.fence) == (
            RunState.PENDING,
            T0,
            0,
            0,
        )
        assert run.idempotency_key == f"{job.id}:{T0.isoformat()}"

    async def test_create_many_jobs_in_one_call(self, store: Store) -> None:
        jobs = [make_job(f"bulk-{i:05d}") for i in range(2000)]
        await store.create_jobs(jobs)
        listed = await store.list_jobs(jobs[0].tenant_id, limit=5000)
        assert len(listed) == 2000

    async def test_list_filters_and_a_cursor_that_survives_inserts(self, store: Store) -> None:
        jobs = [make_job(f"a-{i}", pool="p1" if i % 2 else "p2") for i in range(10)]
        await store.create_jobs(jobs)
        tenant = jobs[0].tenant_id
        page1 = await store.list_jobs(tenant, limit=4)
        await store.create_jobs([make_job("b-late")])
        page2 = await store.list_jobs(tenant, after=JobKey(page1[-1].id), limit=4)
        page3 = await store.list_jobs(tenant, after=JobKey(page2[-1].id), limit=100)
        seen = [j.name for j in page1 + page2 + page3]
        assert seen == [f"a-{i}" for i in range(10)] + ["b-late"]
        assert {j.pool for j in await store.list_jobs(tenant, pool="p1")} == {"p1"}
        assert [j.name for j in await store.list_jobs(tenant, name_prefix="b-")] == ["b-late"]
        await store.set_job_state(
            tenant, jobs[0].id, JobState.PAUSED, next_fire_at=None, now=T0, actor="t"
        )
        assert [j.id for j in await store.list_jobs(tenant, state=JobState.PAUSED)] == [jobs[0].id]

    async def test_list_by_schedule_kind_last_outcome_and_newest_first(self, store: Store) -> None:
        """What the dashboard's job list filters by: the schedule's kind and how the job's
        newest finished run ended (or that none has), walked either way with a cursor."""
        every = {"kind": "interval", "every_seconds": 60}
        ok, dead, fresh, skipped = (
            make_job("ok"),
            make_job("dead"),
            make_job("fresh"),
            make_job("s"),
        )
        iv = make_job("iv", schedule=every)
        await store.create_jobs([ok, dead, fresh, skipped, iv])
        await store.materialize_runs(
            [make_run(ok, at(0)), make_run(dead, at(0)), make_run(ok, at(1)), make_run(iv, at(0))],
            [],
        )
        claimed = {
            c.run.job_id + c.run.scheduled_for.isoformat(): c.run
            for c in await store.claim_runs(
                "w", ["default"], limit=10, now=at(1), prefetch_until=at(1), lease_seconds=30
            )
        }

        def done(job_id: str, s: float, state: RunState, finished_s: float) -> Completion:
            run = claimed[job_id + at(s).isoformat()]
            succeeded = state is RunState.SUCCEEDED
            return Completion(
                run_id=run.id,
                fence=run.fence,
                worker_id="w",
                state=state,
                outcome=AttemptOutcome.SUCCEEDED if succeeded else AttemptOutcome.FAILED,
                started_at=at(finished_s - 1),
                finished_at=at(finished_s),
                error_class=None if succeeded else "RuntimeError",
                error_message=None if succeeded else "boom",
                available_at=None,
            )

        # ok: a dead run, then a success that finished later; dead: the other way round.
        await store.complete_runs(
            [done(ok.id, 0, RunState.DEAD, 5), done(dead.id, 0, RunState.DEAD, 9)]
        )
        await store.complete_runs(
            [done(ok.id, 1, RunState.SUCCEEDED, 8), done(iv.id, 0, RunState.SUCCEEDED, 8)]
        )
        await store.materialize_runs([make_run(skipped, at(0), state=RunState.SKIPPED)], [])

        async def names(**filters: object) -> list[str]:
            return [j.name for j in await store.list_jobs("default", **filters)]  # type: ignore[arg-type]

        assert await names(last_outcome=LastOutcome.SUCCEEDED) == ["ok", "iv"]
        assert await names(last_outcome=LastOutcome.DEAD) == ["dead"]
        assert await names(last_outcome=LastOutcome.SKIPPED) == ["s"]
        assert await names(last_outcome=LastOutcome.CANCELLED) == []
        assert await names(last_outcome=LastOutcome.NONE) == ["fresh"]
        assert await names(schedule_kind="interval") == ["iv"]
        assert await names(schedule_kind="cron", last_outcome=LastOutcome.SUCCEEDED) == ["ok"]
        assert await names(schedule_kind="once") == []
        assert await store.list_jobs("other", last_outcome=LastOutcome.SUCCEEDED) == []

        newest = JobOrder.CREATED_DESC
        assert await names(order=newest) == ["iv", "s", "fresh", "dead", "ok"]
        first = await store.list_jobs("default", order=newest, limit=2)
        rest = await store.list_jobs("default", order=newest, after=JobKey(first[-1].id), limit=2)
        assert [j.name for j in first + rest] == ["iv", "s", "fresh", "dead"]
        older = await store.list_jobs(
            "default", order=newest, after=JobKey(rest[-1].id), last_outcome=LastOutcome.SUCCEEDED
        )
        assert [j.name for j in older] == ["ok"]

    async def test_name_prefix_is_literal(self, store: Store) -> None:
        await store.create_jobs([make_job("100%_done"), make_job("100abc")])
        found = await store.list_jobs("default", name_prefix="100%_")
        assert [j.name for j in found] == ["100%_done"]

    async def test_list_by_exact_name_and_by_id_prefix(self, store: Store) -> None:
        """What naming a job by its name or a short id needs: an exact name (cancelled jobs
        keep theirs, so several may match) and an id prefix, dashes and case aside."""
        old, live, other = make_job("nightly"), make_job("nightly-2"), make_job("Nightly")
        await store.create_jobs([old])
        await store.set_job_state(
            "default", old.id, JobState.CANCELLED, next_fire_at=None, now=T0, actor="t"
        )
        again = make_job("nightly")
        await store.create_jobs([live, other, again])
        named = await store.list_jobs("default", name="nightly")
        assert [j.id for j in named] == [old.id, again.id]
        assert await store.list_jobs("default", name="nightly", state=JobState.ACTIVE) == [
            await store.get_job("default", again.id)
        ]
        assert await store.list_jobs("other-tenant", name="nightly") == []
        # Jobs made in one millisecond share their first 13 characters: cut near the end.
        short = live.id[:-6]
        for prefix in (short, short.upper(), short.replace("-", ""), live.id):
            found = await store.list_jobs("default", id_prefix=prefix)
            assert [j.id for j in found] == [live.id], prefix
        shared = await store.list_jobs("default", id_prefix=live.id[:1])
        assert {j.id for j in shared} >= {old.id, live.id, other.id, again.id}
        assert await store.list_jobs("default", id_prefix="fff") == []
        with pytest.raises(InvalidInput, match="id_prefix"):
            await store.list_jobs("default", id_prefix="nightly")

    async def test_update_bumps_version_and_refuses_a_stale_one(self, store: Store) -> None:
        job = make_job("v")
        await store.create_jobs([job])
        changed = replace(job, payload={"x": 2}, updated_at=at(5))
        stored = await store.update_job(changed, expected_version=1, actor="alice")
        assert (stored.version, stored.payload, stored.updated_at) == (2, {"x": 2}, at(5))
        with pytest.raises(StaleVersion) as err:
            await store.update_job(changed, expected_version=1, actor="alice")
        assert (err.value.expected, err.value.actual) == (1, 2)
        with pytest.raises(NotFound):
            await store.update_job(replace(job, tenant_id="nobody"), expected_version=2, actor="a")
        actions = [(e.action, e.actor) for e in await store.list_audit(job.tenant_id, job.id)]
        assert actions == [("created", "api"), ("updated", "alice")]

    async def test_update_cannot_take_another_live_jobs_name(self, store: Store) -> None:
        a, b = make_job("a"), make_job("b")
        await store.create_jobs([a, b])
        with pytest.raises(Conflict) as err:
            await store.update_job(replace(b, name="a"), expected_version=1, actor="t")
        assert err.value.field == "name"

    async def test_pause_resume_cancel(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        pending = make_run(job, at(10))
        await store.materialize_runs([pending], [])
        tenant = job.tenant_id
        paused = await store.set_job_state(
            tenant, job.id, JobState.PAUSED, next_fire_at=None, now=at(1), actor="bob"
        )
        assert (paused.state, paused.version, paused.next_fire_at) == (JobState.PAUSED, 2, None)
        resumed = await store.set_job_state(
            tenant, job.id, JobState.ACTIVE, next_fire_at=at(60), now=at(2), actor="bob"
        )
        assert (resumed.state, resumed.version, resumed.next_fire_at) == (
            JobState.ACTIVE,
            3,
            at(60),
        )
        cancelled = await store.set_job_state(
            tenant, job.id, JobState.CANCELLED, next_fire_at=None, now=at(3), actor="bob"
        )
        assert cancelled.state is JobState.CANCELLED
        [run] = await store.list_runs(tenant, job_id=job.id)
        assert (run.state, run.finished_at) == (RunState.CANCELLED, at(3))
        with pytest.raises(Conflict):
            await store.set_job_state(
                tenant, job.id, JobState.ACTIVE, next_fire_at=at(60), now=at(4), actor="bob"
            )
        audit = await store.list_audit(tenant, job.id)
        assert [e.action for e in audit] == ["created", "paused", "resumed", "cancelled"]
        assert audit[1].details == {"from": "active", "to": "paused"}
        assert audit[1].at == at(1)

    async def test_tenants_are_created_once(self, store: Store) -> None:
        # ensure_tenant creates a missing tenant and leaves an existing one as it is: the
        # first name and creation time stand, and the tenant is listed once.
        await store.ensure_tenant("acme", "Acme", now=T0)
        await store.ensure_tenant("acme", "Acme again", now=at(5))
        acme = await store.get_tenant("acme")
        assert acme is not None and (acme.id, acme.name, acme.created_at) == ("acme", "Acme", T0)
        assert [t.id for t in await store.list_tenants()].count("acme") == 1
        await store.ensure_tenant("default", "Renamed", now=at(5))
        default = await store.get_tenant("default")
        assert default is not None and default.name != "Renamed"
        job = make_job(tenant_id="acme")
        await store.create_jobs([job])
        assert await store.get_job("acme", job.id) is not None

    async def test_a_state_change_can_record_runs_atomically(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.set_job_state(
            "default", job.id, JobState.PAUSED, next_fire_at=at(60), now=at(1), actor="t"
        )
        skipped = [make_run(job, at(s), state=RunState.SKIPPED, reason="paused") for s in (60, 120)]
        resumed = await store.set_job_state(
            "default",
            job.id,
            JobState.ACTIVE,
            next_fire_at=at(180),
            now=at(150),
            actor="t",
            runs=skipped,
        )
        assert (resumed.state, resumed.next_fire_at) == (JobState.ACTIVE, at(180))
        runs = await store.list_runs("default", job_id=job.id)
        assert [(r.scheduled_for, r.state, r.reason) for r in runs] == [
            (at(120), RunState.SKIPPED, "paused"),
            (at(60), RunState.SKIPPED, "paused"),
        ]

    async def test_replan_cancels_pending_runs_of_the_old_version_that_never_started(
        self,
        store: Store,
    ) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(s)) for s in (0, 10, 20)], [])
        [started] = await store.claim_runs(
            "w", ["default"], limit=1, now=at(0), prefetch_until=at(0), lease_seconds=60
        )
        retry = Completion(
            run_id=started.run.id,
            fence=started.run.fence,
            worker_id="w",
            state=RunState.PENDING,
            outcome=AttemptOutcome.FAILED,
            started_at=at(0),
            finished_at=at(1),
            available_at=at(30),
        )
        await store.complete_runs([retry])
        changed = replace(job, schedule={"kind": "cron", "cron": "*/5 * * * *", "timezone": "UTC"})
        await store.update_job(changed, expected_version=1, actor="alice", replan=True)
        runs = await store.list_runs("default", job_id=job.id)
        assert [(r.scheduled_for, r.state) for r in runs] == [
            (at(20), RunState.CANCELLED),
            (at(10), RunState.CANCELLED),
            (at(0), RunState.PENDING),  # a retry of an occurrence that already ran is kept
        ]
        assert "replanned" in (runs[0].reason or "")

    async def test_an_update_without_replan_keeps_pending_runs(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(10))], [])
        await store.update_job(replace(job, payload=1), expected_version=1, actor="a")
        assert [r.state for r in await store.list_runs("default", job_id=job.id)] == [
            RunState.PENDING
        ]
