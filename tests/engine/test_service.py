"""The Python API (JobService) on each store: validation and the control verbs."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronwheel.control.service import JobService
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import JobState, Overlap, Priority, RunState
from cronwheel.engine.scheduler import Scheduler
from cronwheel.errors import Conflict, InvalidInput, NotFound, StaleVersion
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import T0, at

EVERY_MINUTE = {"kind": "cron", "cron": "* * * * *", "timezone": "Europe/Paris"}
HANDLER = {"type": "handler", "name": "noop"}


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(at(1))  # one second past a minute: the first fire is the next minute


@pytest.fixture
def service(store: Store, clock: FrozenClock) -> JobService:
    return JobService(store, clock=clock, actor="tester")


async def _tick(store: Store, clock: FrozenClock) -> None:
    await Scheduler(store, clock=clock).run_once()


async def test_create_computes_the_first_fire_and_applies_defaults(service: JobService) -> None:
    job = await service.create(
        name="report", schedule=EVERY_MINUTE, action=HANDLER, priority="high"
    )
    assert (job.state, job.version, job.next_fire_at, job.priority) == (
        JobState.ACTIVE,
        1,
        at(60),
        Priority.HIGH,
    )
    assert (job.retry.max_attempts, job.overlap, job.catchup_seconds) == (3, Overlap.ALLOW, 60.0)
    assert await service.get(job.id) == job


async def test_an_immediate_job_gets_its_run_with_it(service: JobService) -> None:
    job = await service.create(name="now", schedule={"kind": "immediate"}, action=HANDLER)
    [run] = await service.runs(job.id)
    assert (job.state, run.state, run.scheduled_for) == (
        JobState.COMPLETED,
        RunState.PENDING,
        at(1),
    )


async def test_a_delay_is_pinned_at_creation(service: JobService) -> None:
    job = await service.create(
        name="later", schedule={"kind": "delay", "seconds": 90}, action=HANDLER
    )
    assert job.schedule["kind"] == "once" and job.next_fire_at == at(91)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"schedule": {"kind": "cron", "cron": "61 * * * *"}}, "schedule.cron"),
        (
            {"schedule": {"kind": "cron", "cron": "* * * * *", "timezone": "Mars/Olympus"}},
            "schedule.timezone",
        ),
        ({"schedule": {"kind": "once", "at": "2029-12-31T00:00:00+00:00"}}, "schedule.at"),
        ({"action": {"type": "webhook", "url": "ftp://example.com"}}, "action.url"),
        ({"action": {"type": "handler", "name": ""}}, "action.name"),
        ({"name": "x" * 201}, "name"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"colour": "blue"}, "colour"),
        ({"priority": "urgent"}, "priority"),
        ({"payload": "x" * 300_000}, "payload"),
    ],
)
async def test_bad_input_names_the_field_and_writes_nothing(
    service: JobService, spec: dict[str, object], field: str
) -> None:
    base = {"name": "bad", "schedule": EVERY_MINUTE, "action": HANDLER}
    with pytest.raises(InvalidInput) as err:
        await service.create(**(base | spec))
    assert err.value.field == field, err.value
    assert await service.list_jobs() == []


async def test_update_bumps_the_version_and_replans_a_changed_schedule(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    job = await service.create(name="r", schedule=EVERY_MINUTE, action=HANDLER)
    clock.set(at(59))
    await _tick(store, clock)
    assert [r.scheduled_for for r in await service.runs(job.id)] == [at(60)]
    updated = await service.update(
        job.id, schedule={"kind": "cron", "cron": "*/5 * * * *", "timezone": "UTC"}
    )
    assert (updated.version, updated.next_fire_at) == (2, at(300))
    [run] = await service.runs(job.id)
    assert run.state is RunState.CANCELLED and "replanned" in (run.reason or "")
    with pytest.raises(StaleVersion):
        await service.update(job.id, expected_version=1, payload={"x": 1})
    same = await service.update(job.id, payload={"x": 1})
    assert (same.version, same.next_fire_at, same.payload) == (3, at(300), {"x": 1})


async def test_pause_then_resume_records_what_the_pause_skipped(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    job = await service.create(name="p", schedule=EVERY_MINUTE, action=HANDLER)
    await service.pause(job.id)
    clock.set(at(200))
    await _tick(store, clock)
    assert await service.runs(job.id) == []  # a paused job produces nothing
    resumed = await service.resume(job.id)
    assert (resumed.state, resumed.next_fire_at) == (JobState.ACTIVE, at(240))
    runs = await service.runs(job.id)
    assert [(r.scheduled_for, r.state, r.reason) for r in runs] == [
        (at(180), RunState.SKIPPED, "paused"),
        (at(120), RunState.SKIPPED, "paused"),
        (at(60), RunState.SKIPPED, "paused"),
    ]
    # Resuming an active job is a no-op (docs/lifecycle.md): same job, same version.
    assert await service.resume(job.id) == resumed


async def test_resume_with_catch_up_hands_the_backlog_to_the_misfire_policy(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    job = await service.create(name="c", schedule=EVERY_MINUTE, action=HANDLER, catchup_seconds=0)
    await service.pause(job.id)
    clock.set(at(200))
    await service.resume(job.id, catch_up=True)
    await _tick(store, clock)
    runs = await service.runs(job.id)
    assert [(r.scheduled_for, r.state, r.reason) for r in runs] == [
        (at(180), RunState.PENDING, None),  # misfire "fire once now"
        (at(120), RunState.SKIPPED, "misfire"),
        (at(60), RunState.SKIPPED, "misfire"),
    ]


async def test_cancel_and_trigger(service: JobService, store: Store, clock: FrozenClock) -> None:
    job = await service.create(name="t", schedule=EVERY_MINUTE, action=HANDLER)
    run = await service.trigger(job.id)
    assert (run.scheduled_for, run.state, run.reason) == (
        at(1),
        RunState.PENDING,
        "triggered by tester",
    )
    cancelled = await service.cancel(job.id)
    assert cancelled.state is JobState.CANCELLED
    assert (await service.run(run.id)).state is RunState.CANCELLED
    with pytest.raises(Conflict):
        await service.trigger(job.id)
    clock.advance(3600)
    await _tick(store, clock)
    assert len(await service.runs(job.id)) == 1
    audit = [e.action for e in await store.list_audit("default", job.id)]
    assert audit == ["created", "cancelled"]


MANUAL = {"kind": "manual"}


async def test_a_manual_job_runs_only_what_is_enqueued_to_it(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    job = await service.create(name="q", schedule=MANUAL, action=HANDLER, payload={"d": 0})
    assert (job.state, job.next_fire_at, job.schedule) == (JobState.ACTIVE, None, MANUAL)
    ids = await service.enqueue(job.id, [{"to": "a"}, None])
    # A trigger at the very same instant takes the next one instead of clashing.
    triggered = await service.trigger(job.id)
    runs = {r.id: r for r in await service.runs(job.id)}
    assert sorted(runs) == [*ids, triggered.id]
    assert [runs[i].payload for i in ids] == [{"to": "a"}, None]
    assert [runs[i].reason for i in ids] == ["enqueued by tester"] * 2
    assert [runs[i].scheduled_for for i in [*ids, triggered.id]] == [
        at(1),
        at(1) + timedelta(microseconds=1),
        at(1) + timedelta(microseconds=2),
    ]
    clock.advance(86_400)
    await _tick(store, clock)  # the scheduler never plans a manual job
    assert len(await service.runs(job.id)) == 3
    assert (await service.get(job.id)).state is JobState.ACTIVE


async def test_enqueue_checks_every_payload_before_writing_any(service: JobService) -> None:
    job = await service.create(name="q", schedule=MANUAL, action=HANDLER)
    for bad, reason in (
        (float("nan"), "is not JSON"),
        (object(), "is not JSON"),
        ("x" * (256 * 1024), "the limit is 262144"),
    ):
        with pytest.raises(InvalidInput) as caught:
            await service.enqueue(job.id, [{"ok": 1}, bad])
        assert caught.value.field == "payloads[1]"
        assert reason in str(caught.value)
    assert await service.runs(job.id) == []


async def test_a_payload_is_measured_alike_on_a_job_and_on_an_enqueued_run(
    service: JobService,
) -> None:
    # 130,000 zeros: 260,001 bytes as compact JSON, 390,000 with json.dumps's spaces.
    fits, too_big = [0] * 130_000, [0] * 140_000
    job = await service.create(name="q", schedule=MANUAL, action=HANDLER, payload=fits)
    assert (await service.get(job.id)).payload == fits
    assert len(await service.enqueue(job.id, [fits])) == 1
    with pytest.raises(InvalidInput, match="is 280001 bytes") as on_job:
        await service.create(name="big", schedule=MANUAL, action=HANDLER, payload=too_big)
    with pytest.raises(InvalidInput, match="is 280001 bytes") as on_run:
        await service.enqueue(job.id, [too_big])
    assert (on_job.value.field, on_run.value.field) == ("payload", "payloads[0]")


async def test_enqueue_wants_an_active_manual_job(service: JobService) -> None:
    cron = await service.create(name="c", schedule=EVERY_MINUTE, action=HANDLER)
    with pytest.raises(Conflict) as caught:
        await service.enqueue(cron.id, [1])
    assert caught.value.field == "schedule" and '{"kind": "manual"}' in caught.value.reason
    manual = await service.create(name="q", schedule=MANUAL, action=HANDLER)
    await service.pause(manual.id)
    with pytest.raises(Conflict, match="paused"):
        await service.enqueue(manual.id, [1])
    await service.resume(manual.id)
    assert len(await service.enqueue(manual.id, [1])) == 1
    with pytest.raises(NotFound):
        await service.enqueue(manual.id, [1], tenant_id="acme")
    # An update that keeps the schedule keeps the runs waiting; new ones take its version.
    updated = await service.update(manual.id, priority="high")
    assert [r.state for r in await service.runs(manual.id)] == [RunState.PENDING]
    assert len(await service.enqueue(updated.id, [2])) == 1


async def test_other_tenants_are_invisible(service: JobService, store: Store) -> None:
    await store.ensure_tenant("acme", "Acme", now=T0)
    job = await service.create(name="mine", schedule=EVERY_MINUTE, action=HANDLER)
    with pytest.raises(NotFound):
        await service.get(job.id, tenant_id="acme")
    with pytest.raises(NotFound):
        await service.pause(job.id, tenant_id="acme")


async def test_replay_gives_the_jobs_full_budget_again(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    job = await service.create(
        name="d", schedule={"kind": "immediate"}, action=HANDLER, retry={"max_attempts": 2}
    )
    [run] = await service.runs(job.id)
    for _ in range(2):
        await store.claim_runs(
            "w", ["default"], limit=1, now=clock.now(), prefetch_until=clock.now(), lease_seconds=1
        )
        await store.rescue_expired(now=clock.advance(2))
    assert [r.id for r in await service.dead_letter()] == [run.id]
    assert await service.replay([run.id, run.id + 1000]) == [run.id]
    replayed = await service.run(run.id)
    assert (replayed.state, replayed.max_attempts, replayed.idempotency_key) == (
        RunState.PENDING,
        4,
        run.idempotency_key,
    )


async def test_the_python_api_shows_how_the_last_run_ended(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    from cronwheel.actions import PermanentError
    from cronwheel.engine.worker import Worker, WorkerConfig

    job = await service.create(name="once-now", schedule={"kind": "immediate"}, action=HANDLER)
    assert (await service.get(job.id)).last_run is None
    worker = Worker(store, WorkerConfig(pools={"default": 1}), clock=clock, webhook_secret=b"s")

    @worker.handler("noop")
    def refuse(ctx: object) -> None:
        raise PermanentError("the account is closed")

    assert await worker.run_once() == 1
    found = await service.get(job.id)
    assert found.state is JobState.COMPLETED
    assert found.last_run is not None
    assert (found.last_run.state, found.last_run.attempt) == (RunState.DEAD, 1)
    assert found.last_run.reason is not None and "permanent" in found.last_run.reason
    assert found.last_run.last_error == "the account is closed"
    [listed] = await service.list_jobs()
    assert listed.last_run == found.last_run


async def test_an_update_that_changes_nothing_bumps_nothing(
    service: JobService, store: Store
) -> None:
    job = await service.create(name="same", schedule=EVERY_MINUTE, action=HANDLER, payload=[1])
    same = await service.update(job.id, expected_version=1, payload=[1], schedule=EVERY_MINUTE)
    assert same == job and same.version == 1
    with pytest.raises(StaleVersion):  # an edit of a version that is not the job's
        await service.update(job.id, expected_version=7, payload=[1])
    changed = await service.update(job.id, expected_version=1, payload=[2])
    assert (changed.version, changed.payload) == (2, [2])
    assert [e.action for e in await store.list_audit("default", job.id)] == ["created", "updated"]
