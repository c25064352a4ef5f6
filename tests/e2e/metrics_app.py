"""Handlers for the metrics scenario: ``--app tests.e2e.metrics_app:worker``."""

from __future__ import annotations

from cronwheel import PermanentError, RunContext, Worker

worker = Worker()


@worker.handler("ok")
def ok(ctx: RunContext) -> None:
    """Succeeds at once."""


@worker.handler("fails-once")
def fails_once(ctx: RunContext) -> None:
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt fails on purpose")


@worker.handler("broken")
def broken(ctx: RunContext) -> None:
    raise PermanentError("retrying cannot help")


@worker.handler("blocks")
def blocks(ctx: RunContext) -> None:
    """Runs until it is stopped: a run that stays running for the scrape."""
    ctx.cancelled.wait(120)
