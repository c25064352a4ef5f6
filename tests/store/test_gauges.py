"""Conformance: the metrics scrape's one read of the store (``read_gauges``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cronwheel.core.model import SCHEDULER_TENANT
from cronwheel.store.conformance.status.gauges import GaugesContract
from cronwheel.store.sqlite import SqliteStore, _gauges


class TestGauges(GaugesContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


async def test_on_sqlite_the_read_walks_partial_indexes_only(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "plan.db")
    try:
        await store.migrate()
    finally:
        await store.close()
    conn = sqlite3.connect(tmp_path / "plan.db")
    try:
        conn.execute("ANALYZE")
        plan = [
            row[3]
            for row in conn.execute(
                f"EXPLAIN QUERY PLAN {_gauges.READ_GAUGES}", (0, 0, SCHEDULER_TENANT)
            )
        ]
    finally:
        conn.close()
    on_runs = [step for step in plan if " runs " in f"{step} "]
    assert on_runs == [
        "SCAN runs USING INDEX runs_claimable",
        "SCAN runs USING INDEX runs_leases",
        "SCAN runs USING INDEX runs_dead",
    ], plan
