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
    # runs, and its aliases: r the due runs, k a key's running runs, o a job's running runs
    on_runs = {step for step in plan if step.split()[1:2] in (["runs"], ["r"], ["k"], ["o"])}
    assert on_runs == {
        "SCAN r USING INDEX runs_claimable",
        # only for a keyed run, or a run of an overlap: queue job (decision 0042)
        "SEARCH k USING INDEX runs_keyed_running (tenant_id=? AND concurrency_key=?)",
        "SEARCH o USING INDEX runs_running_by_job (job_id=?)",
        "SCAN runs USING INDEX runs_leases",
        "SCAN runs USING INDEX runs_dead",
    }, plan
