"""bench/dashboard.py: the server time of every dashboard page on a large store.

The goal (issue 15): no page slower than 300 ms of server time with 100,000 jobs and
1,000,000 runs in the store. The store is filled through cronwheel's own store calls (jobs
in batches of 10,000; runs enqueued to manual jobs, then claimed and completed in batches,
2 % of them dead), then each page is requested in-process (the API app over httpx's ASGI
transport: server time, no network) and its p50 / p95 / max are printed. Figures are
printed, never asserted.

    python bench/dashboard.py --store pg --store sqlite              # 100k jobs, 1M runs
    python bench/dashboard.py --quick --store sqlite --store pg      # CI: 2k jobs, 10k runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from cronwheel.api.app import create_app
from cronwheel.control.service import JobService
from cronwheel.core.clock import SystemClock
from cronwheel.core.model import DEFAULT_TENANT, AttemptOutcome, JobOrder, RunState
from cronwheel.dashboard.live import SharedReads
from cronwheel.store.base import Completion, Store
from cronwheel.web.auth import AuthConfig
from cronwheel.web.pagination import job_cursor

DEFAULT_PG = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney")
BATCH = 10_000
HISTORY = timedelta(days=30)
RUN_JOBS = 1_000
"""Manual jobs the runs are enqueued to (the job page of one shows a long history)."""
PAGES = (
    "/ui/",
    "/ui/live/overview",
    "/ui/jobs",
    "/ui/jobs?state=paused",
    "/ui/jobs?name=job-{mid}",
    "/ui/jobs?order=-name",
    "/ui/jobs?order=name&cursor={name_cursor}",
    "/ui/jobs?order=next_fire",
    "/ui/jobs?order=-next_fire&cursor={fire_cursor}",
    "/ui/jobs/{job}",
    "/ui/jobs/{run_job}",
    "/ui/runs/{run}",
    "/ui/runs/{dead_run}",
    "/ui/dead",
    "/ui/workers",
    "/ui/admin",
)


@dataclass
class Scene:
    job: str
    run_job: str
    run: int
    dead_run: int
    mid: int


def _spec(i: int) -> dict[str, Any]:
    kind = i % 10
    action = {"type": "webhook", "url": "http://127.0.0.1:9/hook"}
    if kind < 6:
        schedule: dict[str, Any] = {
            "kind": "cron",
            "cron": f"{i % 60} {i % 24} * * *",
            "timezone": ZONES[i % len(ZONES)],
        }
    elif kind < 9:
        schedule = {"kind": "interval", "every_seconds": 60 + i % 3600}
    else:
        schedule = {"kind": "manual"}
    return {"name": f"job-{i}", "schedule": schedule, "action": action, "pool": f"pool-{i % 8}"}


async def fill(store: Store, jobs: int, runs: int) -> Scene:
    service = JobService(store, clock=SystemClock(), actor="bench")
    started = time.perf_counter()
    ids: list[str] = []
    for first in range(0, jobs, BATCH):
        created = await service.create_many(
            [_spec(i) for i in range(first, min(jobs, first + BATCH))]
        )
        ids += [j.id for j in created]
    print(f"  {jobs:,} jobs in {time.perf_counter() - started:.1f} s", flush=True)
    manual = await service.create_many(
        [
            {
                "name": f"runs-{k}",
                "schedule": {"kind": "manual"},
                "pool": "history",
                "action": {"type": "handler", "name": "noop"},
            }
            for k in range(RUN_JOBS)
        ]
    )
    started = time.perf_counter()
    per_job = max(1, runs // RUN_JOBS)
    done = 0
    first_run = last_dead = 0
    worker = f"bench-{uuid.uuid4().hex[:6]}"
    # History as a store holds it: the runs finished over the last 30 days, not all in the
    # last minute (the overview reads the last hour; a job's page, the newest runs).
    total = per_job * len(manual)
    for k, job in enumerate(manual):
        await service.enqueue(job.id, [None] * per_job)
        if k % 20 == 19 or k == len(manual) - 1:
            while True:
                now = datetime.now(UTC)
                claim = await store.claim_runs(
                    worker,
                    ["history"],
                    limit=5000,
                    now=now,
                    prefetch_until=now,
                    lease_seconds=300,
                )
                if not claim:
                    break
                completions = []
                for n, c in enumerate(claim):
                    dead = (done + n) % 50 == 0
                    finished = now - HISTORY * (1 - (done + n) / total)
                    completions.append(
                        Completion(
                            run_id=c.run.id,
                            fence=c.run.fence,
                            worker_id=worker,
                            state=RunState.DEAD if dead else RunState.SUCCEEDED,
                            outcome=AttemptOutcome.FAILED if dead else AttemptOutcome.SUCCEEDED,
                            started_at=now,
                            finished_at=finished,
                            lag_seconds=0.001,
                            error_class="HTTPStatusError" if dead else None,
                            error_message="503 Service Unavailable" if dead else None,
                            reason="retries exhausted" if dead else None,
                        )
                    )
                    if dead:
                        last_dead = c.run.id
                    first_run = first_run or c.run.id
                await store.complete_runs(completions)
                done += len(claim)
    print(f"  {done:,} runs (2 % dead) in {time.perf_counter() - started:.1f} s", flush=True)
    return Scene(ids[len(ids) // 2], manual[0].id, first_run, last_dead, jobs // 2)


async def measure(store: Store, scene: Scene, repeat: int) -> list[tuple[str, int, list[float]]]:
    app = create_app(store, auth=AuthConfig(disabled=True))
    # Every request reads the store: a live page's one-second shared read would otherwise
    # answer from memory, and this measures what a read costs.
    app.state.dashboard_reads = SharedReads(ttl=0.0)
    # The sorted orders from the middle of the list: a cursor after the job in the middle.
    middle = await store.get_job(DEFAULT_TENANT, scene.job)
    assert middle is not None
    cursors = {
        "name_cursor": job_cursor(JobOrder.NAME, middle),
        "fire_cursor": job_cursor(JobOrder.NEXT_FIRE_DESC, middle),
    }
    rows = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b") as c:
        for template in PAGES:
            path = template.format(**scene.__dict__, **cursors)
            times = []
            status = 0
            for _ in range(repeat + 1):
                t = time.perf_counter()
                response = await c.get(path)
                times.append(time.perf_counter() - t)
                status = response.status_code
            rows.append((template, status, times[1:]))  # the first warms caches
    return rows


async def run_store(
    kind: str, jobs: int, runs: int, repeat: int, pg: str, keep: str | None
) -> None:
    print(f"{kind}: {jobs:,} jobs, {runs:,} runs", flush=True)
    if kind == "sqlite":
        from cronwheel.store.sqlite import SqliteStore

        folder = tempfile.mkdtemp(prefix="cwbench-ui-")
        store: Store = await SqliteStore.open(Path(folder) / "ui.db")
        cleanup = None
    else:
        from cronwheel.store.postgres import PostgresStore

        name = keep or f"cwbench_ui_{os.getpid()}"
        admin = await asyncpg.connect(pg)
        exists = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if not (keep and exists):
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            await admin.execute(f'CREATE DATABASE "{name}"')
        await admin.close()
        store = await PostgresStore.connect(pg.rpartition("/")[0] + "/" + name)

        async def cleanup() -> None:
            if keep:
                return  # measured again with the same --keep, without filling it again
            admin = await asyncpg.connect(pg)
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await admin.close()

    try:
        await store.migrate()
        saved = Path(tempfile.gettempdir()) / f"{keep}.scene.json" if keep else None
        if saved is not None and saved.exists() and kind == "pg":
            scene = Scene(**json.loads(saved.read_text()))
            print(f"  reusing database {keep} (filled earlier)")
        else:
            scene = await fill(store, jobs, runs)
            if kind == "pg":
                # What autovacuum does to tables at rest: without it the planner reads a
                # million dead index entries of the runs the fill claimed and completed.
                conn = await asyncpg.connect(pg.rpartition("/")[0] + "/" + name)
                await conn.execute("VACUUM ANALYZE")
                await conn.close()
            if saved is not None:
                saved.write_text(json.dumps(scene.__dict__))
        print(f"  {'page':48} {'status':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
        for path, status, times in await measure(store, scene, repeat):
            ms = sorted(t * 1000 for t in times)
            p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
            print(
                f"  {path:48} {status:>6} {statistics.median(ms):>8.1f} {p95:>8.1f} {ms[-1]:>8.1f}",
                flush=True,
            )
    finally:
        await store.close()
        if cleanup is not None:
            await cleanup()


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--store", action="append", choices=["sqlite", "pg"], default=[])
    p.add_argument("--quick", action="store_true", help="2,000 jobs and 10,000 runs (CI)")
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--pg", default=DEFAULT_PG)
    p.add_argument(
        "--keep",
        metavar="DBNAME",
        help="PostgreSQL: keep the filled database under this name and, when it exists, "
        "measure it again without filling it (drop it by hand afterwards)",
    )
    args = p.parse_args()
    jobs, runs, repeat = (2_000, 10_000, 5) if args.quick else (args.jobs, args.runs, args.repeat)
    for kind in args.store or ["sqlite", "pg"]:
        asyncio.run(run_store(kind, jobs, runs, repeat, args.pg, args.keep))


if __name__ == "__main__":
    sys.exit(main())
