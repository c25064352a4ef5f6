"""The procrastinate app: ``procrastinate --app peers.procrastinate_app.app worker``.
With CWBENCH_CRON_JOBS=N, N periodic tasks every second (croniter's 6th field)."""

from __future__ import annotations

import os
from typing import Any

from procrastinate import App, PsycopgConnector

from lib.records import record

app = App(connector=PsycopgConnector(conninfo=os.environ.get("CWBENCH_PG_DSN", "")))


@app.task(name="noop")
async def noop(key: str) -> None:
    record(key)


def _periodic(name: str) -> Any:
    async def tick(timestamp: int) -> None:
        # procrastinate hands a periodic task the instant of the occurrence it defers.
        record(name, float(timestamp))

    return app.periodic(cron="* * * * * *", periodic_id=name)(app.task(name=name)(tick))


for _i in range(int(os.environ.get("CWBENCH_CRON_JOBS", "0"))):
    _periodic(f"w4-{_i:04d}")
