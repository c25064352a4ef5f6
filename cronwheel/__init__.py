"""cronwheel: a distributed job scheduler — cron, but durable, on time, and spread over
machines that can crash at any moment.

The public surface: :func:`connect` opens a store and returns the :class:`JobService`
that creates and controls jobs; :class:`Worker` executes runs with the handlers you
register; :class:`PermanentError` fails a run without retries; :class:`Client` and
:class:`AsyncClient` drive a cronwheel server over its HTTP API.
"""

from __future__ import annotations

from cronwheel.actions import PermanentError, RunCancelled, RunContext
from cronwheel.errors import Conflict, CronwheelError, InvalidInput, NotFound, StaleVersion
from cronwheel.sdk import AsyncClient, Client
from cronwheel.service import JobService, connect
from cronwheel.worker import Worker, WorkerConfig

__all__ = [
    "AsyncClient",
    "Client",
    "Conflict",
    "CronwheelError",
    "InvalidInput",
    "JobService",
    "NotFound",
    "PermanentError",
    "RunCancelled",
    "RunContext",
    "StaleVersion",
    "Worker",
    "WorkerConfig",
    "connect",
]
