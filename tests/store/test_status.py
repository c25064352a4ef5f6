"""Conformance: the cheap reads of ``cronwheel status`` and ``cronwheel jobs why``."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import T0
from cronwheel.store.conformance.status.status import StatusContract
from cronwheel.store.postgres import PostgresStore
from cronwheel.store.postgres import _status as pg_status
from cronwheel.store.sqlite import SqliteStore


class TestStatus(StatusContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


async def test_status_reads_go_through_indexes(store: Store) -> None:
    """No status read scans the runs or attempts table (migration 0006)."""
    if isinstance(store, PostgresStore):
        # Each read names the index it needs: with sequential scans off, a plan without
        # it would fall back on a whole-index scan of runs_tenant_state instead.
        statements: list[tuple[Any, ...]] = [
            # runs_fair and runs_keyed (0016, 0018) hold tenant_id too: index-only reads.
            (("runs_fair",), pg_status.DUE, None, T0),
            (("runs_keyed",), pg_status.DUE, None, T0),
            # Two partial indexes hold only running runs (runs_leases, runs_running_by_job):
            # on a table this small the planner's costs tie, and it takes either.
            (("runs_leases", "runs_running_by_job"), pg_status.RUNNING, None),
            (("runs_dead",), pg_status.DEAD, None),
            # A window that is not empty: an empty one is pruned from the plan whole.
            (("attempts_finished",), pg_status.RECENT, None, T0, T0 - timedelta(hours=1)),
            (("attempts_finished",), pg_status.RECENT, "default", T0, T0 - timedelta(hours=1)),
        ]
        async with store._connection() as conn:
            await conn.execute("SET enable_seqscan = off")
            try:
                for names, statement, *args in statements:
                    plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {statement}", *args)
                    text = plan if isinstance(plan, str) else json.dumps(plan)
                    assert "Seq Scan" not in text, (statement, text)
                    assert any(name in text for name in names), (statement, text)
            finally:
                await conn.execute("RESET enable_seqscan")
        return
    assert isinstance(store, SqliteStore)
    from cronwheel.store.sqlite import _status as lite

    plans: list[str] = []

    def explain(c: object) -> None:
        real_execute = c.execute  # type: ignore[attr-defined]

        class Spy:
            def execute(self, sql: str, params: object = ()) -> object:
                for row in real_execute(f"EXPLAIN QUERY PLAN {sql}", params):
                    plans.append(row["detail"])
                return real_execute(sql, params)

        lite.pool_status(Spy(), "default", T0, T0)  # type: ignore[arg-type]
        lite.pool_status(Spy(), None, T0, T0)  # type: ignore[arg-type]

    await store._db.read(explain)
    scans = [p for p in plans if p.startswith("SCAN") and " USING " not in p]
    # The window's attempts are searched by finish time; "SCAN w"/"SCAN ranked" read the
    # window's own rows, never a table.
    assert not [p for p in scans if p.split()[1] in ("runs", "attempts", "a", "r")], plans
