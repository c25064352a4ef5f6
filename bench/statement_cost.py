"""bench/statement_cost.py: what claiming and completing a run costs in PostgreSQL.

W1's rate is bounded by CPU (``bench/cpu_budget.py``); this isolates the store's share.
One process, one connection at a time, no worker: N runs of one manual job enqueued,
then claimed 2,500 a statement and completed 1,000 a statement, as a saturated worker
does, through cronwheel's own store calls (``claim_runs``, ``complete_runs``). Printed
per run: the wall time of each call (the server's work and the round trip) and the CPU
time this process spent in it (asyncpg's encoding and decoding, cronwheel's rows), so
wall less client CPU is about the server's share.

For scale, the same loop over a lean queue table, written here and nowhere in
cronwheel: the columns a claim needs, two partial indexes, a claim that is one UPDATE of
the first N pending rows and a completion that deletes the row and appends it to a
history table with two indexes (the shape of pgqueuer's queue and log). It has no
fairness between tenants, no attempts, no outbox, no job join, no overlap policies:
it is the floor a redesign could approach, not a like-for-like system.

    python bench/statement_cost.py                 # 20,000 runs, 3 rounds each
    python bench/statement_cost.py --runs 100000 --rounds 1
    python bench/statement_cost.py --claim 250 --only cronwheel --only cronwheel-full
    python bench/statement_cost.py --only cronwheel --ddl "DROP INDEX runs_tenant_state"

``cronwheel`` claims as the store chooses (here the lean claim: one tenant's runs, no
policy), ``cronwheel-full`` with the full claim statement on the same data (decision
0047). ``--ddl`` runs SQL on the bench database after its migration (a piece of the
schema taken away, to see what it costs: decision 0035). The server's CPU is read from
/proc for this database's backends (the server must run on this machine).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import asyncpg
import cronwheel
from cronwheel.core.model import AttemptOutcome, RunState
from cronwheel.store.base import Completion

PG = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
CLAIM = 2_500  # --claim: a saturated W1 worker's claims are of 250 to 2,500
COMPLETE = 1_000
DDL: list[str] = []  # --ddl: run after the migration, before the runs are enqueued
DB = f"cwbench_stmt_{os.getpid()}"


def _backends() -> list[int]:
    """The pids of the server processes connected to this bench's database (their
    command line names it: ``postgres: user db host(port) state``)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{name}/cmdline", "rb") as f:
                if f" {DB} ".encode() in f.read():
                    found.append(int(name))
    return found


def _server_ns(pids: list[int]) -> int:
    """CPU time the processes ``pids`` have run, in ns (/proc/PID/schedstat)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


def _zero() -> dict[str, float]:
    return {"claim": 0.0, "complete": 0.0}


@dataclass
class Timings:
    """Wall time, this process's CPU time and the server backends' CPU time, summed per
    step (``claim``, ``complete``). The backends are this database's server processes
    (the server is on this machine): read around each step, so the server's CPU is the
    statements' own, not the round trip's wait."""

    wall: dict[str, float] = field(default_factory=_zero)
    cpu: dict[str, float] = field(default_factory=_zero)
    server: dict[str, float] = field(default_factory=_zero)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        pids = _backends()
        server = _server_ns(pids)
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        self.wall[name] += time.perf_counter() - wall
        self.cpu[name] += time.process_time() - cpu
        self.server[name] += (_server_ns(pids) - server) / 1e9

    def per_run(self, n: int) -> dict[str, float]:
        us = {f"{k}_wall_us": v / n * 1e6 for k, v in self.wall.items()}
        us |= {f"{k}_client_cpu_us": v / n * 1e6 for k, v in self.cpu.items()}
        us |= {f"{k}_server_cpu_us": v / n * 1e6 for k, v in self.server.items()}
        us["total_wall_us"] = us["claim_wall_us"] + us["complete_wall_us"]
        us["total_server_cpu_us"] = us["claim_server_cpu_us"] + us["complete_server_cpu_us"]
        return us


def _dsn(db: str) -> str:
    return PG.rsplit("/", 1)[0] + "/" + db


async def _fresh() -> None:
    admin = await asyncpg.connect(PG)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {DB}")
        await admin.execute(f"CREATE DATABASE {DB}")
    finally:
        await admin.close()


async def _drop() -> None:
    admin = await asyncpg.connect(PG)
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    finally:
        await admin.close()


async def cronwheel_round(n: int, *, lean: bool = True) -> dict[str, float]:
    """The store's own calls; ``lean``: as the store chooses (the lean claim, for this one
    tenant's runs), else the full claim statement on the same data (decision 0047)."""
    await _fresh()
    cw = await cronwheel.connect(_dsn(DB))
    try:
        store = cw.store
        # A store from before decision 0047 has one claim statement: it runs as it is,
        # so that this script measures an older commit too (before and after).
        has_two = hasattr(store, "claims_by_statement")
        if has_two:
            store._lean_claims = lean  # type: ignore[attr-defined]
        for ddl in DDL:
            await store._execute(ddl)  # type: ignore[attr-defined]
        job = await cw.create(
            name="q", schedule={"kind": "manual"}, action={"type": "handler", "name": "noop"}
        )
        for i in range(0, n, 5_000):
            await cw.enqueue(job.id, [f"k{j}" for j in range(i, min(n, i + 5_000))])
        now = await store.now()
        timings, done = Timings(), 0
        while True:
            with timings.step("claim"):
                claim = await store.claim_runs(
                    "bench",
                    ["default"],
                    limit=CLAIM,
                    now=now,
                    prefetch_until=now + timedelta(seconds=2),
                    lease_seconds=30,
                )
            if not len(claim):
                break
            completions = sorted(
                (
                    Completion(
                        run_id=r.run.id,
                        fence=r.run.fence,
                        worker_id="bench",
                        state=RunState.SUCCEEDED,
                        outcome=AttemptOutcome.SUCCEEDED,
                        started_at=now,
                        finished_at=now,
                        lag_seconds=0.001,
                    )
                    for r in claim
                ),
                key=lambda d: d.run_id,
            )
            for i in range(0, len(completions), COMPLETE):
                with timings.step("complete"):
                    await store.complete_runs(completions[i : i + COMPLETE])
            done += len(completions)
        assert done == n, f"claimed {done} of {n}"
        if has_two:
            used = store.claims_by_statement  # type: ignore[attr-defined]
            assert bool(used["lean"]) == lean, f"claims by statement: {dict(used)}"
    finally:
        await cw.close()
        await _drop()
    return timings.per_run(n)


LEAN_SCHEMA = """
CREATE TABLE queue (
    id bigserial PRIMARY KEY, tenant_id text NOT NULL, job_id uuid NOT NULL,
    pool text NOT NULL, priority int NOT NULL, available_at timestamptz NOT NULL,
    state text NOT NULL, fence int NOT NULL DEFAULT 0, attempt int NOT NULL DEFAULT 0,
    lease_owner text, lease_expires_at timestamptz, payload jsonb);
CREATE INDEX queue_pending ON queue (pool, tenant_id, priority, available_at)
    WHERE state = 'pending';
CREATE INDEX queue_leases ON queue (lease_expires_at) WHERE state = 'running';
CREATE TABLE history (
    id bigint PRIMARY KEY, tenant_id text, job_id uuid, state text, attempt int,
    worker_id text, started_at timestamptz, finished_at timestamptz, payload jsonb);
CREATE INDEX history_job ON history (job_id, finished_at);
CREATE INDEX history_finished ON history (finished_at);
"""
LEAN_ENQUEUE = """
INSERT INTO queue (tenant_id, job_id, pool, priority, available_at, state, payload)
SELECT 'default', '00000000-0000-0000-0000-000000000001', 'default', 2, now(), 'pending',
       to_jsonb('k' || g)
FROM generate_series($1::int, $2::int) AS g"""
LEAN_CLAIM = """
UPDATE queue AS q
SET state = 'running', fence = q.fence + 1, attempt = q.attempt + 1, lease_owner = $1,
    lease_expires_at = now() + interval '30 seconds'
WHERE q.id = ANY (ARRAY(
    SELECT id FROM queue
    WHERE state = 'pending' AND pool = 'default' AND tenant_id = 'default'
    ORDER BY priority, available_at LIMIT $2 FOR UPDATE SKIP LOCKED))
RETURNING q.*"""
LEAN_COMPLETE = """
WITH done AS (SELECT * FROM unnest($1::bigint[], $2::int[]) AS d(id, fence)),
gone AS (
    DELETE FROM queue AS q USING done WHERE q.id = done.id AND q.fence = done.fence
    RETURNING q.*)
INSERT INTO history
SELECT id, tenant_id, job_id, 'succeeded', attempt, lease_owner, now(), now(), payload
FROM gone"""


async def lean_round(n: int) -> dict[str, float]:
    await _fresh()
    conn = await asyncpg.connect(_dsn(DB))
    try:
        await conn.execute(LEAN_SCHEMA)
        for i in range(0, n, 5_000):
            await conn.execute(LEAN_ENQUEUE, i, min(n, i + 5_000) - 1)
        timings, done = Timings(), 0
        while True:
            with timings.step("claim"):
                rows = await conn.fetch(LEAN_CLAIM, "bench", CLAIM)
            if not rows:
                break
            rows.sort(key=lambda r: r["id"])
            for i in range(0, len(rows), COMPLETE):
                batch = rows[i : i + COMPLETE]
                with timings.step("complete"):
                    await conn.execute(
                        LEAN_COMPLETE, [r["id"] for r in batch], [r["fence"] for r in batch]
                    )
            done += len(rows)
        assert done == n, f"claimed {done} of {n}"
    finally:
        await conn.close()
        await _drop()
    return timings.per_run(n)


async def main() -> None:
    global CLAIM  # --claim sets it: the rounds read it, as they read COMPLETE
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--only",
        choices=[name for name, _ in MEASURES],
        action="append",
        help="measure only these (repeatable; default: all, alternating)",
    )
    p.add_argument("--claim", type=int, default=CLAIM, help="runs a claim (%(default)s)")
    p.add_argument(
        "--ddl",
        action="append",
        default=[],
        help="SQL run on the store's database after its migration (repeatable; "
        "not on the lean table)",
    )
    a = p.parse_args()
    CLAIM = a.claim
    DDL.extend(a.ddl)
    print(
        f"µs per run, {a.runs:,} runs, claims of {CLAIM:,}, completions of {COMPLETE:,}; "
        "wall (client CPU, server CPU)\n"
        f"{'':<14} {'claim':>18} {'completion':>18} {'total wall':>10} {'server cpu':>10}"
    )
    for _ in range(a.rounds):
        for name, measure in MEASURES:
            if a.only and name not in a.only:
                continue
            r = await measure(a.runs)
            print(
                f"{name:<14} {_cell(r, 'claim'):>18} {_cell(r, 'complete'):>18} "
                f"{r['total_wall_us']:>10.1f} {r['total_server_cpu_us']:>10.1f}",
                flush=True,
            )


def _cell(r: dict[str, float], step: str) -> str:
    return (
        f"{r[f'{step}_wall_us']:.1f} ({r[f'{step}_client_cpu_us']:.1f}, "
        f"{r[f'{step}_server_cpu_us']:.1f})"
    )


async def _full_claim_round(n: int) -> dict[str, float]:
    return await cronwheel_round(n, lean=False)


MEASURES = (
    ("cronwheel", cronwheel_round),
    ("cronwheel-full", _full_claim_round),
    ("lean-table", lean_round),
)


if __name__ == "__main__":
    asyncio.run(main())
