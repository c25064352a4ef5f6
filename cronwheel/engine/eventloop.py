"""The event loop cronwheel's processes run on: asyncio's, with timers that wake on time.

asyncio's epoll selector rounds each wait up to whole milliseconds (``epoll_wait`` takes
milliseconds) and hands the result to ``select.epoll.poll`` as ``k * 1e-3`` seconds. For
many ``k`` that float is a hair above ``k`` ms (``9 * 1e-3`` is ``0.009000000000000001``),
and ``poll`` rounds it up again, to ``k + 1`` ms. A timer then fires up to 2 ms after its
instant instead of up to 1: on this project's machine a bare asyncio loop firing 2,000
timers 10 ms apart measured p50 1.1 ms and p99 2.1 ms late with the stock selector,
p50 0.6 ms and p99 1.1 ms with this one (``bench/timer_floor.py``). The worker starts a
run when its instant's timer fires, so this is the floor under every run's start lag.

The loop also keeps a saturated process responsive (decision 0037, "Urgent work first"). A
worker that begins a claim of thousands of runs queues thousands of task steps at once, and
asyncio runs every ready callback before it looks at its sockets again: a turn of the loop
then lasts tens of milliseconds, and a run of another tenant, which needs a notification
read, a claim's answer read and its task begun, waits for several such turns. This loop
runs at most :data:`TURN_HANDLES` of the waiting callbacks a turn, in their order, and
polls its sockets and timers between; and a callback scheduled in a context where
:data:`URGENT` is true runs before every other waiting one. The worker marks its peeks
(the claims of runs just enqueued) urgent, and the start of a tenant's only run: they no
longer queue behind the work in flight. A burst (one tenant's, or cron runs due at one
instant) is not urgent: it would be begun a turn's worth at a time with the loop's other
work between, later than in its turn.

``run`` is what the CLI uses; a library user who embeds a ``Worker`` in their own process
gets the same precision and priorities with
``asyncio.Runner(loop_factory=cronwheel.engine.eventloop.new_event_loop)``; on another
loop :data:`URGENT` changes nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import select
import selectors
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, TypeVarTuple

T = TypeVar("T")
_Ts = TypeVarTuple("_Ts")

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


URGENT: contextvars.ContextVar[bool] = contextvars.ContextVar("cronwheel_urgent", default=False)
"""True in a context whose callbacks go before every other waiting one, on this module's
loop. Set it only for short, bounded work whose wait a person sees (a peek, a run's start):
urgent callbacks are not counted against a turn, so work that stays urgent could hold the
rest back."""

TURN_HANDLES = 128
"""The most waiting callbacks one turn of the loop runs before it polls its sockets and
timers again. A saturated worker's callbacks cost 10 to 30 µs each (a run's task step, a
completion's share), so a turn lasts a few milliseconds, against a poll of a few
microseconds: a cost per callback well under 1 %. The worker's CPU per run and W1's rate
measured the same as on asyncio's loop (bench/README.md, "W6 with urgent work first")."""


def urgent_context() -> contextvars.Context:
    """A copy of the current context with :data:`URGENT` set, for ``create_task(...,
    context=...)``: the task's steps, and the callbacks of everything it awaits, go first."""
    context = contextvars.copy_context()
    context.run(URGENT.set, True)
    return context


def plain_context() -> contextvars.Context:
    """A copy of the current context with :data:`URGENT` cleared: for work an urgent task
    sets going that is not itself urgent (a task, a timer), which would otherwise inherit
    the urgency with the rest of the context."""
    context = contextvars.copy_context()
    context.run(URGENT.set, False)
    return context


def _has_turn_hooks() -> bool:
    # The private members PriorityEventLoop builds on (CPython 3.11 to 3.13): without
    # them new_event_loop gives the plain loop, which behaves as asyncio's.
    return all(
        hasattr(asyncio.BaseEventLoop, name) for name in ("_run_once", "_add_callback")
    ) and hasattr(asyncio.Handle, "_context")


class PriorityEventLoop(asyncio.SelectorEventLoop):
    """asyncio's selector loop with bounded turns and urgent callbacks first (module doc).

    asyncio's loop keeps its waiting callbacks in ``_ready`` and runs all of them in a
    turn (``_run_once``). This one keeps the overflow in ``_backlog`` and hands the turn at
    most :data:`TURN_HANDLES` of them, in order; callbacks scheduled during a turn join
    the backlog's end, so the order among callbacks that are not urgent is asyncio's.

    Urgent callbacks wait in ``_urgent``, in their order (a future's callbacks are
    scheduled together and must run in the order they were added: a socket's clean-up
    before the task that goes on using it), and one callback at the front of ``_ready``
    runs them, and those they schedule in turn, until none is left or a turn's worth
    has run (then it goes to the back, so that urgent work cannot hold the rest back)."""

    def __init__(self, selector: selectors.BaseSelector | None = None) -> None:
        super().__init__(selector)
        self._backlog: deque[asyncio.Handle] = deque()
        self._urgent: deque[asyncio.Handle] = deque()
        self._drain = asyncio.Handle(self._drain_urgent, (), self, contextvars.Context())
        self._drain_queued = False
        # Callbacks put at the front of _ready during the last turn: as many of the
        # turn's callbacks were left over, and they (or the drain) lead the next turn.
        self._jumped = 0

    def call_soon(
        self,
        callback: Callable[[*_Ts], object],
        *args: *_Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        if self._closed:  # type: ignore[attr-defined]
            raise RuntimeError("Event loop is closed")
        if self._debug:  # type: ignore[attr-defined]
            self._check_thread()  # type: ignore[attr-defined]
            self._check_callback(callback, "call_soon")  # type: ignore[attr-defined]
        handle = asyncio.Handle(callback, args, self, context)
        if handle._context.get(URGENT):  # type: ignore[attr-defined]
            self._urgent.append(handle)
            if not self._drain_queued:
                self._drain_queued = True
                self._ready.appendleft(self._drain)  # type: ignore[attr-defined]
                self._jumped += 1
        else:
            self._ready.append(handle)  # type: ignore[attr-defined]
        return handle

    def _add_callback(self, handle: asyncio.Handle) -> None:
        # A socket that is ready, before the turn counts its callbacks: an urgent one's
        # callback is drained first in the turn that is starting.
        if not handle._cancelled:
            if handle._context.get(URGENT):  # type: ignore[attr-defined]
                self._urgent.append(handle)
                if not self._drain_queued:
                    self._drain_queued = True
                    self._ready.appendleft(self._drain)  # type: ignore[attr-defined]
            else:
                self._ready.append(handle)  # type: ignore[attr-defined]

    def _drain_urgent(self) -> None:
        urgent = self._urgent
        try:
            for _ in range(TURN_HANDLES):
                if not urgent:
                    return
                handle = urgent.popleft()
                if not handle._cancelled:
                    handle._run()
        finally:
            if urgent:
                self._ready.append(self._drain)  # type: ignore[attr-defined]
            else:
                self._drain_queued = False

    def _run_once(self) -> None:
        ready: deque[asyncio.Handle] = self._ready  # type: ignore[attr-defined]
        backlog = self._backlog
        jumped, self._jumped = self._jumped, 0
        if backlog or len(ready) > TURN_HANDLES:
            if jumped:  # the last turn's leftovers are older than the backlog
                backlog.extendleft(
                    reversed([ready.popleft() for _ in range(min(jumped, len(ready)))])
                )
            # One at a time, not extend-then-clear: another thread's call_soon_threadsafe
            # may append between the two, and that callback would be lost.
            take, park = ready.popleft, backlog.append
            for _ in range(len(ready)):
                park(take())
            popleft, append = backlog.popleft, ready.append
            for _ in range(min(TURN_HANDLES, len(backlog))):
                append(popleft())
        super()._run_once()  # type: ignore[misc]

    def close(self) -> None:
        super().close()
        self._backlog.clear()
        self._urgent.clear()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new asyncio event loop; on Linux one whose timers wake on time and whose turns
    are bounded, urgent work first (module doc)."""
    selector = OnTimeEpollSelector() if hasattr(selectors, "EpollSelector") else None
    if _has_turn_hooks():
        return PriorityEventLoop(selector)
    if selector is not None:
        return asyncio.SelectorEventLoop(selector)
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the loop of ``new_event_loop``."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
