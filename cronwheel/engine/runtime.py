"""Running services in one process until a signal: what ``cronwheel dev``, ``worker`` and
``scheduler`` share.

SIGTERM and SIGINT start a graceful stop (workers drain within their grace period); a
second signal is not needed and SIGKILL loses nothing (I4): an unfinished run is rescued
when its lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

from cronwheel.actions.handler import HandlerRegistry

log = logging.getLogger("cronwheel")


class Service(Protocol):
    async def run(self, stop: asyncio.Event) -> None: ...


async def serve(
    services: Sequence[Service],
    *,
    stop: asyncio.Event | None = None,
    extra: Sequence[Callable[[asyncio.Event], Coroutine[Any, Any, None]]] = (),
) -> None:
    """Run every service until ``stop`` is set or the process gets SIGTERM/SIGINT."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks = [asyncio.create_task(s.run(stop)) for s in services]
    tasks += [asyncio.create_task(fn(stop)) for fn in extra]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            if task.exception() is not None:
                stop.set()
                raise task.exception()  # type: ignore[misc]
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


THREAD_SETTLE_SECONDS = 1.0
"""How long a stopped service process waits for its threads to end on their own (an idle
handler thread sees the executor's shutdown at once) before it exits without them."""


def exit_past_lingering_threads(settle: float = THREAD_SETTLE_SECONDS) -> None:
    """End a service process whose services have stopped, even if threads still run.

    A sync handler that ignores its cancellation keeps running in its thread after the
    worker's grace period, and Python joins every executor thread at exit: the process
    would then live as long as the handler, past any grace period (a worker with a 5 s
    grace took 37 s to stop after SIGTERM). Its run was released already (or its lease
    will expire), so nothing of it is worth waiting for: this exits at once, as SIGKILL
    would, once the logs are flushed. Returns when no such thread is left."""
    deadline = time.monotonic() + settle
    main = threading.main_thread()
    lingering = []
    for thread in threading.enumerate():
        if thread is main or thread.daemon:
            continue
        thread.join(max(deadline - time.monotonic(), 0.0))
        if thread.is_alive():
            lingering.append(thread.name)
    if not lingering:
        return
    log.warning(
        "%d threads still running after the services stopped (%s): a handler that"
        " ignores cancellation; exiting without them (their runs were released)",
        len(lingering),
        ", ".join(sorted(lingering)[:5]),
    )
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


GC_GEN0_THRESHOLD = 50_000
"""Allocations between two young-generation collections in a service process (CPython's
default is 700)."""
SWITCH_INTERVAL = 0.001
"""Seconds a thread may hold the GIL while another waits for it (CPython's default: 5 ms)."""


def tune_process() -> None:
    """Settings for a long-running service process (the CLI's service commands), not for
    a library user's process, whose interpreter is theirs to set.

    - The collector runs less often and never scans what start-up built. A worker
      allocates a few dozen objects per run; at CPython's default threshold a young
      collection ran every few runs and cost 15 % of the worker's CPU (measured: 92
      against 77 µs of CPU per run, 20,000 runs on PostgreSQL). Cycles are still
      collected, in larger and rarer batches.
    - A thread gives the GIL up after 1 ms instead of 5: the SQLite store's thread and
      sync handlers' threads run Python too, and the event loop that fires runs on time
      must not wait 5 ms for its turn.
    """
    # No full collection first: it cost 19 ms on the way to a worker's first claim, and
    # the little start-up garbage it would free stays frozen instead.
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, older, oldest)
    sys.setswitchinterval(SWITCH_INTERVAL)


def load_handlers(target: str) -> HandlerRegistry:
    """``module:attr`` → the handler registry it names: a Worker, a HandlerRegistry, or
    anything with a ``handlers`` registry."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError(f"app: {target!r} is not module:attribute (e.g. myapp.jobs:worker)")
    # The `cronwheel` script's sys.path holds its own folder, not the one it runs in: put
    # that first, as `python -m`, uvicorn and celery do, so an `app.py` beside the user
    # imports without PYTHONPATH (docs/guide.md, "Handlers").
    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"app: cannot import {module_name!r}: {exc}") from exc
    obj: Any = getattr(module, attr, None)
    if obj is None:
        raise ValueError(f"app: module {module_name!r} has no attribute {attr!r}")
    registry = obj if isinstance(obj, HandlerRegistry) else getattr(obj, "handlers", None)
    if not isinstance(registry, HandlerRegistry):
        raise ValueError(f"app: {target!r} is neither a Worker nor a HandlerRegistry")
    return registry
