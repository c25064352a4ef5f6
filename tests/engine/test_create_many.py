"""JobService.create_many on each store: a bulk create of mixed specs, all or nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cronwheel.control.service import JobService
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import JobState, RunState
from cronwheel.errors import InvalidInput
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at

HANDLER = {"type": "handler", "name": "noop"}
SCHEDULES: list[dict[str, Any]] = [
    {"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"},
    {"kind": "immediate"},
    {"kind": "delay", "seconds": 90},
    {"kind": "interval", "every_seconds": 60},
    {"kind": "once", "at": at(3600).isoformat()},
]


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(at(1))


@pytest.fixture
def service(store: Store, clock: FrozenClock) -> JobService:
    return JobService(store, clock=clock, actor="tester")


def specs(n: int) -> list[dict[str, Any]]:
    return [
        {"name": f"bulk-{i:05d}", "schedule": SCHEDULES[i % len(SCHEDULES)], "action": HANDLER}
        | ({"payload": {"i": i}} if i % 2 else {})
        for i in range(n)
    ]


async def test_a_mixed_batch_plans_each_job_and_reads_back_as_returned(
    service: JobService,
) -> None:
    jobs = await service.create_many(specs(1500))
    expected = [
        (JobState.ACTIVE, datetime(2031, 1, 1, tzinfo=UTC)),
        (JobState.COMPLETED, None),
        (JobState.ACTIVE, at(91)),  # the delay, pinned at creation
        (JobState.ACTIVE, at(61)),  # the interval, anchored at creation
        (JobState.ACTIVE, at(3600)),
    ]
    assert [(j.state, j.next_fire_at) for j in jobs] == [expected[i % 5] for i in range(1500)]
    stored = {j.id: j for j in await service.list_jobs(limit=2000)}
    assert [stored[j.id] for j in jobs] == jobs
    immediate = [j for j in jobs if j.schedule["kind"] == "immediate"]
    for job in immediate[:3] + immediate[-3:]:
        [run] = await service.runs(job.id)
        assert (run.state, run.scheduled_for) == (RunState.PENDING, at(1))
    assert await service.runs(jobs[0].id) == []


async def test_a_bad_spec_late_in_a_batch_names_its_field_and_writes_nothing(
    service: JobService,
) -> None:
    batch = specs(1500)
    batch[1234] = batch[1234] | {"retry": {"max_attempts": 0}}
    with pytest.raises(InvalidInput) as err:
        await service.create_many(batch)
    assert err.value.field == "retry.max_attempts"
    assert await service.list_jobs() == []
