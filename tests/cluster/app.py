"""Handlers for the cluster tests: ``cronwheel worker --app tests.cluster.app:worker``.

Every execution is recorded the moment its handler starts, as one line appended to a
file of the worker process's own (``<pid>.log`` under ``CRONWHEEL_TEST_EXECUTIONS``):
``run_id attempt pid start_ns``. One ``write`` to a file opened ``O_APPEND`` is in the
kernel once it returns, so a SIGKILL an instant later loses nothing, and a SIGSTOP
cannot hold it back; counting lines is counting executions, duplicates included.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from cronwheel import RunContext, Worker

worker = Worker()
FOLDER = Path(os.environ.get("CRONWHEEL_TEST_EXECUTIONS", "/tmp/cronwheel-executions"))
_fd: int | None = None


def record(ctx: RunContext) -> None:
    """Append this execution's line, in one write (see the module docstring)."""
    global _fd
    if _fd is None:
        FOLDER.mkdir(parents=True, exist_ok=True)
        path = FOLDER / f"{os.getpid()}.log"
        _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    line = f"{ctx.run_id} {ctx.attempt} {os.getpid()} {time.time_ns()}\n"
    os.write(_fd, line.encode())


@worker.handler("noop")
async def noop(ctx: RunContext) -> None:
    """Records itself and returns; ``payload["seconds"]`` makes it take that long."""
    record(ctx)
    seconds = ctx.payload.get("seconds", 0) if isinstance(ctx.payload, dict) else 0
    if seconds:
        await asyncio.sleep(float(seconds))


@worker.handler("gated")
def gated(ctx: RunContext) -> None:
    """Records itself; a first attempt then waits (in a handler thread) for the file
    ``payload["gate"]`` to exist, deaf to cancellation: a frozen or cut-off worker's
    handler that finishes late and reports anyway, which the fence must refuse. Later
    attempts return at once."""
    record(ctx)
    assert isinstance(ctx.payload, dict)
    gate = Path(str(ctx.payload["gate"]))
    while ctx.attempt == 1 and not gate.exists():
        time.sleep(0.01)
