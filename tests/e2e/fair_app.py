"""Handlers for the fairness tests with real processes (``--app
tests.e2e.fair_app:worker``): each start is a line ``tenant key unix-time`` appended to
``starts.log`` in $CRONWHEEL_TEST_MARKS. O_APPEND writes of a short line are atomic and
in the order they were made, so the file is the order the runs started in."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from cronwheel import RunContext, Worker

worker = Worker()
MARKS = Path(os.environ.get("CRONWHEEL_TEST_MARKS", "/tmp/cronwheel-marks"))
_fd: int | None = None


def _started(ctx: RunContext) -> None:
    global _fd
    if _fd is None:
        MARKS.mkdir(parents=True, exist_ok=True)
        _fd = os.open(MARKS / "starts.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_fd, f"{ctx.tenant_id} {ctx.payload} {time.time()}\n".encode())


@worker.handler("backlog")
async def backlog(ctx: RunContext) -> None:
    """A run of the big tenant: a little work, so that its backlog takes seconds."""
    _started(ctx)
    await asyncio.sleep(0.002)


@worker.handler("steady")
async def steady(ctx: RunContext) -> None:
    _started(ctx)
