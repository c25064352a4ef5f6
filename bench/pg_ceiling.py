"""How many runs/s one PostgreSQL primary moves through claim and completion, and how
much of that cronwheel's store takes (docs/scaling.md).

Two stages, each on a scratch database of this machine's PostgreSQL (``cwtest_ceiling_*``,
dropped afterwards), each with ``--runs`` runs pending at the start and ``--claimers``
connections or tasks draining them in batches of ``--batch``:

``raw``
    PostgreSQL alone: a bare ``runs`` table (a pending partial index on pool, priority,
    available_at), filled by COPY; each claimer repeats a batched claim
    ``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING id, fence``
    and a fenced batched completion ``UPDATE … FROM unnest(ids, fences)``: the two
    statements of DESIGN.md's "about 120,000 runs/s".
``store``
    cronwheel's own statements through :class:`PostgresStore` on its real schema (runs,
    attempts, jobs; migrated): ``claim_runs`` and ``complete_runs`` (an attempt row per
    run, the job's last outcome), with the runs enqueued to one manual job beforehand.
    No worker, no handler: the store's share of the engine.

Usage (the figures in docs/scaling.md come from these)::

    PYTHONPATH=. python bench/pg_ceiling.py --stage raw,store --runs 100000 --claimers 1,4

runs/s = runs ÷ (time from the first claim to the last completion). On a busy, shared
machine that rate moves with the neighbours; the CPU the database's own backends spent
per run (from /proc, PostgreSQL on this machine) moves much less, and says how many
runs/s a core of a dedicated primary would serve. Speed is measured here, never asserted
in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

DSN = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")

RAW_SCHEMA = """
CREATE TABLE runs (
    id bigserial PRIMARY KEY,
    pool text NOT NULL,
    priority int NOT NULL DEFAULT 0,
    state text NOT NULL DEFAULT 'pending',
    available_at timestamptz NOT NULL,
    fence int NOT NULL DEFAULT 0,
    worker_id text,
    lease_until timestamptz,
    finished_at timestamptz
);
CREATE INDEX runs_pending ON runs (pool, priority DESC, available_at) WHERE state = 'pending';
"""
RAW_CLAIM = """
UPDATE runs SET state = 'running', fence = fence + 1, worker_id = $1,
       lease_until = now() + interval '30 seconds'
 WHERE id IN (SELECT id FROM runs
               WHERE state = 'pending' AND pool = 'default' AND available_at <= now()
               ORDER BY priority DESC, available_at
               FOR UPDATE SKIP LOCKED LIMIT $2)
RETURNING id, fence
"""
RAW_COMPLETE = """
UPDATE runs r SET state = 'succeeded', finished_at = now(), lease_until = NULL
  FROM unnest($1::bigint[], $2::int[]) AS c(id, fence)
 WHERE r.id = c.id AND r.fence = c.fence AND r.state = 'running'
"""


async def _scratch(stage: str) -> tuple[str, str]:
    """A new database of this stage; its name and DSN."""
    name = f"cwtest_ceiling_{stage}_{os.getpid()}"
    admin = await asyncpg.connect(DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    base, _, _ = DSN.rpartition("/")
    return name, f"{base}/{name}"


async def _drop(name: str) -> None:
    admin = await asyncpg.connect(DSN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU seconds of each process (a PostgreSQL backend on this machine)."""
    found: dict[int, float] = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone, or PostgreSQL is not on this machine
            continue
        found[pid] = (int(fields[11]) + int(fields[12])) / TICKS
    return found


async def _backends(name: str) -> list[int]:
    """The server processes connected to the scratch database ``name``."""
    admin = await asyncpg.connect(DSN)
    try:
        rows = await admin.fetch("SELECT pid FROM pg_stat_activity WHERE datname = $1", name)
    finally:
        await admin.close()
    return [r["pid"] for r in rows]


@dataclass
class Figures:
    runs_per_second: float
    pg_cpu_us: float
    """PostgreSQL CPU (its backends serving this database, user + system) per run, µs."""
    client_cpu_us: float
    """This process's CPU per run (asyncpg, and the store's Python in ``store``), µs."""

    def __str__(self) -> str:
        per_core = 1e6 / self.pg_cpu_us if self.pg_cpu_us else math.inf
        return (
            f"{self.runs_per_second:,.0f} runs/s; PostgreSQL {self.pg_cpu_us:.1f} µs CPU/run"
            f" (= {per_core:,.0f} runs/s per busy core), client {self.client_cpu_us:.1f} µs/run"
        )


async def _drain(
    name: str, runs: int, claimers: int, step: Callable[[int], Awaitable[int]]
) -> Figures:
    """Run ``claimers`` loops of ``step(i)`` (runs done by one claim and completion)
    until each finds nothing: the rate from start to the last completion, and the CPU
    the database's backends and this process spent meanwhile."""

    async def loop(i: int) -> None:
        while await step(i):
            pass

    before = _cpu_seconds(await _backends(name))
    client = time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*(loop(i) for i in range(claimers)))
    seconds = time.perf_counter() - start
    client = time.process_time() - client
    after = _cpu_seconds(await _backends(name))
    server = sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())
    return Figures(runs / seconds, server / runs * 1e6, client / runs * 1e6)


async def raw(runs: int, claimers: int, batch: int) -> Figures:
    name, dsn = await _scratch("raw")
    try:
        pool = await asyncpg.create_pool(dsn, min_size=claimers, max_size=claimers)
        try:
            async with pool.acquire() as conn:
                await conn.execute(RAW_SCHEMA)
                now = datetime.now(UTC)
                await conn.copy_records_to_table(
                    "runs", records=[("default", now)] * runs, columns=["pool", "available_at"]
                )
                await conn.execute("VACUUM ANALYZE runs")

            async def step(i: int) -> int:
                async with pool.acquire() as conn:
                    rows = await conn.fetch(RAW_CLAIM, f"w{i}", batch)
                    if not rows:
                        return 0
                    await conn.execute(
                        RAW_COMPLETE, [r["id"] for r in rows], [r["fence"] for r in rows]
                    )
                    return len(rows)

            figures = await _drain(name, runs, claimers, step)
            async with pool.acquire() as conn:
                done = await conn.fetchval("SELECT count(*) FROM runs WHERE state = 'succeeded'")
            assert done == runs, f"{done} of {runs} runs completed"
            return figures
        finally:
            await pool.close()
    finally:
        await _drop(name)


async def store(runs: int, claimers: int, batch: int) -> Figures:
    from cronwheel.control.service import JobService
    from cronwheel.core.model import AttemptOutcome, RunState
    from cronwheel.store.base import Completion
    from cronwheel.store.postgres import PostgresStore

    name, dsn = await _scratch("store")
    try:
        pg = await PostgresStore.connect(dsn, max_size=max(claimers, 2))
        try:
            await pg.migrate()
            service = JobService(pg)
            job = await service.create(
                name="ceiling",
                schedule={"kind": "manual"},
                action={"type": "handler", "name": "noop"},
            )
            for i in range(0, runs, 5_000):
                await service.enqueue(job.id, list(range(i, min(i + 5_000, runs))))
            conn = await asyncpg.connect(dsn)  # as raw does, after the load
            try:
                await conn.execute("VACUUM ANALYZE")
            finally:
                await conn.close()

            async def step(i: int) -> int:
                now = datetime.now(UTC)
                claim = await pg.claim_runs(
                    f"w{i}",
                    ["default"],
                    limit=batch,
                    now=now,
                    prefetch_until=now,
                    lease_seconds=30,
                )
                if not claim:
                    return 0
                finished = datetime.now(UTC)
                done: list[Any] = [
                    Completion(
                        c.run.id,
                        c.run.fence,
                        f"w{i}",
                        RunState.SUCCEEDED,
                        AttemptOutcome.SUCCEEDED,
                        now,
                        finished,
                    )
                    for c in claim
                ]
                accepted = await pg.complete_runs(done)
                assert len(accepted) == len(done)
                return len(claim)

            return await _drain(name, runs, claimers, step)
        finally:
            await pg.close()
    finally:
        await _drop(name)


STAGES = {"raw": raw, "store": store}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", default="raw,store", help="raw, store, or both (comma)")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--claimers", default="1,4", help="connections draining, e.g. 1,4")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each stage")
    args = parser.parse_args()
    print(f"runs={args.runs} batch={args.batch} dsn={DSN}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for stage in args.stage.split(","):
        for claimers in (int(c) for c in args.claimers.split(",")):
            for _ in range(args.repeat):
                figures = asyncio.run(STAGES[stage](args.runs, claimers, args.batch))
                print(f"{stage:6} claimers={claimers}: {figures}", flush=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
