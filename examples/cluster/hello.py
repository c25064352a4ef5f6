"""The example cluster's handlers: ``cronwheel worker --app hello:worker`` (with this
folder on ``PYTHONPATH``). Create a job that runs it, from the repository root:

    . examples/cluster/env.sh
    cronwheel jobs create --name hello --cron "*/5 * * * * *" --handler hello \\
        --payload '{"who": "world"}'
"""

from __future__ import annotations

import os

from cronwheel import RunContext, Worker

worker = Worker()


@worker.handler("hello")
async def hello(ctx: RunContext) -> None:
    """Says which worker process ran which occurrence: watch them share the work, and
    take over when you kill one."""
    who = ctx.payload.get("who", "world") if isinstance(ctx.payload, dict) else "world"
    print(
        f"hello, {who}: run {ctx.run_id} due {ctx.scheduled_for:%H:%M:%S}, attempt"
        f" {ctx.attempt}, in worker pid {os.getpid()} (key {ctx.idempotency_key})",
        flush=True,
    )
