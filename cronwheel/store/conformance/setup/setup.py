"""Conformance: migrations, the store clock and wake-ups."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at, make_job, make_run
from cronwheel.store.migrate import migrations


class SetupContract:
    """Migrations, the store clock and wake-ups.

    Part of the ``setup`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_migrate_is_idempotent_and_reports_the_version(self, store: Store) -> None:
        latest = migrations("sqlite")[-1].version
        assert await store.schema_version() == latest
        assert await store.migrate() == []

    async def test_now_is_the_stores_clock(self, store: Store) -> None:
        now = await store.now()
        assert now.tzinfo is not None
        assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)

    async def test_notify_between_waits_is_not_lost(self, store: Store) -> None:
        # A worker waits in a loop: a notify that lands while it is busy between two waits
        # must wake the next wait at once.
        assert await store.wait(["runs:default"], timeout=0.01) is False
        await store.notify("runs:default")
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await store.wait(["runs:default"], timeout=30) is True
        assert loop.time() - started < 10

    async def test_wait_times_out_without_a_notify(self, store: Store) -> None:
        assert await store.wait(["runs:quiet"], timeout=0.05) is False

    async def test_a_new_pending_run_wakes_its_pool(self, store: Store) -> None:
        job = make_job(pool="mail")
        await store.create_jobs([job])
        assert await store.wait(["runs:mail"], timeout=0.01) is False
        await store.materialize_runs([make_run(job, at(0))], [])
        assert await store.wait(["runs:mail"], timeout=30) is True
