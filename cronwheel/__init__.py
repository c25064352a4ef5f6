"""cronwheel: a distributed job scheduler — cron, but durable, on time, and spread over
machines that can crash at any moment.

The public surface: :func:`connect` opens a store and returns the :class:`JobService`
that creates and controls jobs; :class:`Worker` executes runs with the handlers you
register; :class:`PermanentError` fails a run without retries; :class:`Client` and
:class:`AsyncClient` drive a cronwheel server over its HTTP API.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cronwheel.actions import PermanentError, RunCancelled, RunContext
    from cronwheel.control.service import JobService, connect
    from cronwheel.engine.notifier import Notifier, NotifierConfig
    from cronwheel.engine.worker import Worker, WorkerConfig
    from cronwheel.errors import Conflict, CronwheelError, InvalidInput, NotFound, StaleVersion
    from cronwheel.sdk import AsyncClient, Client

# Imported on first use (PEP 562): ``import cronwheel`` alone must stay cheap, because
# every process imports it, and a worker has no use for the HTTP client's models.
_WHERE = {
    "PermanentError": "cronwheel.actions",
    "RunCancelled": "cronwheel.actions",
    "RunContext": "cronwheel.actions",
    "Conflict": "cronwheel.errors",
    "CronwheelError": "cronwheel.errors",
    "InvalidInput": "cronwheel.errors",
    "NotFound": "cronwheel.errors",
    "StaleVersion": "cronwheel.errors",
    "AsyncClient": "cronwheel.sdk",
    "Client": "cronwheel.sdk",
    "Notifier": "cronwheel.engine.notifier",
    "NotifierConfig": "cronwheel.engine.notifier",
    "JobService": "cronwheel.control.service",
    "connect": "cronwheel.control.service",
    "Worker": "cronwheel.engine.worker",
    "WorkerConfig": "cronwheel.engine.worker",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'cronwheel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "AsyncClient",
    "Client",
    "Conflict",
    "CronwheelError",
    "InvalidInput",
    "JobService",
    "NotFound",
    "Notifier",
    "NotifierConfig",
    "PermanentError",
    "RunCancelled",
    "RunContext",
    "StaleVersion",
    "Worker",
    "WorkerConfig",
    "connect",
]
