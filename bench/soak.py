"""bench/soak.py: a steady load for a long time, with a short retention (issue 18).

A producer enqueues ``--rate`` runs per second to a manual job (a batch every 100 ms), a
worker in the same process executes them (a no-op handler), and maintenance deletes the
history older than ``--retention-seconds``. On PostgreSQL maintenance also archives the
runs finished ``--settle-seconds`` ago into history partitioned every
``--partition-seconds`` (decision 0032; ``--no-archive`` leaves them in runs), retention
drops whole partitions, and maintenance vacuums runs and attempts once their dead tuples
pass its threshold (``--no-vacuum`` leaves them to autovacuum). Every ``--every``
seconds it prints the runs finished in that interval (per second), the start lag's p50
and p99 (started_at behind available_at, from the attempts), this process's resident
memory and the time its garbage collector ran in the interval (the worker, the producer
and maintenance share this process: a heap that grows makes each full collection, a
pause of every run's start, longer), and the size of the tables
that grow (PostgreSQL: the total relation size of runs, attempts, run_history and
attempt_history, every partition summed, the dead tuples of runs and how many times it
was vacuumed; SQLite: the database's pages in use and free). The goal: after the first
retention period, every column flat.

    python bench/soak.py --store pg --rate 2000 --minutes 30 --retention-seconds 300 \
        --partition-seconds 60
    python bench/soak.py --quick --store sqlite --store pg    # 2 minutes, 500 runs/s

Figures are printed, never asserted. The database is a fresh one (PostgreSQL:
``cwbench_soak_<hex>``, dropped at the end; SQLite: a temporary file).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from cronwheel.actions.handler import HandlerRegistry
from cronwheel.control.service import JobService, connect
from cronwheel.engine.eventloop import new_event_loop
from cronwheel.engine.maintenance import Maintenance, MaintenanceConfig
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.errors import StoreUnavailable

PG = os.environ.get("CRONWHEEL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


class GcClock:
    """Time spent in this process's garbage collections, by generation, since the last
    ``take``; the longest single pause too."""

    def __init__(self) -> None:
        self.spent = [0.0, 0.0, 0.0]
        self.longest = 0.0
        self._began = 0.0
        gc.callbacks.append(self._on)

    def _on(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        took = time.perf_counter() - self._began
        self.spent[info["generation"]] += took
        self.longest = max(self.longest, took)

    def take(self) -> tuple[float, float, float]:
        """(ms in full collections, ms in all, the longest pause in ms) since the last."""
        full, total, longest = self.spent[2], sum(self.spent), self.longest
        self.spent, self.longest = [0.0, 0.0, 0.0], 0.0
        return full * 1000, total * 1000, longest * 1000


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


@dataclass
class Sample:
    at: float
    finished: int
    lag_p50_ms: float
    lag_p99_ms: float
    sizes: dict[str, str]


async def _lags(cw: JobService, since: datetime, until: datetime) -> tuple[int, float, float]:
    """The attempts finished in [since, until): how many, and their start lag's p50 and
    p99 in seconds.

    On PostgreSQL the server computes them: fetching each attempt's lag (120,000 rows a
    minute at 2,000 runs/s) into this process, whose event loop is the worker's, stalled
    the worker for the fetch and its garbage, and the runs due meanwhile started late,
    in the very p99 being measured."""
    store: Any = cw.store
    if hasattr(store, "path"):
        rows = await store._db.read(
            lambda c: c.execute(
                "SELECT lag_seconds FROM attempts WHERE finished_at >= ? AND finished_at < ?"
                " AND lag_seconds IS NOT NULL",
                (_us(since), _us(until)),
            ).fetchall()
        )
        lags = sorted(r[0] for r in rows)
        if not lags:
            return 0, float("nan"), float("nan")
        return len(lags), statistics.median(lags), lags[max(int(len(lags) * 0.99) - 1, 0)]
    async with store._connection() as conn:  # archived attempts too (decision 0032)
        row = await conn.fetchrow(
            "SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY lag_seconds),"
            " percentile_disc(0.99) WITHIN GROUP (ORDER BY lag_seconds)"
            " FROM all_attempts WHERE finished_at >= $1 AND finished_at < $2"
            " AND lag_seconds IS NOT NULL",
            since,
            until,
        )
    assert row is not None
    if not row[0]:
        return 0, float("nan"), float("nan")
    return row[0], row[1], row[2]


def _us(instant: datetime) -> int:
    return int((instant - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)


async def _sizes(cw: JobService) -> dict[str, str]:
    store: Any = cw.store
    if hasattr(store, "path"):
        pages = await store._db.read(
            lambda c: (
                c.execute("PRAGMA page_count").fetchone()[0],
                c.execute("PRAGMA freelist_count").fetchone()[0],
                c.execute("PRAGMA page_size").fetchone()[0],
            )
        )
        count, free, size = pages
        return {"db MB": f"{count * size / 1e6:.1f}", "free MB": f"{free * size / 1e6:.1f}"}
    async with store._connection() as conn:
        row = await conn.fetchrow(
            "SELECT pg_total_relation_size('runs') AS runs,"
            " pg_total_relation_size('attempts') AS attempts,"
            f" ({_PARTITIONS.format(t='run_history')}) AS run_history,"
            f" ({_PARTITIONS.format(t='attempt_history')}) AS attempt_history,"
            " (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'runs') AS dead,"
            " (SELECT vacuum_count + autovacuum_count FROM pg_stat_user_tables"
            "  WHERE relname = 'runs') AS vacuums,"
            " (SELECT count(*) FROM pg_partition_tree('run_history') WHERE isleaf) AS parts"
        )
    return {
        "runs MB": f"{row['runs'] / 1e6:.1f}",
        "attempts MB": f"{row['attempts'] / 1e6:.1f}",
        "run_history MB": f"{row['run_history'] / 1e6:.1f}",
        "attempt_hist MB": f"{row['attempt_history'] / 1e6:.1f}",
        "runs dead tup": f"{row['dead'] or 0:,}",
        "runs vacuums": f"{row['vacuums'] or 0}",
        "partitions": f"{row['parts']}",
    }


# Every partition of a partitioned table, summed (its own size is none).
_PARTITIONS = (
    "SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::bigint FROM pg_partition_tree('{t}')"
)


async def _soak(
    url: str,
    rate: int,
    seconds: float,
    retention: float,
    every: float,
    archive: MaintenanceConfig,
) -> None:
    cw = await connect(url)
    handlers = HandlerRegistry()
    handlers.register("noop", lambda ctx: None)
    job = await cw.create(
        name="soak", schedule={"kind": "manual"}, action={"type": "handler", "name": "noop"}
    )
    worker = Worker(cw.store, WorkerConfig(pools={"default": 500}), handlers=handlers)
    maintenance = Maintenance(
        cw.store,
        config=replace(archive, interval_seconds=1.0, retention_days=retention / 86_400),
    )
    stop = asyncio.Event()
    services = [asyncio.create_task(worker.run(stop)), asyncio.create_task(maintenance.run(stop))]
    per_tick = max(1, rate // 10)

    async def produce() -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while not stop.is_set():
            try:
                await cw.enqueue(job.id, [None] * per_tick)
            except StoreUnavailable as exc:  # a restart of the server: ride it out
                print(f"enqueue failed, a batch of {per_tick} lost: {exc}", flush=True)
            next_at += 0.1
            await asyncio.sleep(max(0.0, next_at - loop.time()))

    if not hasattr(cw.store, "path"):
        async with cw.store._connection() as conn:  # type: ignore[attr-defined]
            if await conn.fetchval("SHOW autovacuum") != "on":
                print(
                    "WARNING: autovacuum is off on this server: "
                    + (
                        "maintenance vacuums runs and attempts itself"
                        if archive.vacuum
                        else "runs' dead tuples only grow (--no-vacuum)"
                    )
                )
    producer = asyncio.create_task(produce())
    started = time.monotonic()
    print(
        f"{url.split('://')[0]}: {rate} runs/s for {seconds:.0f} s, retention {retention:.0f} s,"
        + (
            f" archive after {archive.archive_settle_seconds:.0f} s into partitions of"
            f" {archive.history_partition_seconds:.0f} s"
            if archive.archive
            else " no archive"
        )
        + ("" if archive.vacuum else ", no vacuum by maintenance")
    )
    header = None
    gc_clock = GcClock()
    since = datetime.now(UTC)
    try:
        while time.monotonic() - started < seconds:
            await asyncio.sleep(every)
            until = datetime.now(UTC)
            finished, p50, p99 = await _lags(cw, since, until)
            p50, p99 = p50 * 1000, p99 * 1000
            sizes = await _sizes(cw)
            if header is None:
                header = [
                    "t s",
                    "runs/s",
                    "lag p50 ms",
                    "lag p99 ms",
                    "RSS MB",
                    "gc ms full/all/max",
                    *sizes,
                ]
                print("  " + "  ".join(f"{h:>16}" for h in header))
            rate_done = finished / (until - since).total_seconds()
            cells = [
                f"{time.monotonic() - started:.0f}",
                f"{rate_done:,.0f}",
                f"{p50:.1f}",
                f"{p99:.1f}",
                f"{_rss_mb():.0f}",
                "{:.0f}/{:.0f}/{:.1f}".format(*gc_clock.take()),
                *sizes.values(),
            ]
            print("  " + "  ".join(f"{c:>16}" for c in cells), flush=True)
            since = until
    finally:
        stop.set()
        producer.cancel()
        await asyncio.gather(producer, *services, return_exceptions=True)
        await cw.store.close()


async def _fresh_pg() -> tuple[str, str]:
    name = f"cwbench_soak_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(PG)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name, PG.rsplit("/", 1)[0] + "/" + name


async def _drop_pg(name: str) -> None:
    conn = await asyncpg.connect(PG)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", action="append", choices=["sqlite", "pg"])
    parser.add_argument("--rate", type=int, default=2000, help="runs enqueued per second")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--retention-seconds", type=float, default=300.0)
    parser.add_argument("--every", type=float, default=60.0, help="seconds between lines")
    parser.add_argument("--settle-seconds", type=float, default=10.0, help="archive after")
    parser.add_argument("--partition-seconds", type=float, default=60.0, help="history's")
    parser.add_argument("--no-archive", action="store_true", help="finished runs stay in runs")
    parser.add_argument(
        "--no-vacuum", action="store_true", help="maintenance leaves runs to autovacuum"
    )
    parser.add_argument("--quick", action="store_true", help="2 min, 500 runs/s, 30 s retention")
    args = parser.parse_args()
    if args.quick:
        args.rate, args.minutes, args.retention_seconds, args.every = 500, 2.0, 30.0, 15.0
    for store in args.store or ["pg"]:
        if store == "sqlite":
            with tempfile.TemporaryDirectory() as folder:
                url = f"sqlite:///{Path(folder) / 'soak.db'}"
                _run(url, args)
        else:
            loop = new_event_loop()
            name, url = loop.run_until_complete(_fresh_pg())
            try:
                _run(url, args)
            finally:
                loop.run_until_complete(_drop_pg(name))
                loop.close()


def _run(url: str, args: argparse.Namespace) -> None:
    runner = asyncio.Runner(loop_factory=new_event_loop)
    with runner:
        archive = MaintenanceConfig(
            archive=not args.no_archive,
            archive_settle_seconds=args.settle_seconds,
            history_partition_seconds=args.partition_seconds,
            vacuum=not args.no_vacuum,
        )
        runner.run(
            _soak(url, args.rate, args.minutes * 60, args.retention_seconds, args.every, archive)
        )


if __name__ == "__main__":
    main()
