"""The public surface is deliberate: __all__ is exact and sorted, and everything in it exists."""

from __future__ import annotations

import cronwheel


def test_all_is_sorted_exact_and_importable() -> None:
    assert cronwheel.__all__ == sorted(cronwheel.__all__)
    assert all(hasattr(cronwheel, name) for name in cronwheel.__all__)
    assert set(cronwheel.__all__) == {
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
    }
