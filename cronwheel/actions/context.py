"""What a handler receives: the run's identity, its payload, and a line back to the worker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronwheel.core.model import (
    DEFAULT_TENANT,
    JSON,
    checkpoint_text,
    idempotency_key,
    progress_report,
)
from cronwheel.errors import CronwheelError


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
    """A thread-safe "stop now" flag: ``await ctx.cancelled`` in an async handler (it
    resolves once the flag is set), and ``threading.Event``'s reading side (``is_set``,
    ``wait``) for sync handlers, which run in threads. Most runs are never cancelled, so
    the lock and condition an Event carries, and the futures of awaiting handlers, are
    only made when a handler actually waits on the flag: on a busy worker an Event per
    run was a sixth of the cost of a run."""

    __slots__ = ("_event", "_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """Set the flag and wake every waiter. Safe from any thread: an awaiting handler's
        future is resolved on its own event loop."""
        self._set = True
        event = self._event
        if event is not None:
            event.set()
        waiters, self._waiters = self._waiters, None
        for future in waiters or ():
            loop = future.get_loop()
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, future)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is set (or ``timeout`` passes); True if it is set. For
        sync handlers: an async handler awaits the flag instead."""
        if self._set:
            return True
        if self._event is None:
            self._event = threading.Event()
        if self._set:  # set() ran before the event existed: it could not wake us
            self._event.set()
        return self._event.wait(timeout)

    def __await__(self) -> Generator[Any, None, None]:
        """``await ctx.cancelled``: returns once the flag is set (at once if it is)."""
        if self._set:
            return
        future = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(future)
        if self._set:  # set() ran while we registered: it may have missed this future
            _resolve(future)
        yield from future.__await__()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


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
    checks it (``ctx.cancelled.is_set()``, thread-safe: sync handlers run in threads), or
    awaits it (``await ctx.cancelled``, in an async handler). A handler that returns or
    raises :class:`RunCancelled` once its run was cancelled records ``cancelled``."""
    progress_value: float | None = None
    """The last progress this attempt reported (:meth:`progress`)."""
    progress_message: str | None = None
    trace: Mapping[str, str] = NO_TRACE
    """The attempt span's W3C trace context headers (``traceparent``, and ``tracestate``
    when it has one), empty while tracing is off: continue our trace with
    ``opentelemetry.propagate.extract(ctx.trace)``, or send them on your own requests.
    See docs/observability.md#traces."""
    tenant_id: str = DEFAULT_TENANT
    """The run's tenant: whose key signs its webhook."""
    checkpoint_state: JSON = None
    """The run's last checkpoint: what an earlier attempt (or this one) gave
    :meth:`checkpoint`, None if none did. A handler resumes from it."""
    inputs: Mapping[str, JSON] | None = None
    """A pipeline task's upstream results by task name (a fanned-out task's as a list in
    instance order; an upstream task that failed, for an ``on_failure`` edge: None).
    None when the run is not a pipeline task. See docs/workflows.md#pipelines."""
    pipeline_run_id: str | None = None
    """The pipeline run this run is a task of; None: not a task."""
    task: str | None = None
    """This task's name in its pipeline."""
    _progress_unsent: bool = field(default=False, init=False, repr=False)
    _checkpoint_unsent: bool = field(default=False, init=False, repr=False)
    _checkpoint_text: str | None = field(default=None, init=False, repr=False)

    @property
    def idempotency_key(self) -> str:
        """``<job id>:<scheduled_for>``: the same for every attempt and replay of a run.
        Computed when asked: most handlers never do, and a worker starts thousands of
        runs a second."""
        return idempotency_key(self.job_id, self.scheduled_for)

    def heartbeat(self) -> None:
        """A cancellation point: raises :class:`RunCancelled` if the handler should stop.
        Leases are renewed by the worker on its own; this call needs no round trip."""
        if self.cancelled.is_set():
            raise RunCancelled(f"run {self.run_id} was cancelled or lost its lease")

    def progress(self, value: float, message: str | None = None) -> None:
        """Report progress: ``value`` from 0.0 to 1.0 and a short note (cut to
        :data:`~cronwheel.core.model.MAX_PROGRESS_MESSAGE` characters). Stored with the run by
        the worker's next heartbeat (or the completion, if that comes first) and shown
        by the API, the CLI and the dashboard; no round trip here. A value outside
        [0, 1] raises :class:`~cronwheel.errors.InvalidInput`. Then, like
        :meth:`heartbeat`, raises :class:`RunCancelled` if the handler should stop."""
        self.progress_value, self.progress_message = progress_report(value, message)
        self._progress_unsent = True
        self.heartbeat()

    def checkpoint(self, state: JSON) -> None:
        """Save where this run is, so that its next attempt (after a crash, a lost lease,
        a failure or a replay) starts from it as :attr:`checkpoint_state`. ``state`` must
        be JSON and at most :data:`~cronwheel.core.model.MAX_CHECKPOINT_BYTES` once encoded,
        else :class:`~cronwheel.errors.InvalidInput` is raised here (uncaught, it fails
        the attempt as any error does). Stored with the worker's next heartbeat, or the
        completion if that comes first, under the run's fence: a worker that lost the
        run cannot overwrite the new owner's checkpoint. Then, like :meth:`heartbeat`,
        raises :class:`RunCancelled` if the handler should stop."""
        text = checkpoint_text(state)
        # A copy, as the next attempt will see it: the caller may go on mutating state.
        self.checkpoint_state = json.loads(text)
        self._checkpoint_text = text
        self._checkpoint_unsent = True
        self.heartbeat()

    # -- the worker's side -------------------------------------------------------------
    @property
    def has_unsent_report(self) -> bool:
        """A progress or checkpoint the worker has not sent to the store yet."""
        return self._progress_unsent or self._checkpoint_unsent

    def take_report(self) -> tuple[float | None, str | None, str | None]:
        """For the worker: ``(progress, message, checkpoint JSON text)`` reported since
        the last call (None where nothing new), marking them sent. Safe against a handler
        thread reporting meanwhile: each flag is cleared before its value is read, so a
        report made in between is sent again next time, never lost."""
        progress = message = checkpoint = None
        if self._progress_unsent:
            self._progress_unsent = False
            progress, message = self.progress_value, self.progress_message
        if self._checkpoint_unsent:
            self._checkpoint_unsent = False
            checkpoint = self._checkpoint_text
        return progress, message, checkpoint

    def return_report(self, progress: float | None, checkpoint: str | None) -> None:
        """For the worker: a report it took was not stored (the write failed): send it
        again (with the newest values) next time."""
        if progress is not None:
            self._progress_unsent = True
        if checkpoint is not None:
            self._checkpoint_unsent = True

    def last_report(self) -> tuple[float | None, str | None, str | None]:
        """For the worker's completion: this attempt's last progress, message and
        checkpoint text, whether sent or not (None where it made none)."""
        return self.progress_value, self.progress_message, self._checkpoint_text


def run_envelope(ctx: RunContext) -> bytes:
    """The run as JSON, what a webhook without a ``body`` sends and a command reads on
    stdin: its identity, its payload and, for a pipeline task, its place and inputs."""
    envelope = {
        "run_id": ctx.run_id,
        "job_id": ctx.job_id,
        "job_name": ctx.job_name,
        "scheduled_for": ctx.scheduled_for.isoformat(),
        "attempt": ctx.attempt,
        "payload": ctx.payload,
    }
    if ctx.pipeline_run_id is not None:  # a pipeline task: its place and its inputs
        envelope.update(pipeline_run_id=ctx.pipeline_run_id, task=ctx.task, inputs=ctx.inputs)
    return json.dumps(envelope).encode()
