"""The handler every cronwheel benchmark process loads (``--app cw.app:worker``)."""

from __future__ import annotations

from cronwheel import RunContext, Worker

from lib.records import record


async def noop(ctx: RunContext) -> None:
    # The key the driver planned: a run enqueued to the queue job carries it as its
    # payload, a one-time or cron job is named after it. scheduled_for is the occurrence a
    # cron execution belongs to (the intended instant of W4).
    key = ctx.payload if isinstance(ctx.payload, str) else ctx.job_name
    record(key, ctx.scheduled_for.timestamp())


worker = Worker()
worker.handlers.register("noop", noop)  # what @worker.handler("noop") does, typed
