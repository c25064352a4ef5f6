"""The pgqueuer worker: ``pgq run peers.pgqueuer_app:create``. With CWBENCH_CRON_JOBS=N,
N schedules firing every second (croniter's 6th field is seconds)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job, Schedule

from lib.records import record


@asynccontextmanager
async def create() -> AsyncIterator[PgQueuer]:
    conn = await asyncpg.connect(os.environ["PGDSN"])
    try:
        yield _queuer(conn)
    finally:
        await conn.close()


def _queuer(conn: asyncpg.Connection) -> PgQueuer:
    pgq = PgQueuer(AsyncpgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        record((job.payload or b"").decode())

    for i in range(int(os.environ.get("CWBENCH_CRON_JOBS", "0"))):
        name = f"w4-{i:04d}"

        async def tick(schedule: Schedule, name: str = name) -> None:
            # The row arrives with next_run already advanced by one period: the
            # occurrence being fired is the one before it.
            record(name, schedule.next_run.timestamp() - 1)

        pgq.schedule(name, "* * * * * *")(tick)
    return pgq


if __name__ == "__main__":
    # pgqueuer.run is what `pgq run` does minus its CLI, whose --log-level parsing breaks
    # with the typer release pip resolves today (AttributeError: 'str' object has no
    # attribute 'name'). Same loop (uvloop, as the CLI picks when installed).
    import argparse

    import pgqueuer
    import uvloop

    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=10)
    a = p.parse_args()
    uvloop.run(pgqueuer.run("peers.pgqueuer_app:create", batch_size=a.batch_size))
