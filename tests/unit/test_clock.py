"""Nodes follow the store's clock: the offset is measured, not assumed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronwheel.core.clock import FrozenClock, SystemClock, sync_to
from cronwheel.store.conformance.factories import T0


async def test_a_skewed_node_corrects_to_the_store_clock() -> None:
    clock = SystemClock()

    async def store_ahead() -> datetime:
        return datetime.now(UTC) + timedelta(seconds=5)

    await sync_to(clock, store_ahead)
    assert abs(clock.offset - timedelta(seconds=5)) < timedelta(milliseconds=100)
    assert abs(clock.now() - (datetime.now(UTC) + timedelta(seconds=5))) < timedelta(
        milliseconds=100
    )


async def test_a_frozen_clock_is_left_alone() -> None:
    clock = FrozenClock(T0)

    async def anything() -> datetime:
        return T0 + timedelta(days=1)

    await sync_to(clock, anything)
    assert clock.now() == T0
