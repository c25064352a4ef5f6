"""Python handlers: functions registered by name in a pool, sync or async."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cronwheel.actions.context import RunContext
from cronwheel.errors import CronwheelError

Handler = Callable[[RunContext], Any]


class PermanentError(CronwheelError):
    """Raise it from a handler to fail the run without retrying it: it goes to the
    dead-letter queue at once."""


@dataclass(frozen=True, slots=True)
class RegisteredHandler:
    name: str
    pool: str
    fn: Handler
    is_async: bool


class HandlerRegistry:
    """Handlers by name. A worker executes a handler job only if it has its name."""

    def __init__(self) -> None:
        self._handlers: dict[str, RegisteredHandler] = {}
        self.notification_hooks: list[tuple[tuple[str, ...], Callable[..., Any]]] = []
        """In-process notification hooks (events, function), which the notifier of a
        process serving this registry calls (``Worker.on_notification``)."""

    def register(self, name: str, fn: Handler, *, pool: str = "default") -> RegisteredHandler:
        if name in self._handlers:
            raise ValueError(f"handler {name!r} is already registered")
        handler = RegisteredHandler(name, pool, fn, inspect.iscoroutinefunction(fn))
        self._handlers[name] = handler
        return handler

    def include(self, other: HandlerRegistry) -> None:
        """Add every handler of ``other`` (names must not clash)."""
        for h in other._handlers.values():
            self.register(h.name, h.fn, pool=h.pool)
        self.notification_hooks += other.notification_hooks

    def get(self, name: str) -> RegisteredHandler | None:
        return self._handlers.get(name)

    @property
    def pools(self) -> set[str]:
        return {h.pool for h in self._handlers.values()}

    def handlers(self) -> list[RegisteredHandler]:
        """Every registered handler."""
        return list(self._handlers.values())

    def __contains__(self, name: object) -> bool:
        return name in self._handlers


async def call_handler(
    handler: RegisteredHandler, ctx: RunContext, threads: ThreadPoolExecutor
) -> Any:
    """Run a handler: async ones on the loop, sync ones in the worker's thread pool, in
    a copy of the run's context (run_in_executor gives none): what the handler logs
    carries the run's ids."""
    if handler.is_async:
        return await handler.fn(ctx)
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(threads, context.run, handler.fn, ctx)
