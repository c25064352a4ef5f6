"""cronwheel.engine.eventloop: timers wake after whole milliseconds rounded up once, not twice."""

from __future__ import annotations

import asyncio
import math
import selectors
import socket
import sys
import threading
import time
from typing import Any

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


# -- bounded turns, urgent work first (decision 0037, "Urgent work first") -------------------

priority_loop = pytest.mark.skipif(
    not eventloop._has_turn_hooks(), reason="this interpreter's asyncio lacks the turn hooks"
)


def _on_priority_loop(main: Any) -> Any:
    loop = eventloop.new_event_loop()
    assert isinstance(loop, eventloop.PriorityEventLoop)
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_this_interpreter_gets_the_priority_loop() -> None:
    # Not a skip counted as a pass: CI's Python must have the hooks the loop builds on.
    assert eventloop._has_turn_hooks()
    loop = eventloop.new_event_loop()
    try:
        assert isinstance(loop, eventloop.PriorityEventLoop)
    finally:
        loop.close()


@priority_loop
def test_a_ready_socket_is_read_after_at_most_one_turn_of_waiting_callbacks() -> None:
    """asyncio runs every waiting callback before it polls again: with thousands waiting,
    a socket that is ready waits for all of them. Here it waits for one turn at most."""
    order: list[object] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        left, right = socket.socketpair()
        try:
            right.send(b"x")  # readable before the loop's next poll
            loop.add_reader(left.fileno(), lambda: (order.append("read"), left.recv(1)))
            for i in range(5 * eventloop.TURN_HANDLES):
                loop.call_soon(order.append, i)
            await _until(lambda: len(order) > 5 * eventloop.TURN_HANDLES)
            loop.remove_reader(left.fileno())
        finally:
            left.close()
            right.close()

    _on_priority_loop(main)
    assert order.index("read") <= eventloop.TURN_HANDLES
    # Everything else kept asyncio's order.
    assert [x for x in order if x != "read"] == list(range(5 * eventloop.TURN_HANDLES))


@priority_loop
def test_an_urgent_callback_runs_before_every_waiting_one_and_urgent_ones_keep_their_order() -> (
    None
):
    order: list[object] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for i in range(1000):
            loop.call_soon(order.append, i)
        urgent = eventloop.urgent_context()
        for name in ("a", "b", "c"):  # as a future's callbacks are: clean-up first
            loop.call_soon(order.append, name, context=urgent)
        await _until(lambda: len(order) == 1003)

    _on_priority_loop(main)
    assert order[:3] == ["a", "b", "c"]
    assert order[3:] == list(range(1000))


@priority_loop
def test_an_urgent_task_goes_through_its_awaits_before_the_waiting_callbacks() -> None:
    """A peek's chain of awaits: each would wait behind everything queued on asyncio."""
    ran: list[int] = []
    finished_at: list[int] = []

    async def chain() -> None:
        for _ in range(10):
            await asyncio.sleep(0)
        finished_at.append(len(ran))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for i in range(10 * eventloop.TURN_HANDLES):
            loop.call_soon(ran.append, i)
        await asyncio.create_task(chain(), context=eventloop.urgent_context())
        await _until(lambda: len(ran) == 10 * eventloop.TURN_HANDLES)

    _on_priority_loop(main)
    # On asyncio's loop each of the ten awaits waits for every queued callback.
    assert finished_at == [0]
    assert ran == list(range(10 * eventloop.TURN_HANDLES))


@priority_loop
def test_urgent_work_that_never_ends_does_not_hold_the_rest_back() -> None:
    ran: list[int] = []
    spins = 0

    async def spin() -> None:
        nonlocal spins
        while len(ran) < 10:
            spins += 1
            await asyncio.sleep(0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for i in range(10):
            loop.call_soon(ran.append, i)
        await asyncio.wait_for(asyncio.create_task(spin(), context=eventloop.urgent_context()), 5)

    _on_priority_loop(main)
    assert ran == list(range(10))
    # It had its turns first, a drain's worth, before the others had theirs.
    assert spins >= eventloop.TURN_HANDLES


@priority_loop
def test_callbacks_pushed_out_of_a_turn_by_urgent_ones_keep_their_place() -> None:
    """An urgent callback scheduled during a turn runs within it, and one of the turn's
    callbacks is left for the next: it must still run before the backlog behind it."""
    order: list[int] = []
    urgent = eventloop.urgent_context()

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def step(i: int) -> None:
            order.append(i)
            if i % 7 == 0:
                loop.call_soon(lambda: None, context=urgent)

        for i in range(4 * eventloop.TURN_HANDLES):
            loop.call_soon(step, i)
        await _until(lambda: len(order) == 4 * eventloop.TURN_HANDLES)

    _on_priority_loop(main)
    assert order == list(range(4 * eventloop.TURN_HANDLES))


@priority_loop
def test_a_socket_opened_in_an_urgent_context_is_read_first() -> None:
    """The worker opens the LISTEN and peek connections in an urgent context: their
    sockets' callbacks, and what those schedule, go first."""
    order: list[object] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        left, right = socket.socketpair()
        try:
            right.send(b"x")
            urgent = eventloop.urgent_context()
            urgent.run(loop.add_reader, left.fileno(), lambda: (order.append("read"), left.recv(1)))
            for i in range(1000):
                loop.call_soon(order.append, i)
            await _until(lambda: len(order) == 1001)
            loop.remove_reader(left.fileno())
        finally:
            left.close()
            right.close()

    _on_priority_loop(main)
    assert order[0] == "read"


async def _until(done: Any) -> None:
    """Until ``done()``, asked again each time the callbacks queued before it have run."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()

    def check() -> None:
        if done():
            finished.set_result(None)
        else:
            loop.call_soon(check)

    loop.call_soon(check)
    await asyncio.wait_for(finished, 30)


@priority_loop
def test_no_callback_from_another_thread_is_lost_while_turns_are_cut() -> None:
    """Sync handlers' results and the SQLite store's answers come back through
    ``call_soon_threadsafe`` while the loop moves waiting callbacks between its queues: a
    callback appended between two of those moves must not be dropped."""
    sent, threads = 100_000, 3
    ran = 0

    def hit() -> None:
        nonlocal ran
        ran += 1

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def pump() -> None:
            for _ in range(sent):
                loop.call_soon_threadsafe(hit)

        pumps = [threading.Thread(target=pump) for _ in range(threads)]
        for t in pumps:
            t.start()
        while any(t.is_alive() for t in pumps):
            for _ in range(2 * eventloop.TURN_HANDLES):  # turns are cut all along
                loop.call_soon(lambda: None)
            await asyncio.sleep(0)
        for t in pumps:
            t.join()
        await _until(lambda: ran >= sent * threads)

    # Threads take turns every microsecond or so: a race between two of the loop's
    # statements shows up within one run instead of one in many.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        _on_priority_loop(main)
    finally:
        sys.setswitchinterval(interval)
    assert ran == sent * threads
