"""The Celery app (Redis broker): ``celery -A peers.celery_app worker`` and, for cron,
``celery -A peers.celery_app beat -S peers.celery_app:AlignedScheduler``."""

from __future__ import annotations

import math
import os
import time
from typing import Any

from celery import Celery
from celery.beat import Scheduler
from celery.schedules import schedstate, schedule

from lib.records import record

app = Celery("cwbench", broker=os.environ.get("CWBENCH_REDIS_URL", "redis://127.0.0.1:6379/15"))
app.conf.update(
    task_ignore_result=True,  # no result backend: a no-op has nothing to report
    worker_prefetch_multiplier=int(os.environ.get("CWBENCH_CELERY_PREFETCH", "64")),
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    beat_max_loop_interval=1,
)


def _noop(key: str, intended: float | None = None) -> None:
    record(key, intended)


noop = app.task(name="noop")(_noop)  # Celery's decorator is untyped: keep _noop typed


class EverySecond(schedule):  # type: ignore[misc]
    """Due on every whole second of the wall clock, like cron's ``* * * * * *``: Celery's
    own ``schedule(1.0)`` counts from the last run and drifts off the second."""

    def __init__(self) -> None:
        super().__init__(run_every=1.0)

    def is_due(self, last_run_at: Any) -> schedstate:
        now = time.time()
        due = math.floor(last_run_at.timestamp()) < math.floor(now)
        return schedstate(due, math.floor(now) + 1 - now)


class AlignedScheduler(Scheduler):  # type: ignore[misc]
    """beat's in-memory scheduler, telling each task which second it fires for."""

    def apply_async(self, entry: Any, *args: Any, **kwargs: Any) -> Any:
        entry.kwargs = {"key": entry.name, "intended": float(math.floor(time.time()))}
        return super().apply_async(entry, *args, **kwargs)


app.conf.beat_schedule = {
    f"w4-{i:04d}": {"task": "noop", "schedule": EverySecond()}
    for i in range(int(os.environ.get("CWBENCH_CRON_JOBS", "0")))
}
