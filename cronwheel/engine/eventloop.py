"""The event loop cronwheel's processes run on: asyncio's, with timers that wake on time.

asyncio's epoll selector rounds each wait up to whole milliseconds (``epoll_wait`` takes
milliseconds) and hands the result to ``select.epoll.poll`` as ``k * 1e-3`` seconds. For
many ``k`` that float is a hair above ``k`` ms (``9 * 1e-3`` is ``0.009000000000000001``),
and ``poll`` rounds it up again, to ``k + 1`` ms. A timer then fires up to 2 ms after its
instant instead of up to 1: on this project's machine a bare asyncio loop firing 2,000
timers 10 ms apart measured p50 1.1 ms and p99 2.1 ms late with the stock selector,
p50 0.6 ms and p99 1.1 ms with this one (``bench/timer_floor.py``). The worker starts a
run when its instant's timer fires, so this is the floor under every run's start lag.

``run`` is what the CLI uses; a library user who embeds a ``Worker`` in their own process
gets the same precision with
``asyncio.Runner(loop_factory=cronwheel.engine.eventloop.new_event_loop)``.
"""

from __future__ import annotations

import asyncio
import math
import select
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_EPSILON_MS = 1e-6
"""How far above a whole millisecond a wait may be and still count as that millisecond:
float noise from the selector's ``k * 1e-3``, far below any timer's meaning."""


def epoll_timeout(seconds: float) -> float:
    """The ``select.epoll.poll`` argument that waits ``seconds`` rounded up to whole
    milliseconds exactly once.

    ``poll`` converts seconds to nanoseconds rounding up, then to milliseconds rounding
    up; half a millisecond below the intended count survives both roundings as that
    count, whatever float noise the seconds carry.
    """
    if seconds <= 0:
        return seconds
    whole_ms = math.ceil(seconds * 1e3 - _EPSILON_MS)
    return (whole_ms - 0.5) * 1e-3


class _OnceRoundedEpoll:
    """A ``select.epoll`` (not subclassable) whose ``poll`` rounds its timeout once."""

    def __init__(self) -> None:
        self._epoll = select.epoll()

    def poll(self, timeout: float | None = None, maxevents: int = -1) -> list[tuple[int, int]]:
        if timeout is not None:
            timeout = epoll_timeout(timeout)
        return self._epoll.poll(timeout, maxevents)

    def __getattr__(self, name: str) -> Any:
        # register, modify, unregister, close, fileno: the selector's other uses.
        return getattr(self._epoll, name)


if hasattr(selectors, "EpollSelector"):

    class OnTimeEpollSelector(selectors.EpollSelector):
        """``selectors.EpollSelector`` whose waits are rounded up to whole milliseconds
        once, not twice."""

        # The hook _PollLikeSelector builds its poller from (CPython 3.11 to 3.13).
        _selector_cls = _OnceRoundedEpoll


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new asyncio event loop; on Linux one whose timers wake on time (module doc)."""
    if hasattr(selectors, "EpollSelector"):
        return asyncio.SelectorEventLoop(OnTimeEpollSelector())
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the loop of ``new_event_loop``."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
