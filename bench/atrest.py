"""bench/atrest.py: ten million jobs at rest (DESIGN W5, issue 18 item 3).

Jobs are created through cronwheel's own bulk path (``JobService.create_many``, 10,000
specs per call) up to each size, and at each size the script measures, with every job at
rest (a yearly cron, never due during the run):

- the create rate of the jobs added to reach the size (jobs/s, Python included), one
  ``create_many`` after the other or ``--streams N`` of them in flight at once;
- the scheduler's tick (``Scheduler.run_once()``, in this process, median of 10 after a
  warm-up) and a due herd: 10,000 one-time jobs due at one instant an hour ahead,
  materialised by one ``run_once()`` of a scheduler whose clock is frozen at that instant
  (three herds, one after the other);
- a ``cronwheel scheduler``, a ``cronwheel worker`` and a ``cronwheel api`` process started
  on the store: their RSS after 10 s of serving and after the API requests below (VmRSS;
  VmHWM is the peak);
- the API over loopback (the ``cronwheel api`` process, ``--no-auth``): the job list's first
  page, filtered pages, a deep keyset page (a cursor 90 % of the way down), a job's GET and
  the dashboard's job page (``/ui/jobs/{id}``) — p50 / p95 / max of up to 30 requests;
- bytes per job on disk: PostgreSQL ``pg_total_relation_size`` of ``jobs`` and
  ``audit_log`` and the whole database, SQLite the file (after a checkpoint).

Figures are printed (and written as JSON with ``--json``), never asserted.

    python bench/atrest.py --store pg                          # 10k, 1M, 10M jobs
    python bench/atrest.py --store pg --store sqlite --sizes 10000,1000000
    python bench/atrest.py --quick --store pg --store sqlite   # CI: 1k, 10k jobs

PostgreSQL gets a database ``cwbench_atrest_<pid>``, dropped at the end unless ``--keep
NAME`` names it (then it is kept, and a later run with the same ``--keep`` goes on from
the jobs already in it). SQLite gets a file in a fresh temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import shutil
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from cronwheel.control.service import JobService
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import DEFAULT_TENANT, JobOrder
from cronwheel.engine.scheduler import Scheduler
from cronwheel.store.base import Store
from cronwheel.web.pagination import job_cursor

from lib import proc

DEFAULT_PG = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
BATCH = 10_000
"""Specs per ``create_many`` call."""
HERD = 10_000
"""One-time jobs due at one instant, materialised at each size."""
HERDS = 3
"""Herds materialised at each size, one after the other."""
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney")
NOOP = {"type": "handler", "name": "noop"}
RARE = 10_000
"""One job in this many is in pool ``rare``: a filter that matches almost nothing."""
REPEAT = 30
BUDGET_S = 20.0
"""At most this long per request kind (at least 3 requests): a page that scans 10M jobs
is measured a few times, not thirty."""


def _spec(i: int) -> dict[str, Any]:
    """Job ``i`` at rest: nine in ten a yearly cron (spread over minutes, hours and
    zones, so next-fire order means something), one in ten manual."""
    if i % 10 == 9:
        schedule: dict[str, Any] = {"kind": "manual"}
    else:
        schedule = {
            "kind": "cron",
            "cron": f"{i % 60} {i % 24} 1 1 *",
            "timezone": ZONES[i % len(ZONES)],
        }
    pool = "rare" if i % RARE == RARE // 2 else f"pool-{i % 8}"
    return {"name": f"rest-{i:08d}", "schedule": schedule, "action": NOOP, "pool": pool}


def _ms(times: list[float]) -> dict[str, float]:
    ms = sorted(t * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    return {"p50": round(statistics.median(ms), 2), "p95": round(p95, 2), "max": round(ms[-1], 2)}


def _rss(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Bench:
    def __init__(self, kind: str, store: Store, url: str, workdir: Path, streams: int) -> None:
        self.kind = kind
        self.store = store
        self.url = url
        self.workdir = workdir
        self.service = JobService(store, actor="bench")
        self.created = 0
        self.streams = streams
        """``create_many`` calls in flight at once while creating."""
        self.herds = 0
        """Herds materialised so far (their jobs count on disk too)."""

    async def grow(self, target: int) -> dict[str, Any]:
        """Create jobs up to ``target`` through ``create_many``, ``streams`` batches in
        flight: the rate over all of them and over the last 100,000 (does it fall as the
        tables grow?)."""
        start, first = time.perf_counter(), self.created
        tail_from = max(first, target - 100_000)
        tail_start: float | None = None
        next_report = time.monotonic() + 60

        async def stream() -> None:
            nonlocal tail_start, next_report
            while self.created < target:
                begin = self.created
                size = min(BATCH, target - begin)
                self.created += size  # taken by this stream (one event loop: no race)
                if begin >= tail_from and tail_start is None:
                    tail_start = time.perf_counter()
                await self.service.create_many([_spec(i) for i in range(begin, begin + size)])
                if time.monotonic() > next_report:
                    next_report += 60
                    rate = (self.created - first) / (time.perf_counter() - start)
                    print(f"    ... {self.created:,} jobs ({rate:,.0f} jobs/s)", flush=True)

        await asyncio.gather(*(stream() for _ in range(self.streams)))
        end = time.perf_counter()
        made = target - first
        tail_s = end - tail_start if tail_start is not None else 0.0
        return {
            "created": made,
            "streams": self.streams,
            "create_s": round(end - start, 1),
            "jobs_per_s": round(made / (end - start)) if made else None,
            "last_100k_jobs_per_s": round((target - tail_from) / tail_s) if tail_s else None,
        }

    async def ticks(self) -> dict[str, Any]:
        scheduler = Scheduler(self.store)
        await scheduler.run_once()  # warm: connections, plans, caches
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            result = await scheduler.run_once()
            times.append(time.perf_counter() - t0)
            assert result.runs_inserted == 0, "a job at rest fired"
        return _ms(times)

    async def counts(self) -> dict[str, Any]:
        """Store reads that count jobs: the dashboard overview's jobs by state, and the
        quota check's live jobs (whole, and no further than a quota of 1,000 needs)."""
        reads = {
            "overview count_jobs_by_state": lambda: self.store.count_jobs_by_state(DEFAULT_TENANT),
            "count_live_jobs": lambda: self.store.count_live_jobs(DEFAULT_TENANT),
        }
        if "limit" in inspect.signature(self.store.count_live_jobs).parameters:
            reads["count_live_jobs limit=1001"] = lambda: self.store.count_live_jobs(
                DEFAULT_TENANT, limit=1001
            )
        out = {}
        for label, read in reads.items():
            times = []
            for _ in range(4):
                t0 = time.perf_counter()
                await read()
                times.append(time.perf_counter() - t0)
            out[label] = _ms(times[1:])
        return out

    async def herd(self) -> dict[str, Any]:
        """HERDS times: 10,000 one-time jobs due at T (an hour ahead: no scheduler process
        reaches them), then one tick of a scheduler whose clock stands at T."""
        ticks = []
        for _ in range(HERDS):
            at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
            specs = [
                {
                    "name": f"herd-{self.herds}-{i}",
                    "schedule": {"kind": "once", "at": at.isoformat()},
                    "action": NOOP,
                    "pool": "herd",  # served by no worker: the runs stay pending
                }
                for i in range(HERD)
            ]
            await self.service.create_many(specs)
            self.herds += 1
            scheduler = Scheduler(self.store, clock=FrozenClock(at))
            t0 = time.perf_counter()
            result = await scheduler.run_once()
            ticks.append(round((time.perf_counter() - t0) * 1000, 1))
            assert result.runs_inserted == HERD, result
        return {"jobs": HERD, "tick_ms": ticks}

    async def processes(self, size: int) -> dict[str, Any]:
        """Scheduler, worker and API processes on the store: RSS and the API's latency."""
        py = sys.executable
        port = _free_port()
        db = ["--db", self.url, "--log-level", "warning"]
        commands = {
            "scheduler": [py, "-m", "cronwheel", "scheduler", *db],
            "worker": [py, "-m", "cronwheel", "worker", "--app", "cw.app:worker", *db],
            "api": [py, "-m", "cronwheel", "api", *db, "--no-auth", "--no-access-log", "--port"],
        }
        commands["api"].append(str(port))
        log = self.workdir / f"processes-{size}.log"
        env = proc.bench_env(self.workdir / "records.txt")
        procs = {name: proc.spawn(cmd, env, log) for name, cmd in commands.items()}
        try:
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, timeout=120) as client:
                deadline = time.monotonic() + 60
                while True:
                    proc.check_alive(list(procs.values()), log)
                    try:
                        if (await client.get("/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the API did not answer within 60 s: {log}")
                    await asyncio.sleep(0.2)
                await asyncio.sleep(10)  # ten seconds of serving: ~20 scheduler ticks
                proc.check_alive(list(procs.values()), log)
                idle = {name: _rss(p.pid) for name, p in procs.items()}
                api = await self.requests(client, size)
                proc.check_alive(list(procs.values()), log)
                after = {name: _rss(p.pid) for name, p in procs.items()}
        finally:
            proc.stop(list(procs.values()))
        return {"rss_mib_idle": idle, "rss_mib_after_api": after, "api_ms": api}

    async def requests(self, client: httpx.AsyncClient, size: int) -> dict[str, Any]:
        deep = await self._job(int(size * 0.9))
        middle = await self._job(size // 2)
        paths = {
            "list first page": "/v1/jobs?limit=100",
            "list pool=pool-3 (1/8)": "/v1/jobs?limit=100&pool=pool-3",
            "list kind=manual (1/10)": "/v1/jobs?limit=100&kind=manual",
            f"list pool=rare (1/{RARE:,})": "/v1/jobs?limit=100&pool=rare",
            "list state=paused (none)": "/v1/jobs?limit=100&state=paused",
            "list name_prefix (100)": f"/v1/jobs?limit=100&name_prefix=rest-{size // 200:06d}",
            "list deep keyset (90 %)": "/v1/jobs?limit=100&cursor="
            + job_cursor(JobOrder.CREATED, deep),
            "list order=name deep (90 %)": "/v1/jobs?limit=100&order=name&cursor="
            + job_cursor(JobOrder.NAME, deep),
            "list order=next_fire": "/v1/jobs?limit=100&order=next_fire",
            "get job": f"/v1/jobs/{middle.id}",
            "dashboard job page": f"/ui/jobs/{middle.id}",
        }
        out = {}
        for label, path in paths.items():
            times: list[float] = []
            started = time.monotonic()
            for _ in range(REPEAT + 1):
                t0 = time.perf_counter()
                response = await client.get(path)
                times.append(time.perf_counter() - t0)
                if response.status_code != 200:
                    raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")
                if len(times) > 3 and time.monotonic() - started > BUDGET_S:
                    break
            out[label] = _ms(times[1:]) | {"n": len(times) - 1}  # the first warms caches
            print(f"    {label:32} {out[label]}", flush=True)
        return out

    async def _job(self, i: int) -> Any:
        [job] = await self.store.list_jobs(DEFAULT_TENANT, name=f"rest-{i:08d}", limit=1)
        return job

    async def disk(self, size: int, pg: asyncpg.Connection | None) -> dict[str, Any]:
        jobs = size + HERD * self.herds
        if pg is not None:
            row = await pg.fetchrow(
                "SELECT pg_total_relation_size('jobs') AS jobs,"
                " pg_total_relation_size('audit_log') AS audit,"
                " pg_total_relation_size('runs') AS runs,"
                " pg_database_size(current_database()) AS db"
            )
            return {
                "jobs_table_bytes_per_job": round(row["jobs"] / jobs),
                "audit_log_bytes_per_job": round(row["audit"] / jobs),
                "database_bytes_per_job": round(row["db"] / jobs),
                "database_gib": round(row["db"] / 2**30, 2),
                "runs_table_mib": round(row["runs"] / 2**20, 1),
            }
        path = Path(self.url.removeprefix("sqlite:///"))
        with sqlite3.connect(path) as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        total = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        return {"file_bytes_per_job": round(total / jobs), "file_gib": round(total / 2**30, 2)}


async def run_store(kind: str, sizes: list[int], args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="cwbench-atrest-"))
    pg: asyncpg.Connection | None = None
    name = args.keep or f"cwbench_atrest_{os.getpid()}"
    if kind == "pg":
        from cronwheel.store.postgres import PostgresStore

        admin = await asyncpg.connect(args.pg)
        exists = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if not (args.keep and exists):
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            await admin.execute(f'CREATE DATABASE "{name}"')
        await admin.close()
        url = args.pg.rpartition("/")[0] + "/" + name
        store: Store = await PostgresStore.connect(url)
        pg = await asyncpg.connect(url)
    else:
        from cronwheel.store.sqlite import SqliteStore

        url = f"sqlite:///{workdir / 'atrest.db'}"
        store = await SqliteStore.open(workdir / "atrest.db")
    print(f"{kind}: sizes {', '.join(f'{s:,}' for s in sizes)} ({url})", flush=True)
    results: dict[str, Any] = {}
    bench = Bench(kind, store, url, workdir, args.streams)
    try:
        t0 = time.perf_counter()
        applied = await store.migrate()
        if applied:
            print(f"  migrated: {applied} in {time.perf_counter() - t0:.1f} s", flush=True)
        if pg is not None and args.keep:
            bench.created = await pg.fetchval("SELECT count(*) FROM jobs WHERE name LIKE 'rest-%'")
            bench.herds = await pg.fetchval("SELECT count(*) FROM jobs WHERE name LIKE 'herd-%'")
            bench.herds //= HERD
            if bench.created:
                print(f"  {bench.created:,} jobs already in {name}", flush=True)
        for size in sizes:
            print(f"  {size:,} jobs", flush=True)
            row: dict[str, Any] = {"create": await bench.grow(size)}
            print(f"    create {row['create']}", flush=True)
            if pg is not None:
                # What autovacuum does to a table at rest, before it is read.
                t0 = time.perf_counter()
                await pg.execute("VACUUM ANALYZE")
                row["vacuum_analyze_s"] = round(time.perf_counter() - t0, 1)
            row["tick_ms"] = await bench.ticks()
            print(f"    tick {row['tick_ms']}", flush=True)
            row["counts_ms"] = await bench.counts()
            print(f"    counts {row['counts_ms']}", flush=True)
            row["herd"] = await bench.herd()
            print(f"    herd {row['herd']}", flush=True)
            row |= await bench.processes(size)
            print(f"    rss idle {row['rss_mib_idle']}", flush=True)
            print(f"    rss after api {row['rss_mib_after_api']}", flush=True)
            row["disk"] = await bench.disk(size, pg)
            print(f"    disk {row['disk']}", flush=True)
            results[str(size)] = row
    finally:
        await store.close()
        if pg is not None:
            await pg.close()
            if not args.keep:
                admin = await asyncpg.connect(args.pg)
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                await admin.close()
            else:
                print(f"  kept database {name} (drop it by hand)", flush=True)
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--store", action="append", choices=["sqlite", "pg"], default=[])
    p.add_argument("--quick", action="store_true", help="1,000 and 10,000 jobs (CI)")
    p.add_argument("--sizes", default="10000,1000000,10000000", help="comma-separated, growing")
    p.add_argument("--pg", default=DEFAULT_PG)
    p.add_argument("--keep", metavar="DBNAME", help="PostgreSQL: keep the database (see above)")
    p.add_argument("--json", type=Path, help="write the figures here too")
    p.add_argument(
        "--streams",
        type=int,
        default=1,
        help="create_many calls in flight at once while creating (default 1: one after the other)",
    )
    args = p.parse_args()
    sizes = [1_000, 10_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    if sizes != sorted(sizes):
        p.error("--sizes: give them growing, e.g. 10000,1000000")
    started = time.perf_counter()
    out = {}
    for kind in args.store or ["pg"]:
        out[kind] = asyncio.run(run_store(kind, sizes, args))
    print(f"done in {time.perf_counter() - started:.0f} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
