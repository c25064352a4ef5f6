"""bench/partition_probe.py: what a batched, fenced write by run id costs when ``runs`` is
partitioned by time (issue 18, item 4; decision 0032).

A scratch database (``cwtest_pexp``, dropped at the end) gets two tables of 1,500,000
rows: one plain, one range-partitioned into 30 daily partitions. Then the completion's
shape (an UPDATE joined to a LATERAL primary-key lookup per id, 1,000 recent ids) is
timed on each, by id alone and by id plus the partition key; the median of 7 is printed.

    python bench/partition_probe.py
"""

from __future__ import annotations

import asyncio
import random
import time

import asyncpg

DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
ROWS = 1_500_000
COLUMNS = "day int NOT NULL, state text NOT NULL, fence int NOT NULL DEFAULT 0, pad text"
FILL = "SELECT g, g * 30 / {n}, 'succeeded', 0, repeat('x', 50) FROM generate_series(0, {n} - 1) g"

# The completion's shape (cronwheel/store/postgres/_sql.py COMPLETE_RUNS), on table {t}.
BY_ID = """
UPDATE {t} AS f SET fence = f.fence + 1
FROM (SELECT l.id FROM unnest($1::bigint[]) AS l(id)
      CROSS JOIN LATERAL (SELECT id FROM {t} WHERE id = l.id OFFSET 0 FOR NO KEY UPDATE) AS r
     ) AS d
WHERE f.id = d.id"""
BY_KEY = """
UPDATE part AS f SET fence = f.fence + 1
FROM (SELECT l.id, l.day FROM unnest($1::bigint[], $2::int[]) AS l(id, day)
      CROSS JOIN LATERAL (
          SELECT id FROM part WHERE id = l.id AND day = l.day OFFSET 0 FOR NO KEY UPDATE
      ) AS r
     ) AS d
WHERE f.id = d.id AND f.day = d.day"""


async def main() -> None:
    admin = await asyncpg.connect(DSN)
    await admin.execute("DROP DATABASE IF EXISTS cwtest_pexp WITH (FORCE)")
    await admin.execute("CREATE DATABASE cwtest_pexp")
    try:
        c = await asyncpg.connect(DSN.rsplit("/", 1)[0] + "/cwtest_pexp")
        await c.execute(f"CREATE TABLE flat (id bigint PRIMARY KEY, {COLUMNS})")
        await c.execute(
            f"CREATE TABLE part (id bigint NOT NULL, {COLUMNS}, PRIMARY KEY (id, day))"
            " PARTITION BY RANGE (day)"
        )
        for d in range(30):
            await c.execute(
                f"CREATE TABLE part_{d} PARTITION OF part FOR VALUES FROM ({d}) TO ({d + 1})"
            )
        for table in ("flat", "part"):
            await c.execute(f"INSERT INTO {table} " + FILL.format(n=ROWS))
        await c.execute("ANALYZE")
        ids = [random.randrange(ROWS - 50_000, ROWS) for _ in range(1000)]  # recent runs
        days = [i * 30 // ROWS for i in ids]
        cases = [
            ("plain, by id", BY_ID.format(t="flat"), (ids,)),
            ("partitioned, by id", BY_ID.format(t="part"), (ids,)),
            ("partitioned, by id + key", BY_KEY, (ids, days)),
        ]
        for name, query, args in cases:
            times = []
            for _ in range(7):
                t = time.perf_counter()
                await c.execute(query, *args)
                times.append(time.perf_counter() - t)
            print(f"{name:26} median {sorted(times)[3] * 1000:7.1f} ms per 1,000 rows")
        await c.close()
    finally:
        await admin.execute("DROP DATABASE IF EXISTS cwtest_pexp WITH (FORCE)")
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
