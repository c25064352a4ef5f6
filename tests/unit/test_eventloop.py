"""cronwheel.engine.eventloop: timers wake after whole milliseconds rounded up once, not twice."""

from __future__ import annotations

import asyncio
import math
import selectors
import sys
import time

import pytest

from cronwheel.cli._common import run_async
from cronwheel.engine import eventloop

linux_only = pytest.mark.skipif(
    not hasattr(selectors, "EpollSelector"), reason="epoll exists on Linux only"
)


def _epoll_milliseconds(seconds: float) -> int:
    """What CPython's ``select.epoll.poll`` waits for a timeout in seconds: rounded up to
    nanoseconds, then up to milliseconds (``_PyTime_ROUND_TIMEOUT``, then
    ``_PyTime_ROUND_CEILING``)."""
    return math.ceil(math.ceil(seconds * 1e9) / 1e6)


def test_a_wait_is_rounded_up_to_whole_milliseconds_once() -> None:
    for whole_ms in range(1, 3001):
        # What asyncio's selector hands over for a wait a little under k ms: k * 1e-3, a
        # float that for many k (9, 10, ...) lies just above k ms and would wait k + 1.
        handed = whole_ms * 1e-3
        assert _epoll_milliseconds(eventloop.epoll_timeout(handed)) == whole_ms
        # A timeout not rounded beforehand is rounded up the same way.
        for asked in (whole_ms - 0.7, whole_ms - 0.01, whole_ms):
            assert _epoll_milliseconds(eventloop.epoll_timeout(asked * 1e-3)) == whole_ms


def test_stock_rounding_overshoots_for_the_values_the_fix_is_for() -> None:
    # The premise: without epoll_timeout, some whole-millisecond waits take one more.
    overshooting = [k for k in range(1, 100) if _epoll_milliseconds(k * 1e-3) != k]
    assert 9 in overshooting


@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_no_wait_and_forever_are_passed_through(seconds: float) -> None:
    assert eventloop.epoll_timeout(seconds) == seconds


@linux_only
def test_a_real_wait_ends_in_the_millisecond_it_was_rounded_to() -> None:
    # 8.5 ms rounds up to 9; the stock selector waits 10 ms (0.009000000000000001 s
    # rounded up again), and the kernel never wakes early, so every stock wait is
    # >= 10 ms. The least of many waits shows the rounding without depending on load.
    selector = eventloop.OnTimeEpollSelector()
    try:
        waits = []
        for _ in range(40):
            start = time.perf_counter()
            selector.select(0.0085)
            waits.append(time.perf_counter() - start)
    finally:
        selector.close()
    assert 0.0085 <= min(waits) < 0.0099


def test_commands_run_on_the_on_time_loop() -> None:
    async def selector_type() -> type:
        return type(asyncio.get_running_loop()._selector)  # type: ignore[attr-defined]

    expected = eventloop.OnTimeEpollSelector if hasattr(selectors, "EpollSelector") else object
    assert issubclass(run_async(selector_type), expected)


def test_run_returns_the_result_and_closes_its_loop() -> None:
    async def answer() -> tuple[int, asyncio.AbstractEventLoop]:
        return 42, asyncio.get_running_loop()

    value, loop = eventloop.run(answer())
    assert value == 42 and loop.is_closed()


@pytest.mark.skipif(sys.platform != "linux", reason="the selector is chosen on Linux")
def test_new_event_loop_is_built_on_the_on_time_selector() -> None:
    loop = eventloop.new_event_loop()
    try:
        assert isinstance(loop._selector, eventloop.OnTimeEpollSelector)  # type: ignore[attr-defined]
    finally:
        loop.close()
