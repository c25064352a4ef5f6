"""How long a ``/metrics`` scrape takes over a store with a large history at rest.

Builds a store holding ``--runs`` runs (by default 1,000,000), nearly all finished
(succeeded), 0.1 % dead, plus a small live set: 100 runs due in a pool nobody serves and
20 held by a worker. Then times, uncached, what a scrape of the API does: the one
``Store.read_gauges`` statement and the rendering of the text (``ApiMetrics.render``
with a fresh cache each time), and prints the median and the worst of ``--repeat``.

    python bench/metrics_scrape.py --store sqlite                 # 1,000,000 runs
    python bench/metrics_scrape.py --store pg --runs 10000        # a quick check
    python bench/metrics_scrape.py --store pg --pg postgresql://postgres@127.0.0.1:5432/postgres

The history is written by one ``INSERT … SELECT`` that copies 1,000 real finished runs
under new instants (writing a million runs through the API would time the API instead).
PostgreSQL gets a database of its own (``cwbench_metrics_<pid>``), dropped at the end;
SQLite a file in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
from cronwheel.control.service import JobService
from cronwheel.core.clock import SystemClock
from cronwheel.core.model import AttemptOutcome, RunState
from cronwheel.observability.metrics import ApiMetrics, store_reader
from cronwheel.store import open_store
from cronwheel.store.base import Completion, Store

JOBS = 1000
DEFAULT_PG = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def seed_live(store: Store) -> None:
    """1,000 jobs with one finished run each (the history's template), 100 runs due in
    a pool nobody serves, 20 runs held by a worker."""
    service = JobService(store, actor="bench")
    manual = {"kind": "manual"}
    action = {"type": "handler", "name": "noop"}
    jobs = [await service.create(name=f"j{i}", schedule=manual, action=action) for i in range(JOBS)]
    for job in jobs:
        await service.enqueue(job.id, [None])
    now = await store.now()
    claimed = await store.claim_runs(
        "bench", ["default"], limit=JOBS, now=now, prefetch_until=now, lease_seconds=600
    )
    done = [
        Completion(
            c.run.id, c.run.fence, "bench", RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED, now, now
        )
        for c in claimed
    ]
    await store.complete_runs(done)
    idle = await service.create(name="idle", schedule=manual, action=action, pool="nobody")
    await service.enqueue(idle.id, [None] * 100)
    for job in jobs[:20]:
        await service.enqueue(job.id, [None])
    await store.claim_runs(
        "bench", ["default"], limit=20, now=now, prefetch_until=now, lease_seconds=3600
    )


def _copy(columns: list[str], shift: str, dead: str) -> str:
    """The SELECT list copying a finished run under a new instant, one in 1,000 dead."""
    moved = {"scheduled_for": shift, "available_at": shift, "state": dead}
    return ", ".join(moved.get(c, f"r.{c}") for c in columns)


async def grow_pg(dsn: str, copies: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        columns = [
            r["column_name"]
            for r in await conn.fetch(
                "SELECT column_name FROM information_schema.columns"
                " WHERE table_name = 'runs' AND column_name <> 'id' ORDER BY ordinal_position"
            )
        ]
        select = _copy(
            columns,
            "r.scheduled_for - g * interval '1 minute'",
            "CASE WHEN g % 1000 = 1 THEN 'dead' ELSE r.state END",
        )
        await conn.execute(
            f"INSERT INTO runs ({', '.join(columns)}) SELECT {select}"
            " FROM runs r CROSS JOIN generate_series(1, $1) AS g WHERE r.state = 'succeeded'",
            copies,
        )
        await conn.execute("VACUUM ANALYZE runs")
    finally:
        await conn.close()


def grow_sqlite(path: Path, copies: int) -> None:
    conn = sqlite3.connect(path)
    try:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(runs)") if r[1] != "id"]
        select = _copy(
            columns,
            "r.scheduled_for - g.n * 60000000",
            "CASE WHEN g.n % 1000 = 1 THEN 'dead' ELSE r.state END",
        )
        with conn:
            conn.execute(
                "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)"
                f" INSERT INTO runs ({', '.join(columns)}) SELECT {select}"
                " FROM runs r, g WHERE r.state = 'succeeded'",
                (copies,),
            )
        conn.execute("ANALYZE")
    finally:
        conn.close()


async def measure(store: Store, repeat: int) -> dict[str, Any]:
    clock = SystemClock()
    reads, scrapes = [], []
    text = b""
    for _ in range(repeat):
        started = time.perf_counter()
        await store_reader(store, clock=clock)()
        reads.append(time.perf_counter() - started)
        started = time.perf_counter()
        text = await ApiMetrics(store_reader(store, clock=clock)).render()
        scrapes.append(time.perf_counter() - started)
    return {
        "read_gauges_ms": {"median": statistics.median(reads) * 1e3, "max": max(reads) * 1e3},
        "scrape_ms": {"median": statistics.median(scrapes) * 1e3, "max": max(scrapes) * 1e3},
        "scrape_bytes": len(text),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    copies = max(args.runs // JOBS - 1, 0)
    if args.store == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "metrics.db"
            store = await open_store(f"sqlite:///{path}")
            try:
                await store.migrate()
                await seed_live(store)
                grow_sqlite(path, copies)
                return await measure(store, args.repeat)
            finally:
                await store.close()
    name = f"cwbench_metrics_{os.getpid()}"
    admin = await asyncpg.connect(args.pg)
    await admin.execute(f'CREATE DATABASE "{name}"')
    dsn = f"{args.pg.rpartition('/')[0]}/{name}"
    try:
        store = await open_store(dsn)
        try:
            await store.migrate()
            await seed_live(store)
            await grow_pg(dsn, copies)
            return await measure(store, args.repeat)
        finally:
            await store.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--runs", type=int, default=1_000_000, help="runs in the store")
    parser.add_argument("--repeat", type=int, default=20, help="scrapes timed")
    parser.add_argument("--pg", default=DEFAULT_PG, help="an admin DSN (or CWBENCH_PG_DSN)")
    args = parser.parse_args()
    result = asyncio.run(main(args))
    print(json.dumps({"store": args.store, "runs": args.runs, **result}, indent=2))
