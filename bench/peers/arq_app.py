"""The arq worker: ``arq peers.arq_app.WorkerSettings``. With CWBENCH_CRON_JOBS=N, N cron
jobs every second."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from arq import cron
from arq.connections import RedisSettings

from lib.records import record


async def noop(ctx: dict[str, Any], key: str) -> None:
    record(key)


def _cron(name: str) -> Any:
    async def tick(ctx: dict[str, Any]) -> None:
        # A unique cron job's id is "<name>:<scheduled unix ms>": the occurrence it is.
        record(name, int(ctx["job_id"].rsplit(":", 1)[1]) / 1000)

    # microsecond=0: fire on the second itself (arq's default offset is 0.123456 s).
    return cron(tick, name=name, second=set(range(60)), microsecond=0)


class WorkerSettings:
    functions: ClassVar[list[Any]] = [noop]
    cron_jobs: ClassVar[list[Any]] = [
        _cron(f"w4-{i:04d}") for i in range(int(os.environ.get("CWBENCH_CRON_JOBS", "0")))
    ]
    redis_settings = RedisSettings.from_dsn(
        os.environ.get("CWBENCH_REDIS_URL", "redis://127.0.0.1:6379/15")
    )
    max_jobs = int(os.environ.get("CWBENCH_ARQ_MAX_JOBS", "100"))
    poll_delay = float(os.environ.get("CWBENCH_ARQ_POLL", "0.05"))
    keep_result = 0  # nothing reads results: do not write them
