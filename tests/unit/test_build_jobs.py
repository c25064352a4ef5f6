"""build_jobs, create_many's bulk path: the jobs and errors of JobSpec.parse(s).to_job(...)
one spec at a time, whatever it caches within a call."""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronwheel.core.jobspec import JobSpec, build_jobs
from cronwheel.core.model import Job, JobState
from cronwheel.errors import InvalidInput

NOW = datetime(2030, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
HANDLER = {"type": "handler", "name": "noop"}
WEBHOOK = {
    "type": "webhook",
    "url": "https://example.com/hook",
    "headers": {"X-Key": "k"},
    "body": {"nested": [1, 2.5, None, True]},
}
SCHEDULES: list[dict[str, Any]] = [
    {"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"},
    {"kind": "cron", "cron": "*/5 * * * *", "timezone": "Europe/Paris", "dialect": "standard"},
    {"kind": "immediate"},
    {"kind": "immediate", "start_at": "2030-03-02T00:00:00+00:00"},
    {"kind": "once", "at": "2030-03-01T14:00:00+01:00"},
    {"kind": "once", "at": datetime(2030, 3, 1, 14, tzinfo=UTC)},
    {"kind": "delay", "seconds": 30},
    {"kind": "delay", "seconds": 30.0},
    {"kind": "interval", "every_seconds": 60},
    {"kind": "interval", "every_seconds": 3600, "start_at": "2030-03-01T11:00:00Z"},
]


def one_at_a_time(specs: list[Any], jobs: list[Job]) -> list[Job]:
    """What JobSpec makes of each spec, under the id build_jobs gave it."""
    return [
        JobSpec.parse(s).to_job(tenant_id="t", now=NOW, job_id=j.id)
        for s, j in zip(specs, jobs, strict=True)
    ]


def as_json(job: Job) -> str:
    # Equal jobs may still differ in what they store: 30 and 30.0, 0.0 and -0.0.
    fields = (job.schedule, job.action, job.payload, job.timeout_seconds, job.jitter_seconds)
    return json.dumps([*fields, math.copysign(1, job.jitter_seconds)])


def mixed_specs(n: int) -> list[dict[str, Any]]:
    specs = []
    for i in range(n):
        schedule = SCHEDULES[i % len(SCHEDULES)]
        spec: dict[str, Any] = {
            "name": f"job-{i}",
            # Shared objects (as a caller's loop makes them) and fresh copies (as JSON does).
            "schedule": schedule if i % 3 else copy.deepcopy(schedule),
            "action": HANDLER if i % 4 else copy.deepcopy(WEBHOOK),
        }
        if i % 5 == 0:
            spec["payload"] = {"i": i}
        if i % 7 == 0:
            spec["retry"] = {"max_attempts": 5, "backoff": "fixed"}
        if i % 11 == 0:
            spec["jitter_seconds"] = 1 if i % 2 else 1.0
        if i % 13 == 0:
            spec["priority"] = "high"
        specs.append(spec)
    return specs


def test_a_mixed_batch_builds_what_one_spec_at_a_time_builds() -> None:
    specs = mixed_specs(500)
    jobs = build_jobs(specs, tenant_id="t", now=NOW)
    expected = one_at_a_time(specs, jobs)
    assert jobs == expected
    assert [as_json(j) for j in jobs] == [as_json(j) for j in expected]
    for spec, job in zip(specs, jobs, strict=True):
        assert job.payload is spec.get("payload")  # the caller's object, as pydantic keeps it
    ids = [j.id for j in jobs]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_each_job_is_planned_from_its_own_schedule() -> None:
    specs = [{"name": f"j{i}", "schedule": s, "action": HANDLER} for i, s in enumerate(SCHEDULES)]
    jobs = build_jobs(specs, tenant_id="t", now=NOW)
    plans = [(j.schedule["kind"], j.state, j.next_fire_at, j.last_fire_at) for j in jobs]
    hour = datetime(2030, 3, 1, 13, tzinfo=UTC)
    assert plans == [
        ("cron", JobState.ACTIVE, datetime(2031, 1, 1, tzinfo=UTC), None),
        ("cron", JobState.ACTIVE, datetime(2030, 3, 1, 12, 5, tzinfo=UTC), None),
        ("immediate", JobState.COMPLETED, None, NOW),
        ("immediate", JobState.COMPLETED, None, NOW),
        ("once", JobState.ACTIVE, hour, None),
        ("once", JobState.ACTIVE, hour + timedelta(hours=1), None),
        ("once", JobState.ACTIVE, NOW + timedelta(seconds=30), None),  # a delay, pinned
        ("once", JobState.ACTIVE, NOW + timedelta(seconds=30), None),
        ("interval", JobState.ACTIVE, NOW + timedelta(seconds=60), None),
        ("interval", JobState.ACTIVE, hour, None),
    ]
    assert jobs[6].schedule == {"kind": "once", "at": (NOW + timedelta(seconds=30)).isoformat()}
    assert jobs[8].schedule["anchor"] == NOW.isoformat()


def test_equal_values_of_other_types_are_kept_apart() -> None:
    specs = [
        {"name": "int", "schedule": {"kind": "delay", "seconds": 30}, "action": HANDLER},
        {"name": "float", "schedule": {"kind": "delay", "seconds": 30.0}, "action": HANDLER},
        {"name": "zero", "schedule": SCHEDULES[0], "action": HANDLER, "jitter_seconds": 0.0},
        {"name": "minus", "schedule": SCHEDULES[0], "action": HANDLER, "jitter_seconds": -0.0},
        {"name": "one", "schedule": SCHEDULES[0], "action": HANDLER, "timeout_seconds": 1},
    ]
    jobs = build_jobs(specs, tenant_id="t", now=NOW)
    expected = one_at_a_time(specs, jobs)
    assert [as_json(j) for j in jobs] == [as_json(j) for j in expected]
    assert math.copysign(1, jobs[3].jitter_seconds) == -1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"timeout_seconds": True}, "timeout_seconds"),
        ({"jitter_seconds": "1"}, "jitter_seconds"),
        ({"timeout_seconds": 1e-300}, "timeout_seconds"),
        ({"retry": {"max_attempts": 2.5}}, "retry.max_attempts"),
        ({"retry": {"max_attempts": True}}, "retry.max_attempts"),
        ({"misfire": {"mode": "skip", "limit": "5"}}, "misfire.limit"),
    ],
)
def test_numbers_are_parsed_strictly(changes: dict[str, Any], field: str) -> None:
    # Issue 17, defect 7: a bool, a string or a float where an int is due were accepted,
    # the first even after a valid job with the same value filled the shortcut's cache.
    good = {"name": "ok", "schedule": SCHEDULES[0], "action": HANDLER, "timeout_seconds": 1}
    with pytest.raises(InvalidInput) as caught:
        build_jobs([good, {**good, "name": "bad", **changes}], tenant_id="t", now=NOW)
    assert caught.value.field == f"jobs.1.{field}" or caught.value.field == field


def test_a_whole_float_is_an_integer() -> None:
    # JSON has one kind of number, and JSON Schema's "integer" (what /openapi.json says)
    # takes 2.0: the job gets 2, an int (decision 0045).
    good = {"name": "ok", "schedule": SCHEDULES[0], "action": HANDLER}
    [job] = build_jobs([{**good, "retry": {"max_attempts": 2.0}}], tenant_id="t", now=NOW)
    assert job.retry.max_attempts == 2
    assert type(job.retry.max_attempts) is int


class _LooksLikeAString:
    """Not a string, though its repr reads like one: JobSpec refuses it."""

    def __repr__(self) -> str:
        return "'k'"


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        ({"1": "k"}, {1: "k"}),
        ({"X-Key": "k"}, (("X-Key", "k"),)),
        # The same repr, told apart by equality.
        ({"X-Key": "k"}, {"X-Key": _LooksLikeAString()}),
    ],
    ids=["int-key", "tuple", "repr-look-alike"],
)
def test_a_look_alike_of_a_valid_value_is_validated_on_its_own(good: Any, bad: Any) -> None:
    def spec(name: str, headers: Any) -> dict[str, Any]:
        return {"name": name, "schedule": SCHEDULES[0], "action": {**WEBHOOK, "headers": headers}}

    with pytest.raises(InvalidInput) as alone:
        JobSpec.parse(spec("bad", bad)).to_job(tenant_id="t", now=NOW)
    batch = [spec(f"good-{i}", copy.deepcopy(good)) for i in range(3)] + [spec("bad", bad)]
    assert _error(batch) == (alone.value.field, alone.value.reason)


def test_specs_as_json_makes_them_cost_what_shared_objects_cost() -> None:
    # Every spec its own dicts, as a JSON body decodes them.
    specs = json.loads(json.dumps(mixed_specs(60), default=str))
    jobs = build_jobs(specs, tenant_id="t", now=NOW)
    expected = one_at_a_time(specs, jobs)
    assert [as_json(j) for j in jobs] == [as_json(j) for j in expected]
    # The caches still apply: every job after the first takes what the first made.
    same = [{"name": f"j{i}", "schedule": SCHEDULES[2], "action": WEBHOOK} for i in range(5)]
    jobs = build_jobs(json.loads(json.dumps(same)), tenant_id="t", now=NOW)
    assert len({id(j.schedule) for j in jobs}) == len({id(j.action) for j in jobs}) == 1


BAD_SPECS: list[tuple[Any, str]] = [
    ({"name": "", "schedule": SCHEDULES[0], "action": HANDLER}, "name"),
    ({"name": "x" * 201, "schedule": SCHEDULES[0], "action": HANDLER}, "name"),
    ({"name": 7, "schedule": SCHEDULES[0], "action": HANDLER}, "name"),
    ({"name": "lone \udc80", "schedule": SCHEDULES[0], "action": HANDLER}, "name"),
    ({"schedule": SCHEDULES[0], "action": HANDLER}, "name"),
    ({"name": "s", "schedule": {"kind": "cron", "cron": "61 * * * *"}, "action": HANDLER}, ""),
    (
        {
            "name": "s",
            "schedule": {"kind": "once", "at": "2000-01-01T00:00:00Z"},
            "action": HANDLER,
        },
        "",
    ),
    ({"name": "s", "schedule": {"kind": "interval", "every_seconds": 0.5}, "action": HANDLER}, ""),
    ({"name": "s", "schedule": {"kind": "delay", "seconds": True}, "action": HANDLER}, ""),
    ({"name": "s", "schedule": "hourly", "action": HANDLER}, ""),
    ({"name": "s", "action": HANDLER}, ""),
    ({"name": "a", "schedule": SCHEDULES[0], "action": {"type": "handler"}}, ""),
    ({"name": "a", "schedule": SCHEDULES[0], "action": HANDLER, "colour": "blue"}, ""),
    ({"name": "a", "schedule": SCHEDULES[0], "action": HANDLER, "payload": "x" * 300_000}, ""),
    ({"name": "a", "schedule": SCHEDULES[0], "action": HANDLER, "jitter_seconds": -1}, ""),
    ({"name": "a", "schedule": SCHEDULES[0], "action": HANDLER, "retry": {"max_attempts": 0}}, ""),
    (["not", "a", "spec"], ""),
]


def _error(specs: list[Any]) -> tuple[str, str]:
    with pytest.raises(InvalidInput) as err:
        build_jobs(specs, tenant_id="t", now=NOW)
    return err.value.field, err.value.reason


@pytest.mark.parametrize("position", [0, 5, 10])
@pytest.mark.parametrize(("bad", "field"), BAD_SPECS, ids=[str(i) for i in range(len(BAD_SPECS))])
def test_a_bad_spec_anywhere_raises_what_it_raises_alone(
    bad: Any, field: str, position: int
) -> None:
    with pytest.raises(InvalidInput) as alone:
        JobSpec.parse(bad).to_job(tenant_id="t", now=NOW)
    # The good specs around it fill the caches the bad one must not slip through.
    good = [{"name": f"g{i}", "schedule": SCHEDULES[0], "action": HANDLER} for i in range(10)]
    batch = [*good[:position], bad, *good[position:]]
    assert _error(batch) == (alone.value.field, alone.value.reason)
    if field:
        assert alone.value.field == field


def test_an_error_that_is_not_invalid_input_is_raised_as_before() -> None:
    bad = {"name": "a", "schedule": SCHEDULES[0], "action": HANDLER, "payload": {1, 2}}
    good = {"name": "b", "schedule": SCHEDULES[0], "action": HANDLER}
    with pytest.raises(TypeError, match="not JSON serializable"):
        build_jobs([good, bad], tenant_id="t", now=NOW)


def test_nothing_is_remembered_from_one_call_to_the_next() -> None:
    schedule: dict[str, Any] = {"kind": "delay", "seconds": 30}
    spec = {"name": "later", "schedule": schedule, "action": HANDLER}
    [first] = build_jobs([spec], tenant_id="t", now=NOW)
    [second] = build_jobs([spec], tenant_id="t", now=NOW + timedelta(seconds=5))
    assert (first.next_fire_at, second.next_fire_at) == (
        NOW + timedelta(seconds=30),
        NOW + timedelta(seconds=35),
    )
    schedule["seconds"] = 90  # the caller reuses its dict for the next batch
    [third] = build_jobs([spec], tenant_id="t", now=NOW)
    assert third.next_fire_at == NOW + timedelta(seconds=90)
    spec["payload"] = "x" * 300_000
    with pytest.raises(InvalidInput, match="payload"):
        build_jobs([spec], tenant_id="t", now=NOW)
