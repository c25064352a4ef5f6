"""Concurrency keys through the Python API, on each store (decision 0031): every path that
creates runs writes the key rendered from the run's payload, and job creation validates
the template and the limit."""

from __future__ import annotations

import pytest

from cronwheel.control.service import JobService
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import MAX_CONCURRENCY_KEY, Concurrency, RunState
from cronwheel.engine.scheduler import Scheduler
from cronwheel.errors import InvalidInput
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at

HANDLER = {"type": "handler", "name": "noop"}
EVERY_MINUTE = {"kind": "cron", "cron": "* * * * *", "timezone": "UTC"}
KEYED = {"key": "report:{payload.customer.id}", "limit": 1}


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(at(1))


@pytest.fixture
def service(store: Store, clock: FrozenClock) -> JobService:
    return JobService(store, clock=clock, actor="tester")


def test_a_key_renders_payload_fields() -> None:
    c = Concurrency("r:{payload.customer.id}/{payload.kind}", 1)
    assert c.render({"customer": {"id": 42}, "kind": "pdf"}) == "r:42/pdf"
    assert c.render({"customer": {"id": "acme"}}) == "r:acme/"  # missing: empty
    assert c.render(None) == "r:/"
    assert c.render({"customer": None, "kind": None}) == "r:/"  # null: empty
    assert c.render({"customer": {"id": [1, {"b": 2, "a": 1}]}, "kind": True}) == (
        'r:[1,{"a":1,"b":2}]/true'
    )
    # Longer than the maximum: a prefix and a digest, so distinct keys stay distinct.
    long_a = c.render({"customer": {"id": "x" * 300}, "kind": "a"})
    long_b = c.render({"customer": {"id": "x" * 300}, "kind": "b"})
    assert len(long_a) == len(long_b) == MAX_CONCURRENCY_KEY and long_a != long_b
    assert long_a.startswith("r:xxx")


async def test_an_immediate_job_run_carries_its_key(service: JobService) -> None:
    job = await service.create(
        name="now",
        schedule={"kind": "immediate"},
        action=HANDLER,
        payload={"customer": {"id": 7}},
        concurrency=KEYED,
    )
    assert job.concurrency == Concurrency("report:{payload.customer.id}", 1)
    [run] = await service.runs(job.id)
    assert (run.concurrency_key, run.concurrency_limit) == ("report:7", 1)


async def test_enqueued_runs_render_their_own_payloads(service: JobService) -> None:
    job = await service.create(
        name="manual",
        schedule={"kind": "manual"},
        action=HANDLER,
        payload={"customer": {"id": "default"}},
        concurrency={"key": "report:{payload.customer.id}", "limit": 3},
    )
    ids = await service.enqueue(job.id, [{"customer": {"id": 1}}, None, {"other": 1}])
    runs = [await service.run(i) for i in ids]
    assert [r.concurrency_key for r in runs] == ["report:1", "report:default", "report:"]
    assert {r.concurrency_limit for r in runs} == {3}
    triggered = await service.trigger(job.id)
    assert triggered.concurrency_key == "report:default"


async def test_scheduled_triggered_and_backfilled_runs_carry_the_key(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    job = await service.create(
        name="cron",
        schedule=EVERY_MINUTE,
        action=HANDLER,
        payload={"customer": {"id": 9}},
        concurrency=KEYED,
    )
    clock.advance(60)
    await Scheduler(store, clock=clock).run_once()
    await service.trigger(job.id)
    clock.advance(600)
    await service.backfill(job.id, start=at(120), end=at(300))
    runs = await service.runs(job.id, limit=100)
    assert len(runs) >= 4
    assert {r.concurrency_key for r in runs} == {"report:9"}


async def test_replay_keeps_the_key(service: JobService, store: Store) -> None:
    await service.create(
        name="dies",
        schedule={"kind": "immediate"},
        action=HANDLER,
        payload={"customer": {"id": 5}},
        concurrency=KEYED,
        retry={"max_attempts": 1},
    )
    [claimed] = await store.claim_runs(
        "w", ["default"], limit=5, now=at(1), prefetch_until=at(1), lease_seconds=60
    )
    from cronwheel.core.model import AttemptOutcome
    from cronwheel.store.base import Completion

    r = claimed.run
    await store.complete_runs(
        [Completion(r.id, r.fence, "w", RunState.DEAD, AttemptOutcome.FAILED, at(1), at(2))]
    )
    assert await service.replay([r.id]) == [r.id]
    replayed = await service.run(r.id)
    assert (replayed.state, replayed.concurrency_key) == (RunState.PENDING, "report:5")


async def test_a_patch_changes_the_key_of_runs_made_after_it(service: JobService) -> None:
    job = await service.create(
        name="edit", schedule={"kind": "manual"}, action=HANDLER, payload={"customer": {"id": 1}}
    )
    [before] = await service.enqueue(job.id, [None])
    assert (await service.run(before)).concurrency_key is None
    await service.update(job.id, concurrency={"key": "c:{payload.customer.id}", "limit": 2})
    [after] = await service.enqueue(job.id, [None])
    assert (await service.run(after)).concurrency_key == "c:1"
    await service.update(job.id, concurrency=None)
    assert (await service.get(job.id)).concurrency is None


@pytest.mark.parametrize(
    ("concurrency", "field", "says"),
    [
        ({"key": "r:{customer}", "limit": 1}, "concurrency.key", "placeholder"),
        ({"key": "r:{payload.}", "limit": 1}, "concurrency.key", "placeholder"),
        ({"key": "r:}", "limit": 1}, "concurrency.key", "brace"),
        ({"key": "", "limit": 1}, "concurrency.key", "at least 1"),
        ({"key": "k" * 201, "limit": 1}, "concurrency.key", "at most 200"),
        ({"key": 5, "limit": 1}, "concurrency.key", "string"),
        ({"key": "k", "limit": 0}, "concurrency.limit", "greater than or equal to 1"),
        ({"key": "k", "limit": 1001}, "concurrency.limit", "less than or equal to 1000"),
        ({"key": "k", "limit": "2"}, "concurrency.limit", "integer"),
        ({"key": "k", "limit": True}, "concurrency.limit", "integer"),
        ({"key": "k", "limit": 1, "extra": 1}, "concurrency.extra", ""),
    ],
)
async def test_a_bad_concurrency_is_refused_naming_its_field(
    service: JobService, concurrency: object, field: str, says: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        await service.create(
            name="bad", schedule={"kind": "manual"}, action=HANDLER, concurrency=concurrency
        )
    assert caught.value.field == field
    assert says in str(caught.value)


async def test_bulk_created_jobs_render_each_payload(service: JobService) -> None:
    specs = [
        {
            "name": f"bulk-{i}",
            "schedule": {"kind": "immediate"},
            "action": HANDLER,
            "payload": {"customer": {"id": i % 2}},
            "concurrency": KEYED,
        }
        for i in range(4)
    ]
    jobs = await service.create_many(specs)
    keys = [(await service.runs(j.id))[0].concurrency_key for j in jobs]
    assert keys == ["report:0", "report:1", "report:0", "report:1"]
