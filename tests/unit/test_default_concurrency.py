"""A pool's concurrency when none is given: by its handlers' kind (issue 18, item 2;
cronwheel.cli.services)."""

from __future__ import annotations

import click
import pytest

from cronwheel.actions import RunContext
from cronwheel.actions.handler import HandlerRegistry
from cronwheel.cli.services import (
    ASYNC_CONCURRENCY,
    SYNC_CONCURRENCY,
    WEBHOOK_CONNECTIONS,
    pools_of,
)


def _registry() -> HandlerRegistry:
    registry = HandlerRegistry()

    async def fetch(ctx: RunContext) -> None:
        pass

    def crunch(ctx: RunContext) -> None:
        pass

    registry.register("fetch", fetch)
    registry.register("fetch-more", fetch, pool="io")
    registry.register("crunch", crunch, pool="cpu")
    registry.register("fetch-too", fetch, pool="cpu")
    return registry


def test_async_pools_run_many_at_once_and_a_sync_handler_makes_a_pool_small() -> None:
    assert pools_of((), _registry(), None) == {
        "cpu": SYNC_CONCURRENCY,
        "default": ASYNC_CONCURRENCY,
        "io": ASYNC_CONCURRENCY,
    }
    assert ASYNC_CONCURRENCY > SYNC_CONCURRENCY


def test_a_pool_of_webhooks_only_runs_as_many_as_the_worker_has_connections() -> None:
    # Issue 26: 2,500 webhooks at once over 200 connections queued 2,300 requests inside
    # the HTTP client, and the worker's loop stalled on them for 40 s.
    assert pools_of((), HandlerRegistry(), None) == {"default": WEBHOOK_CONNECTIONS}
    assert pools_of(("hooks",), HandlerRegistry(), None) == {"hooks": WEBHOOK_CONNECTIONS}
    assert pools_of(("hooks",), HandlerRegistry(), None, webhooks=40) == {"hooks": 40}
    assert WEBHOOK_CONNECTIONS < ASYNC_CONCURRENCY


def test_a_given_concurrency_or_pool_size_wins_over_the_defaults() -> None:
    assert pools_of((), _registry(), 7) == {"cpu": 7, "default": 7, "io": 7}
    assert pools_of(("cpu", "io=3"), _registry(), None) == {"cpu": SYNC_CONCURRENCY, "io": 3}


def test_a_bad_pool_size_names_the_option() -> None:
    with pytest.raises(click.BadParameter, match="NAME=CONCURRENCY"):
        pools_of(("io=0",), _registry(), None)
