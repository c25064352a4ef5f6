"""bench/claim_plans.py: a claim planned once (generic) against planned each time (custom).

Decision 0047's addendum plans a worker's claim (any tenant) once per connection and a
claim for one tenant at every execution. This checks both choices over skewed data: in
pool ``big`` tenant ``a`` has N due runs and tenant ``b`` ten, in pool ``solo`` tenant
``b`` has ten. Each claim runs in a transaction rolled back (the same data every time),
under ``plan_cache_mode`` forced each way, alternated, and prints the lowest and median
time of a claim in ms and how many runs it took:

    python bench/claim_plans.py                  # 100,000 runs of a, claims of 250
    python bench/claim_plans.py --runs 20000 --limit 2500 --repeat 20

The worker's claims (``tenant: any``) should be no slower generic; a tenant's claim
behind another tenant's backlog is, which is why it stays custom.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

import asyncpg
from cronwheel.core.model import REASON_OVERLAP_SKIP, Tenant
from cronwheel.store.conformance.factories import T0, at, make_job, make_run
from cronwheel.store.postgres import PostgresStore, _lean
from cronwheel.store.postgres import _sql as sql

PG = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
DB = f"cwbench_plans_{os.getpid()}"
MODES = ("force_custom_plan", "force_generic_plan")
# name, statement, pools, tenant (None: any, as a worker claims)
CASES: tuple[tuple[str, str, list[str], str | None], ...] = (
    ("lean, solo, any tenant", _lean.CLAIM_RUNS_LEAN, ["solo"], None),
    ("lean, big, tenant a", _lean.CLAIM_RUNS_LEAN, ["big"], "a"),
    ("lean, big, tenant b", _lean.CLAIM_RUNS_LEAN, ["big"], "b"),
    ("full, big, any tenant", sql.CLAIM_RUNS, ["big"], None),
    ("full, big, tenant b", sql.CLAIM_RUNS, ["big"], "b"),
)


def _args(statement: str, pools: list[str], tenant: str | None, limit: int) -> tuple[Any, ...]:
    now = at(0)
    head = ("bench", pools, now, limit, now, 30.0)
    if statement is _lean.CLAIM_RUNS_LEAN:
        return (*head, tenant, 60.0, True)
    return (*head, REASON_OVERLAP_SKIP, tenant, 60.0, True)


async def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=100_000, help="tenant a's runs in pool big")
    p.add_argument("--limit", type=int, default=250, help="runs a claim (%(default)s)")
    p.add_argument("--repeat", type=int, default=12, help="claims per case and mode")
    a = p.parse_args()
    admin = await asyncpg.connect(PG)
    await admin.execute(f"CREATE DATABASE {DB}")
    try:
        store = await PostgresStore.connect(PG.rsplit("/", 1)[0] + "/" + DB, max_size=1)
        try:
            await store.migrate()
            for t in ("a", "b"):
                await store.create_tenant(Tenant(t, t, T0))
            big_a, big_b = make_job(tenant_id="a", pool="big"), make_job(tenant_id="b", pool="big")
            solo = make_job(tenant_id="b", pool="solo")
            await store.create_jobs([big_a, big_b, solo])
            runs = [make_run(big_a, at(-a.runs + i / 1000)) for i in range(a.runs)]
            runs += [make_run(j, at(-50 + i)) for j in (big_b, solo) for i in range(10)]
            for i in range(0, len(runs), 5_000):
                await store.materialize_runs(runs[i : i + 5_000], [])
            times: dict[tuple[str, str], list[float]] = {}
            taken: dict[str, int] = {}
            async with store._connection() as conn:
                await conn.execute("VACUUM ANALYZE runs")
                for _ in range(a.repeat):
                    for mode in MODES:
                        await conn.execute(f"SET plan_cache_mode = {mode}")
                        for name, statement, pools, tenant in CASES:
                            tx = conn.transaction()
                            await tx.start()
                            start = time.perf_counter()
                            found = await conn.fetch(
                                statement, *_args(statement, pools, tenant, a.limit)
                            )
                            elapsed = time.perf_counter() - start
                            await tx.rollback()
                            times.setdefault((name, mode), []).append(elapsed * 1e3)
                            taken[name] = sum(1 for r in found if r["id"] is not None)
            print(
                f"ms a claim of up to {a.limit:,}, tenant a {a.runs:,} runs; lowest / median"
                f" of {a.repeat}\n{'':<24} {'custom':>16} {'generic':>16} {'runs':>6}"
            )
            for name, *_ in CASES:
                cells = []
                for mode in MODES:
                    ms = times[(name, mode)]
                    cells.append(f"{min(ms):.2f} / {statistics.median(ms):.2f}")
                print(f"{name:<24} {cells[0]:>16} {cells[1]:>16} {taken[name]:>6}")
        finally:
            await store.close()
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
