"""Time, injected: services ask a :class:`Clock`, tests freeze and shift one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware, in UTC."""
        ...


class SystemClock:
    """The machine's clock, optionally corrected by an offset measured against the store."""

    def __init__(self, offset: timedelta = timedelta(0)) -> None:
        self.offset = offset

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


SYNC_SAMPLES = 5


async def sync_to(clock: Clock, source: Callable[[], Awaitable[datetime]]) -> None:
    """Correct a :class:`SystemClock` to ``source`` (the store's clock): the offset is
    measured against the midpoint of the round trip. Other clocks are left alone, so a
    test's frozen clock stays frozen."""
    if not isinstance(clock, SystemClock):
        return
    best: tuple[timedelta, timedelta] | None = None
    for _ in range(SYNC_SAMPLES):
        before = datetime.now(UTC)
        remote = await source()
        after = datetime.now(UTC)
        sample = (after - before, remote - (before + (after - before) / 2))
        # The quickest round trip bounds the error best: half its length at most.
        if best is None or sample[0] < best[0]:
            best = sample
    assert best is not None
    clock.offset = best[1]


class FrozenClock:
    """A clock that moves only when told to; for tests and simulations."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FrozenClock needs an aware datetime")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float = 0.0, **kwargs: float) -> datetime:
        self._now += timedelta(seconds=seconds, **kwargs)
        return self._now

    def set(self, instant: datetime) -> None:
        self._now = instant.astimezone(UTC)
