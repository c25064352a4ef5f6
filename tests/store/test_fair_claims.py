"""Conformance: claims are fair across tenants, priorities order work within a tenant,
and low priority cannot starve (decision 0028)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cronwheel.store.conformance.queue.fair_claims import FairClaimsContract
from cronwheel.store.sqlite import SqliteStore, _fair


class TestFairClaims(FairClaimsContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


async def test_sqlite_reads_each_tenant_slice_in_index_order(tmp_path: Path) -> None:
    # Each share stops after its LIMIT only if no step sorts the tenant's runs first.
    store = await SqliteStore.open(tmp_path / "plan.db")
    try:
        await store.migrate()
    finally:
        await store.close()
    conn = sqlite3.connect(tmp_path / "plan.db")
    try:
        params = {"pool": "p", "tenant": "t", "until": 0, "aged": 0, "share": 1, "now": 0}
        sql = _fair._SLICE.replace("?", ":now")
        plan = [r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        past = [
            r[3]
            for r in conn.execute(f"EXPLAIN QUERY PLAN {_fair._PAST_SHARE}", params | {"limit": 1})
        ]
    finally:
        conn.close()
    for steps, n in ((plan, 4), (past, 1)):
        assert not [step for step in steps if "TEMP B-TREE FOR ORDER BY" in step], steps
        scans = [step for step in steps if step.startswith(("SEARCH r", "SCAN r"))]
        assert len(scans) == n and all("INDEX runs_fair" in step for step in scans), steps


class TestFairClaimsFullStatement(FairClaimsContract):
    """The same contract through PostgreSQL's full claim statement alone: the ``store``
    above claims one tenant's plain pools with the lean one (decision 0047)."""

    @pytest.fixture
    def store(self, full_claim_store: Any) -> Any:
        return full_claim_store
