"""Schedule kinds: validation, resolve, first_fire, next_fire, start_at/end_at."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from cronwheel.schedule import (
    CronSchedule,
    DelaySchedule,
    ImmediateSchedule,
    IntervalSchedule,
    ManualSchedule,
    OnceSchedule,
    first_fire,
    next_fire,
    resolve,
)

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
PARIS = ZoneInfo("Europe/Paris")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


class TestValidation:
    def test_datetimes_are_stored_in_utc(self) -> None:
        once = OnceSchedule(datetime(2024, 6, 1, 14, 0, tzinfo=PARIS))
        assert once.at == NOW
        assert once.at.tzinfo is UTC

    @pytest.mark.parametrize(
        ("build", "message"),
        [
            (lambda: OnceSchedule(datetime(2024, 1, 1)), "at: must include a UTC offset"),
            (lambda: ImmediateSchedule(start_at=datetime(2024, 1, 1)), "start_at: must include"),
            (lambda: OnceSchedule("2024-01-01"), "at: expected a datetime, got str"),  # type: ignore[arg-type]
            (
                lambda: ImmediateSchedule(start_at=NOW, end_at=NOW - timedelta(seconds=1)),
                "end_at: must not be before start_at",
            ),
            (lambda: DelaySchedule(0), "seconds: must be a finite number of seconds > 0"),
            (lambda: DelaySchedule(-5), "seconds: must be a finite number of seconds > 0"),
            (lambda: DelaySchedule(float("nan")), "seconds: must be a finite number"),
            (lambda: DelaySchedule(True), "seconds: expected a number of seconds, got bool"),
            (lambda: IntervalSchedule(0), "every_seconds: must be a finite number of seconds > 0"),
            (lambda: IntervalSchedule(60, datetime(2024, 1, 1)), "anchor: must include"),
            (lambda: CronSchedule("* * * * 8"), "cron: day-of-week: 8 is out of range 0-7"),
            (lambda: CronSchedule("* * * *"), "cron: expression: expected 5, 6 or 7 fields"),
            (lambda: CronSchedule("* * * * *", "Mars/Olympus"), "timezone: unknown IANA zone"),
            (lambda: CronSchedule("* * * * *", dialect="vixie"), "dialect: unknown dialect"),
            (lambda: CronSchedule("* * * * *", dst_gap="never"), "dst_gap: unknown policy"),
            (lambda: CronSchedule("* * * * *", dst_overlap="x"), "dst_overlap: unknown policy"),
            (lambda: CronSchedule(5), "cron: expected a string, got int"),  # type: ignore[arg-type]
        ],
    )
    def test_errors_name_the_field(self, build: Callable[[], object], message: str) -> None:
        with pytest.raises(ValueError) as caught:
            build()
        assert str(caught.value).startswith(message)

    def test_schedules_are_frozen(self) -> None:
        with pytest.raises(AttributeError):
            OnceSchedule(NOW).at = NOW  # type: ignore[misc]


class TestImmediateOnceDelay:
    def test_immediate(self) -> None:
        assert first_fire(ImmediateSchedule(), NOW) == NOW
        later = NOW + timedelta(hours=1)
        assert first_fire(ImmediateSchedule(start_at=later), NOW) == later
        assert first_fire(ImmediateSchedule(start_at=NOW - timedelta(days=1)), NOW) == NOW
        assert first_fire(ImmediateSchedule(end_at=NOW - timedelta(seconds=1)), NOW) is None
        assert next_fire(ImmediateSchedule(), NOW) is None

    def test_manual_never_fires_by_itself(self) -> None:
        assert resolve(ManualSchedule(), NOW) == ManualSchedule()
        assert first_fire(ManualSchedule(), NOW) is None
        assert next_fire(ManualSchedule(), NOW) is None

    def test_once_fires_at_its_time_even_in_the_past(self) -> None:
        past = NOW - timedelta(days=3)
        assert first_fire(OnceSchedule(past), NOW) == past
        assert first_fire(OnceSchedule(NOW, end_at=NOW), NOW) == NOW  # end_at is inclusive
        assert first_fire(OnceSchedule(NOW, end_at=past), past) is None
        assert first_fire(OnceSchedule(past, start_at=NOW), NOW) is None
        assert next_fire(OnceSchedule(NOW + timedelta(days=1)), NOW) is None

    def test_delay(self) -> None:
        delay = DelaySchedule(90, end_at=NOW + timedelta(days=1))
        assert resolve(delay, NOW) == OnceSchedule(
            NOW + timedelta(seconds=90), end_at=NOW + timedelta(days=1)
        )
        assert first_fire(delay, NOW) == NOW + timedelta(seconds=90)
        assert first_fire(DelaySchedule(90, end_at=NOW), NOW) is None
        assert next_fire(delay, NOW) is None

    def test_resolve_needs_an_aware_now(self) -> None:
        with pytest.raises(ValueError, match=r"^now: must include a UTC offset"):
            resolve(DelaySchedule(5), datetime(2024, 1, 1))


class TestInterval:
    def test_anchored_at_creation_fires_one_period_later(self) -> None:
        every = IntervalSchedule(60)
        pinned = resolve(every, NOW)
        assert pinned == IntervalSchedule(60, NOW)
        assert first_fire(every, NOW) == NOW + timedelta(seconds=60)
        assert first_fire(pinned, NOW) == NOW + timedelta(seconds=60)
        assert next_fire(pinned, NOW + timedelta(seconds=60)) == NOW + timedelta(seconds=120)

    def test_start_at_is_the_first_fire(self) -> None:
        start = NOW + timedelta(hours=2)
        every = IntervalSchedule(3600, start_at=start)
        assert resolve(every, NOW) == IntervalSchedule(3600, start, start_at=start)
        assert first_fire(every, NOW) == start
        assert next_fire(resolve(every, NOW), start) == start + timedelta(hours=1)
        assert next_fire(resolve(every, NOW), NOW) == start  # nothing before start_at

    def test_start_at_in_the_past_keeps_its_grid(self) -> None:
        start = NOW - timedelta(seconds=90)
        assert first_fire(IntervalSchedule(60, start_at=start), NOW) == NOW + timedelta(seconds=30)

    def test_explicit_anchor_is_a_phase(self) -> None:
        every = IntervalSchedule(60, at("2024-01-01T00:00:07+00:00"))
        assert first_fire(every, NOW) == at("2024-06-01T12:00:07+00:00")
        assert next_fire(every, at("2024-06-01T12:00:07+00:00")) == at("2024-06-01T12:01:07+00:00")
        assert next_fire(every, at("2024-06-01T12:00:30+00:00")) == at("2024-06-01T12:01:07+00:00")

    def test_end_at_is_inclusive(self) -> None:
        every = IntervalSchedule(60, NOW, end_at=NOW + timedelta(seconds=120))
        assert next_fire(every, NOW + timedelta(seconds=60)) == NOW + timedelta(seconds=120)
        assert next_fire(every, NOW + timedelta(seconds=120)) is None

    def test_fractional_periods(self) -> None:
        every = IntervalSchedule(1.5, NOW)
        assert next_fire(every, NOW) == NOW + timedelta(milliseconds=1500)

    def test_unresolved_next_fire_counts_from_after(self) -> None:
        assert next_fire(IntervalSchedule(60), NOW) == NOW + timedelta(seconds=60)


class TestCron:
    def test_first_fire_is_inclusive_of_now(self) -> None:
        daily = CronSchedule("0 12 * * *")
        assert first_fire(daily, NOW) == NOW
        assert first_fire(daily, NOW + timedelta(microseconds=1)) == NOW + timedelta(days=1)

    def test_next_fire_is_strictly_after(self) -> None:
        assert next_fire(CronSchedule("0 12 * * *"), NOW) == NOW + timedelta(days=1)

    def test_in_a_timezone_returns_utc(self) -> None:
        paris = CronSchedule("0 9 * * *", "Europe/Paris")
        winter = first_fire(paris, at("2024-01-10T00:00:00+00:00"))
        summer = first_fire(paris, at("2024-07-10T00:00:00+00:00"))
        assert winter == at("2024-01-10T08:00:00+00:00")
        assert summer == at("2024-07-10T07:00:00+00:00")
        assert winter is not None and winter.tzinfo is UTC

    def test_dst_policy_is_applied(self) -> None:
        before = at("2024-03-10T05:00:00+00:00")
        vixie = CronSchedule("30 2 * * *", "America/New_York")
        skip = CronSchedule("30 2 * * *", "America/New_York", dst_gap="skip")
        assert first_fire(vixie, before) == at("2024-03-10T07:00:00+00:00")
        assert first_fire(skip, before) == at("2024-03-11T06:30:00+00:00")

    def test_start_at_and_end_at(self) -> None:
        start = at("2024-06-03T00:00:00+00:00")
        bounded = CronSchedule("0 12 * * *", start_at=start, end_at=at("2024-06-04T12:00:00+00:00"))
        assert first_fire(bounded, NOW) == at("2024-06-03T12:00:00+00:00")
        assert next_fire(bounded, NOW) == at("2024-06-03T12:00:00+00:00")
        assert next_fire(bounded, at("2024-06-03T12:00:00+00:00")) == at(
            "2024-06-04T12:00:00+00:00"
        )
        assert next_fire(bounded, at("2024-06-04T12:00:00+00:00")) is None
        on_start = CronSchedule("0 0 * * *", start_at=start)
        assert first_fire(on_start, NOW) == start  # an occurrence at start_at counts

    def test_a_schedule_that_stops_firing(self) -> None:
        assert first_fire(CronSchedule("0 0 30 2 *"), NOW) is None
        assert first_fire(CronSchedule("0 0 0 1 1 * 2024"), NOW) is None

    def test_every(self) -> None:
        every = CronSchedule("@every 90s")
        assert first_fire(every, NOW) == NOW + timedelta(seconds=90)
        assert next_fire(every, NOW) == NOW + timedelta(seconds=90)
        later = NOW + timedelta(hours=1)
        delayed = CronSchedule("@every 90s", start_at=later)
        assert first_fire(delayed, NOW) == later + timedelta(seconds=90)
        assert next_fire(delayed, NOW) == later + timedelta(seconds=90)

    def test_quartz(self) -> None:
        quartz = CronSchedule("0 0 12 ? * MON-FRI", dialect="quartz")
        assert next_fire(quartz, NOW) == at("2024-06-03T12:00:00+00:00")  # NOW is a Saturday


def test_an_interval_under_a_second_is_refused() -> None:
    from cronwheel.errors import InvalidInput
    from cronwheel.schedule import schedule_from_dict

    for tiny in (1e-9, 0.5):
        with pytest.raises(InvalidInput) as err:
            schedule_from_dict({"kind": "interval", "every_seconds": tiny})
        assert err.value.field == "every_seconds"


def test_an_instant_past_year_9999_in_utc_is_refused() -> None:
    from cronwheel.errors import InvalidInput
    from cronwheel.schedule import schedule_from_dict

    with pytest.raises(InvalidInput) as err:
        schedule_from_dict({"kind": "once", "at": "9999-12-31T23:59:59-05:00"})
    assert err.value.field == "at"
