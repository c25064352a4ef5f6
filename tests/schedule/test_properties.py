"""Property tests: the engine against a brute-force oracle, over random expressions and
random windows around DST transitions (and in a zone without DST)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronwheel.schedule import CronExpression, next_times, occurrences
from tests.schedule.oracle import OracleCron, expected, utc
from tests.schedule.strategies import expressions, fixed_time_expressions

# Instants (UTC) of 2024 transitions: spring-forward then fall-back, per zone.
TRANSITIONS = {
    "America/New_York": (
        datetime(2024, 3, 10, 7, tzinfo=UTC),
        datetime(2024, 11, 3, 6, tzinfo=UTC),
    ),
    "Europe/London": (datetime(2024, 3, 31, 1, tzinfo=UTC), datetime(2024, 10, 27, 1, tzinfo=UTC)),
    "Australia/Lord_Howe": (
        datetime(2024, 10, 5, 15, 30, tzinfo=UTC),
        datetime(2024, 4, 6, 15, tzinfo=UTC),
    ),
    "Asia/Kolkata": (datetime(2024, 3, 10, 7, tzinfo=UTC), datetime(2024, 11, 3, 6, tzinfo=UTC)),
}
Window = tuple[str, int, int]
Policy = tuple[str, str]
POLICIES = st.sampled_from(
    [("gap_end", "first"), ("skip", "both"), ("shift", "first")]  # vixie, instant, shift
    + [(g, o) for g in ("gap_end", "skip", "shift") for o in ("first", "last", "both")]
)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def windows(draw: st.DrawFn, hours: int) -> Window:
    """A zone and a window (start, end] in POSIX seconds that often spans a transition."""
    zone = draw(st.sampled_from(sorted(TRANSITIONS)))
    transition = draw(st.sampled_from(TRANSITIONS[zone]))
    before = draw(st.integers(0, hours * 3600))
    start = int(transition.timestamp()) - before + draw(st.integers(0, 59))
    return zone, start, start + hours * 3600


def check_against_oracle(cron: OracleCron, window: Window, policy: Policy) -> None:
    zone, start, end = window
    gap, overlap = policy
    want = expected(cron, ZoneInfo(zone), start, end, gap, overlap)
    got = next_times(cron.text, zone, utc(start), len(want) + 1, dst_gap=gap, dst_overlap=overlap)
    got_in_window = [int(g.timestamp()) for g in got if g.timestamp() <= end]
    assert got_in_window == want, (cron.text, zone, utc(start), policy)


@SETTINGS
@given(expressions(), windows(hours=40), POLICIES)
def test_minutes_match_the_oracle(cron: OracleCron, window: Window, policy: Policy) -> None:
    check_against_oracle(cron, window, policy)


@SETTINGS
@given(fixed_time_expressions(), windows(hours=30), POLICIES)
def test_fixed_time_jobs_match_the_oracle(cron: OracleCron, window: Window, policy: Policy) -> None:
    check_against_oracle(cron, window, policy)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions(with_seconds=True), windows(hours=2), POLICIES)
def test_seconds_match_the_oracle(cron: OracleCron, window: Window, policy: Policy) -> None:
    check_against_oracle(cron, window, policy)


@SETTINGS
@given(expressions(), windows(hours=24), POLICIES)
def test_results_strictly_increase_and_match_locally(
    cron: OracleCron, window: Window, policy: Policy
) -> None:
    zone, start, _ = window
    found = occurrences(
        CronExpression.parse(cron.text),
        utc(start),
        zone,
        40,
        dst_gap=policy[0],
        dst_overlap=policy[1],
    )
    instants = [o.at.timestamp() for o in found]
    assert instants == sorted(set(instants))
    assert all(i > start for i in instants)
    for o in found:
        assert o.at.tzinfo == ZoneInfo(zone)
        assert cron.matches(o.wall)
        if o.dst not in ("moved", "shifted"):  # not moved: the wall reading itself matches
            assert cron.matches(o.at.replace(tzinfo=None))


@SETTINGS
@given(expressions(), windows(hours=24), POLICIES)
def test_stepping_one_at_a_time_gives_the_same_list(
    cron: OracleCron, window: Window, policy: Policy
) -> None:
    zone, start, _ = window
    expr = CronExpression.parse(cron.text)
    batch = next_times(cron.text, zone, utc(start), 8, dst_gap=policy[0], dst_overlap=policy[1])
    stepped: list[datetime] = []
    after = utc(start)
    while len(stepped) < len(batch):
        nxt = expr.next_after(after, zone, dst_gap=policy[0], dst_overlap=policy[1])
        assert nxt is not None
        stepped.append(nxt)
        after = nxt
    assert [d.timestamp() for d in stepped] == [d.timestamp() for d in batch]
