"""The jobs pages' wording: a run's badge in the timeline, the marks of upcoming fire
times, and the list's query string (filters kept by the next-page link)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from cronwheel.core.model import LastOutcome, Priority, Run, RunState
from cronwheel.dashboard.pages.jobs import ListQuery, _fire_rows, run_row
from cronwheel.errors import InvalidInput
from cronwheel.schedule.codec import schedule_from_dict
from cronwheel.schedule.preview import upcoming

T0 = datetime(2027, 3, 26, 1, 30, tzinfo=UTC)
RUN = Run(
    id=7,
    tenant_id="default",
    job_id="j",
    scheduled_for=T0,
    available_at=T0,
    state=RunState.PENDING,
    pool="default",
    priority=Priority.NORMAL,
    attempt=0,
    max_attempts=3,
    fence=0,
    job_version=1,
    created_at=T0,
)


def test_a_run_reads_as_what_happened_to_it() -> None:
    assert (run_row(RUN).badge, run_row(RUN).label) == ("pending", "pending")
    retried = run_row(replace(RUN, attempt=1, last_error="HTTP 503"))
    assert (retried.badge, retried.label) == ("failed", "failed, will retry")
    assert retried.detail == "attempt 1 of 3 failed: HTTP 503"
    done = run_row(
        replace(
            RUN,
            state=RunState.SUCCEEDED,
            attempt=2,
            started_at=T0 + timedelta(seconds=2),
            finished_at=T0 + timedelta(seconds=5),
        )
    )
    assert done.label == "succeeded after 2 attempts"
    assert (done.started_after, done.took) == (2.0, 3.0)
    dead = run_row(replace(RUN, state=RunState.DEAD, reason="attempts exhausted", last_error="x"))
    assert (dead.badge, dead.detail) == ("dead", "attempts exhausted; x")
    skipped = run_row(replace(RUN, state=RunState.SKIPPED, reason="overlap"))
    assert (skipped.badge, skipped.detail) == ("skipped", "overlap")


def test_fires_around_a_spring_forward_say_moved_and_the_new_offset() -> None:
    schedule = schedule_from_dict(
        {"kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Paris"}
    )
    rows = _fire_rows(upcoming(schedule, T0, 4))
    assert rows[0].local == "Fri 2027-03-26 02:30:00 +01:00 CET"
    assert rows[0].utc == "2027-03-26 01:30:00 UTC"
    assert rows[0].marks == rows[1].marks == []
    assert rows[2].local == "Sun 2027-03-28 03:00:00 +02:00 CEST"
    assert rows[2].marks[0].startswith("moved: ")
    assert rows[2].marks[1] == "offset changed from +01:00 to +02:00 since the last fire"
    assert rows[3].marks == []


def test_the_list_query_keeps_its_filters_in_links_and_refuses_unknown_values() -> None:
    query = ListQuery.parse({"q": " nightly ", "kind": "cron", "outcome": "none", "limit": "2"})
    assert query.filters()["last_outcome"] is LastOutcome.NONE
    assert query.filters()["name_prefix"] == "nightly"
    assert (
        query.link(cursor="abc") == "/ui/jobs?q=nightly&kind=cron&outcome=none&limit=2&cursor=abc"
    )
    assert ListQuery.parse({}).link() == "/ui/jobs"
    for field, bad in (
        ("state", "sleeping"),
        ("outcome", "failed"),
        ("order", "last_run"),
        ("limit", "0"),
    ):
        with pytest.raises(InvalidInput) as err:
            ListQuery.parse({field: bad})
        assert err.value.field == field
