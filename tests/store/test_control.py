"""Conformance: cancel, replay (the dead-letter queue), listings and retention."""

from __future__ import annotations

from cronwheel.core.model import RunState
from cronwheel.store.conformance.factories import at, make_job, make_run
from cronwheel.store.conformance.run_control.control import ControlContract


class TestControl(ControlContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


async def test_sqlite_retention_lets_other_writes_in_between_its_batches(tmp_path: object) -> None:
    """SQLite has one writer: a long delete is cut into small writes, so a worker's
    completion queued behind it is written before the whole delete is done."""
    import asyncio
    from pathlib import Path

    from cronwheel.store.sqlite import SqliteStore
    from cronwheel.store.sqlite.store import HISTORY_BATCH

    store = await SqliteStore.open(Path(str(tmp_path)) / "history.db")
    try:
        await store.migrate()
        job = make_job()
        await store.create_jobs([job])
        old = [make_run(job, at(s), state=RunState.SKIPPED) for s in range(3 * HISTORY_BATCH)]
        await store.materialize_runs(old, [])
        deleting = asyncio.create_task(store.delete_history(before=at(10**6)))
        await asyncio.sleep(0)  # the delete has sent its first batch
        await store.ensure_tenant("between", "between", now=at(0))  # a write behind it
        left = len(await store.list_runs("default", job_id=job.id, limit=10_000))
        assert 0 < left < 3 * HISTORY_BATCH  # the delete was part way through
        assert await deleting == 3 * HISTORY_BATCH
        assert await store.list_runs("default", job_id=job.id) == []
    finally:
        await store.close()
