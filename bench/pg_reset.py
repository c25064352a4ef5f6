"""bench/pg_reset.py: what the PostgreSQL reset between two tests costs.

Every PostgreSQL test starts from an emptied database (``truncate_all_for_tests``,
decision 0038). This times it on a fresh database: after a test that wrote nothing but
the default tenant, and after one that wrote a job and its runs. Figures (ms) are
printed, never asserted. ``--whole`` times what the reset was before: one ``TRUNCATE``
of every table.

    python bench/pg_reset.py --samples 20
    python bench/pg_reset.py --samples 20 --whole
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
from cronwheel.store.conformance.factories import make_job, make_run
from cronwheel.store.postgres import PostgresStore

DSN = os.environ.get("CRONWHEEL_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(DSN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


WHOLE = """
DO $$ BEGIN
    EXECUTE 'TRUNCATE ' || (SELECT string_agg(format('%I', tablename), ', ') FROM pg_tables
        WHERE schemaname = current_schema() AND tablename <> 'schema_migrations')
        || ' RESTART IDENTITY CASCADE';
    INSERT INTO tenants (id, name, created_at) VALUES ('default', 'default', now());
END $$"""


async def main(samples: int, whole: bool) -> None:
    name = f"cronwheel_bench_reset_{uuid.uuid4().hex[:8]}"
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        store = await PostgresStore.connect(DSN.rpartition("/")[0] + "/" + name)
        await store.migrate()
        t0 = datetime.now(UTC)
        for label, writes in (("nothing written", False), ("a job and 100 runs", True)):
            took = []
            for _ in range(samples):
                if writes:
                    job = make_job()
                    runs = [make_run(job, t0 + timedelta(seconds=n)) for n in range(100)]
                    await store.create_jobs([job], runs)
                started = time.perf_counter()
                if whole:
                    async with store._connection() as conn:
                        await conn.execute(WHOLE)
                else:
                    await store.truncate_all_for_tests()
                took.append((time.perf_counter() - started) * 1000)
            kind = "whole truncate" if whole else "reset"
            print(
                f"{kind} after {label:<20} {samples} samples: min {min(took):.1f} ms,"
                f" p50 {statistics.median(took):.1f} ms, max {max(took):.1f} ms"
            )
        await store.close()
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--whole", action="store_true", help="the reset before decision 0038")
    args = parser.parse_args()
    asyncio.run(main(args.samples, args.whole))
