"""When a job runs next, in the CLI's words: relative times against a given instant, the
line after a job is created, the line for a job with no runs yet, and the narrow
``next fire`` column a job table falls back to on a narrow terminal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cronwheel.cli.hints import fire_line, next_in, no_runs_line, span, until
from cronwheel.cli.tables import Column, fit, layout

NOW = datetime(2026, 11, 24, 13, 24, 0, 250_000, tzinfo=UTC)
JOB_ID = "01a20aee-b808-7000-8a6d-746a4710197a"


def _job(**changes: Any) -> dict[str, Any]:
    return {
        "id": JOB_ID,
        "name": "send-invoice",
        "schedule": {"kind": "once", "at": "2026-11-24T13:25:00+00:00"},
        "state": "active",
        "next_fire_at": NOW + timedelta(seconds=60),
        "last_fire_at": None,
        **changes,
    }


def test_spans_in_their_two_largest_units() -> None:
    assert span(58) == "58 s"
    assert span(59.6) == "1 min"
    assert span(245) == "4 min 5 s"
    assert span(3 * 3600 + 5 * 60 + 59) == "3 h 5 min"  # seconds left out, not rounded up
    assert span(3 * 3600 + 59) == "3 h"
    assert span(2 * 86_400 + 4 * 3600 + 7) == "2 d 4 h"
    assert span(0.2) == "0 s"


def test_relative_times_are_measured_against_the_given_instant() -> None:
    assert until(NOW + timedelta(seconds=58), NOW) == "in 58 s"
    assert until((NOW + timedelta(seconds=58)).isoformat(), NOW) == "in 58 s"
    assert until(NOW + timedelta(milliseconds=300), NOW) == "now"
    assert until(NOW - timedelta(seconds=3), NOW) == "due 3 s ago"
    assert until(None, NOW) == "" and until("not a time", NOW) == ""
    # A paused job keeps its next_fire_at, but will not fire at it.
    assert next_in(_job(), NOW) == "in 1 min"
    assert next_in(_job(state="paused"), NOW) == "paused"


def test_a_new_job_says_when_it_fires_first() -> None:
    due = (NOW + timedelta(seconds=60)).isoformat()
    assert fire_line(_job(), NOW) == f"next fire: {due} (in 1 min)"
    assert fire_line(_job(), NOW + timedelta(seconds=2)) == f"next fire: {due} (in 58 s)"
    cron = {"kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Paris"}
    paris = _job(schedule=cron, next_fire_at="2026-11-25T01:30:00+00:00")
    assert fire_line(paris, NOW) == (
        "next fire: 2026-11-25T01:30:00+00:00 (in 12 h 6 min; Wed 2026-11-25 02:30:00 Europe/Paris)"
    )


def test_a_job_that_does_not_fire_by_itself_says_why() -> None:
    immediate = _job(schedule={"kind": "immediate"}, state="completed", next_fire_at=None)
    assert fire_line(immediate, NOW) == (
        "next fire: none: an immediate job's one run is created with it"
        " (cronwheel jobs runs send-invoice)"
    )
    manual = _job(schedule={"kind": "manual"}, next_fire_at=None, name="my job")
    assert fire_line(manual, NOW) == (
        "next fire: never by itself: a manual job runs when triggered or enqueued to"
        " (cronwheel jobs trigger 'my job')"
    )
    assert fire_line(_job(state="paused"), NOW).startswith("next fire: none while paused")
    assert fire_line(_job(state="cancelled"), NOW) == "next fire: none: the job is cancelled"
    assert fire_line(_job(next_fire_at=None), NOW) == "next fire: none planned"


def test_a_job_without_runs_yet_says_when_its_first_is_due() -> None:
    due = (NOW + timedelta(seconds=60)).isoformat()
    assert no_runs_line(_job(), NOW + timedelta(seconds=2)) == (
        f"no runs yet: the next is due at {due} (in 58 s);"
        " the scheduler creates its run shortly before"
    )
    assert no_runs_line(_job(), NOW, "dead").startswith(f"no dead runs: the next is due at {due}")
    fired = _job(last_fire_at=NOW - timedelta(days=30))  # its runs may have been purged
    assert no_runs_line(fired, NOW).startswith("no runs: the next is due")
    late = no_runs_line(_job(), NOW + timedelta(seconds=75))
    assert late == (
        f"no runs yet: the next was due at {due} (due 15 s ago) and its run is not created"
        " yet: is a scheduler running (cronwheel scheduler, or cronwheel dev)?"
    )


def test_a_job_without_runs_because_paused_or_manual_says_so() -> None:
    assert no_runs_line(_job(state="paused"), NOW) == (
        "no runs yet: the job is paused, so none are planned until it is resumed"
        " (cronwheel jobs resume send-invoice)"
    )
    manual = _job(schedule={"kind": "manual"}, next_fire_at=None)
    assert no_runs_line(manual, NOW) == (
        "no runs yet: a manual job runs only when triggered or enqueued to"
        " (cronwheel jobs trigger send-invoice, or cronwheel jobs enqueue)"
    )
    assert no_runs_line(_job(state="cancelled"), NOW) == "no runs yet: the job is cancelled"


def test_a_column_too_wide_gives_way_to_its_narrow_form_at_its_own_rank() -> None:
    whole = "2026-11-24T13:25:00.250000+00:00"
    columns = [
        Column("id", kind="id"),
        Column("name", kind="text"),
        Column("state", rank=1),
        Column(
            "next_fire_at",
            kind="time",
            rank=2,
            narrow=Column(
                "in",
                header="next fire",
                kind="time",
                value=lambda r: r["next_fire_at"] and "in 58 s",
            ),
        ),
        Column("pool", rank=3),
    ]
    rows = [{"id": JOB_ID, "name": "nightly", "state": "active", "next_fire_at": whole}]
    rows[0]["pool"] = "default"
    chosen, cells, shown = layout(rows, columns, 120)
    assert [chosen[i].title for i in shown] == ["id", "name", "state", "next_fire_at", "pool"]
    assert cells[0][3] == whole
    # At 80 columns the whole time (32) does not fit; "in 58 s" does, before the pool.
    chosen, cells, shown = layout(rows, columns, 80)
    assert [chosen[i].title for i in shown] == ["id", "name", "state", "next fire", "pool"]
    assert cells[0][3] == "in 58 s"
    assert fit(columns, [[JOB_ID, "nightly", "active", whole, "default"]], 80) == [0, 1, 2, 4]
    # An empty column stays out in either form.
    chosen, _, shown = layout([rows[0] | {"next_fire_at": None}], columns, 80)
    assert "next fire" not in [chosen[i].title for i in shown]
