"""What a handler receives: the run's identity, its payload, and a line back to the worker."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from cronwheel.errors import CronwheelError
from cronwheel.model import DEFAULT_TENANT, JSON, idempotency_key


class _NoTrace(Mapping[str, str]):
    """An empty, read-only mapping, hashable so that a dataclass may default to it: every
    run shares one while tracing is off, and no run pays for a dict of its own."""

    __slots__ = ()

    def __getitem__(self, key: str) -> str:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"


NO_TRACE: Mapping[str, str] = _NoTrace()
"""``ctx.trace`` while tracing is off."""


class RunCancelled(CronwheelError):
    """Raised by :meth:`RunContext.heartbeat` when the run was cancelled or its lease lost:
    the handler should stop; nothing it does now can change the run."""


class CancelFlag:
    """A thread-safe "stop now" flag with ``threading.Event``'s reading side (``is_set``,
    ``wait``). Most runs are never cancelled, so the lock and condition an Event carries
    are only made when a handler actually waits on the flag: on a busy worker they were
    a sixth of the cost of a run."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is set (or ``timeout`` passes); True if it is set."""
        if self._set:
            return True
        if self._event is None:
            self._event = threading.Event()
        if self._set:  # set() ran before the event existed: it could not wake us
            self._event.set()
        return self._event.wait(timeout)


@dataclass(slots=True)
class RunContext:
    """Handed to every handler. ``idempotency_key`` is stable across retries and replays:
    use it to make side effects safe to repeat."""

    run_id: int
    job_id: str
    job_name: str
    scheduled_for: datetime
    attempt: int
    fence: int
    payload: JSON
    cancelled: CancelFlag = field(default_factory=CancelFlag)
    """Set when the run is cancelled, times out or loses its lease: a handler that loops
    checks it (sync handlers run in threads, so it is a thread-safe event)."""
    progress_value: float | None = None
    progress_message: str | None = None
    trace: Mapping[str, str] = NO_TRACE
    """The attempt span's W3C trace context headers (``traceparent``, and ``tracestate``
    when it has one), empty while tracing is off: continue our trace with
    ``opentelemetry.propagate.extract(ctx.trace)``, or send them on your own requests.
    See docs/observability.md#traces."""
    tenant_id: str = DEFAULT_TENANT
    """The run's tenant: whose key signs its webhook."""

    @property
    def idempotency_key(self) -> str:
        """``<job id>:<scheduled_for>``: the same for every attempt and replay of a run.
        Computed when asked: most handlers never do, and a worker starts thousands of
        runs a second."""
        return idempotency_key(self.job_id, self.scheduled_for)

    def heartbeat(self) -> None:
        """A checkpoint: raises :class:`RunCancelled` if the handler should stop. Leases are
        renewed by the worker on its own; this call needs no round trip."""
        if self.cancelled.is_set():
            raise RunCancelled(f"run {self.run_id} was cancelled or lost its lease")

    def progress(self, value: float, message: str | None = None) -> None:
        """Report progress (0.0 to 1.0, and a note); shown with the worker's in-flight runs."""
        self.progress_value = value
        self.progress_message = message
        self.heartbeat()
