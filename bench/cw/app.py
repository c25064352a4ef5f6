"""The handler every cronwheel benchmark process loads (``--app cw.app:worker``)."""

from __future__ import annotations

from cronwheel import RunContext, Worker

from lib.records import record


async def noop(ctx: RunContext) -> None:
    # The job name is the key the driver planned; scheduled_for is the occurrence a cron
    # execution belongs to (the intended instant of W4).
    record(ctx.job_name, ctx.scheduled_for.timestamp())


worker = Worker()
worker.handlers.register("noop", noop)  # what @worker.handler("noop") does, typed
