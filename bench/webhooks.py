"""W7: tenant A's burst of webhook runs against a realistic receiver, tenant B's one run a
second beside it, on one real ``cronwheel worker`` process (issue 26).

The receiver (tests/e2e/receiver.py, its own process) answers after a latency drawn
between --latency bounds and serves --receiver-connections connections at once. A
enqueues --burst runs at once; B enqueues one run a second for --b-seconds. Printed:
A's drain time and rate, B's start lag (p50, p99, max; the attempt's lag as the worker
recorded it) against B alone beforehand, the worker's longest heartbeat silence (how
old its record in the store got: past its lease, its runs are rescued as lost), and how
every attempt ended (a `lost` one is a defect here).

    python bench/webhooks.py --store pg --burst 1000
    python bench/webhooks.py --store pg --burst 20000 --worker-arg=--webhook-connections=400

Figures are printed, never asserted: tests/e2e/test_webhook_burst.py checks correctness.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import cronwheel

REPO = Path(__file__).resolve().parents[1]
PG = os.environ.get("CRONWHEEL_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
ENV = {**os.environ, "PYTHONPATH": str(REPO), "CRONWHEEL_WEBHOOK_SECRET": "bench-secret"}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Reader:
    """Counts and lags read straight from the store's tables (either store)."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def rows(self, sql_pg: str, sql_lite: str, *args: Any) -> list[Any]:
        if self.url.startswith("postgresql"):
            conn = await asyncpg.connect(self.url)
            try:
                return list(await conn.fetch(sql_pg, *args))
            finally:
                await conn.close()
        path = self.url.removeprefix("sqlite:///")
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
            return conn.execute(sql_lite, args).fetchall()

    async def unfinished(self, job_id: str) -> int:
        rows = await self.rows(
            "SELECT count(*) FROM runs WHERE job_id = $1 AND state IN ('pending', 'running')",
            "SELECT count(*) FROM runs WHERE job_id = ? AND state IN ('pending', 'running')",
            job_id,
        )
        return int(rows[0][0])

    async def lags(self, job_id: str) -> list[float]:
        rows = await self.rows(
            "SELECT lag_seconds FROM all_attempts WHERE job_id = $1 AND attempt = 1"
            " ORDER BY run_id",
            "SELECT lag_seconds FROM attempts WHERE job_id = ? AND attempt = 1 ORDER BY run_id",
            job_id,
        )
        return [float(r[0]) for r in rows if r[0] is not None]

    async def outcomes(self) -> dict[str, int]:
        rows = await self.rows(
            "SELECT outcome, count(*) FROM all_attempts GROUP BY outcome",
            "SELECT outcome, count(*) FROM attempts GROUP BY outcome",
        )
        return {str(o): int(n) for o, n in rows}

    async def heartbeat_age(self, worker_id_part: str) -> float | None:
        rows = await self.rows(
            "SELECT extract(epoch FROM now() - last_seen_at) FROM workers WHERE id LIKE $1",
            "SELECT (strftime('%s','now') * 1000000 - last_seen_at) / 1e6 FROM workers"
            " WHERE id LIKE ?",
            f"%{worker_id_part}%",
        )
        return float(rows[0][0]) if rows else None


async def bench(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="cw-webhooks-"))
    db_name = None
    if args.store == "pg":
        db_name = f"cw_webhooks_{uuid.uuid4().hex[:8]}"
        admin = await asyncpg.connect(PG)
        await admin.execute(f'CREATE DATABASE "{db_name}"')
        await admin.close()
        url = PG.rpartition("/")[0] + f"/{db_name}"
    else:
        url = f"sqlite:///{work / 'bench.db'}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        port_file = work / "port"
        receiver = spawn(
            [
                "-m",
                "tests.e2e.receiver",
                "--port-file",
                str(port_file),
                "--log",
                str(work / "received.log"),
                "--latency-min",
                str(args.latency[0]),
                "--latency-max",
                str(args.latency[1]),
                "--connections",
                str(args.receiver_connections),
            ]
        )
        procs.append(receiver)
        while not port_file.exists():  # noqa: ASYNC110 (a file another process writes)
            await asyncio.sleep(0.05)
        target = f"http://127.0.0.1:{port_file.read_text()}"
        async with await cronwheel.connect(url) as cw:
            now = datetime.now(UTC)
            for tenant in ("a", "b"):
                await cw.store.ensure_tenant(tenant, tenant, now=now)
            manual: dict[str, Any] = {"schedule": {"kind": "manual"}}
            a = await cw.create(
                "a", name="burst", action={"type": "webhook", "url": f"{target}/a"}, **manual
            )
            # B's receiver is another target (origin) unless told: tenants have their own.
            b_target = (
                target if args.b_target == "same" else target.replace("127.0.0.1", "localhost")
            )
            b = await cw.create(
                "b", name="steady", action={"type": "webhook", "url": f"{b_target}/b"}, **manual
            )
            worker = spawn(
                [
                    *("-m", "cronwheel", "worker", "--db", url, "--webhook-allow", "127.0.0.1"),
                    *("--webhook-allow", "::1"),
                    *("--log-format", "json", *args.worker_arg),
                ],
                log=work / "worker.log",
            )
            procs.append(worker)
            reader = Reader(url)
            while await reader.heartbeat_age(f"-{worker.pid}-") is None:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            # B alone first: its idle lag, the yardstick of its lag during the burst.
            alone = await steady(cw, b.id, args.alone, reader)
            silence = 0.0
            started = time.monotonic()
            for i in range(0, args.burst, 5000):
                payloads = [{"n": n} for n in range(i, min(args.burst, i + 5000))]
                await cw.enqueue(a.id, payloads, tenant_id="a")
            enqueued = time.monotonic() - started

            async def watch() -> None:
                nonlocal silence
                while True:
                    age = await reader.heartbeat_age(f"-{worker.pid}-")
                    silence = max(silence, age or 0.0)
                    await asyncio.sleep(0.2)

            watcher = asyncio.create_task(watch())

            async def drain() -> float:
                while await reader.unfinished(a.id) > 0:
                    if time.monotonic() - started > args.timeout:
                        print(f"timed out after {args.timeout} s with A's runs unfinished")
                        break
                    await asyncio.sleep(0.05)
                return time.monotonic() - started

            drainer = asyncio.create_task(drain())
            busy = await steady(cw, b.id, args.b_seconds, reader, skip=len(alone))
            drained = await drainer
            watcher.cancel()
            outcomes = await reader.outcomes()
        print(
            f"W7 {args.store} burst={args.burst} latency={args.latency[0]:g}-{args.latency[1]:g}s"
            f" receiver_connections={args.receiver_connections} b_target={args.b_target}"
            f" worker={' '.join(args.worker_arg)}"
        )
        print(
            f"  A: {args.burst} runs enqueued in {enqueued:.2f} s, drained in {drained:.1f} s"
            f" ({args.burst / drained:,.0f} runs/s)"
        )
        print(f"  B alone:  {summary(alone)}")
        print(f"  B beside: {summary(busy)}")
        print(f"  worker heartbeat silence max {silence:.1f} s; attempts {outcomes}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        if db_name is not None:
            admin = await asyncpg.connect(PG)
            await admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
            await admin.close()


def spawn(args: list[str], log: Path | None = None) -> subprocess.Popen[bytes]:
    """``python ARGS`` from the repository, its output to ``log`` (else inherited)."""
    out = open(log, "wb") if log else None  # noqa: SIM115 (the child keeps it)
    return subprocess.Popen(
        [sys.executable, *args], cwd=REPO, env=ENV, stdout=out, stderr=subprocess.STDOUT
    )


async def steady(
    cw: cronwheel.JobService, job_id: str, seconds: int, reader: Reader, skip: int = 0
) -> list[float]:
    """One B run a second for ``seconds``; their start lags once all have started."""
    for _ in range(seconds):
        second = time.monotonic()
        await cw.enqueue(job_id, [{"t": time.time()}], tenant_id="b")
        await asyncio.sleep(max(0.0, second + 1 - time.monotonic()))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        lags = await reader.lags(job_id)
        if len(lags) >= skip + seconds:
            return lags[skip:]  # in run order: the first `skip` ran before the burst
        await asyncio.sleep(0.1)
    return (await reader.lags(job_id))[skip:]


def summary(lags: list[float]) -> str:
    if not lags:
        return "no runs"
    ms = [x * 1000 for x in lags]
    return (
        f"{len(ms)} runs, lag p50 {statistics.median(ms):.0f} ms, p99 {pct(ms, 99):.0f} ms,"
        f" max {max(ms):.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["pg", "sqlite"], default="pg")
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument(
        "--latency",
        type=lambda s: tuple(float(x) for x in s.split(":")),
        default=(0.02, 0.2),
        help="MIN:MAX seconds the receiver takes to answer (uniform)",
    )
    parser.add_argument("--receiver-connections", type=int, default=100)
    parser.add_argument(
        "--b-target",
        choices=["other", "same"],
        default="other",
        help="B's webhooks go to another origin of the receiver (localhost), or the same",
    )
    parser.add_argument("--b-seconds", type=int, default=20)
    parser.add_argument("--alone", type=int, default=5, help="B's runs before the burst")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument(
        "--worker-arg", action="append", default=[], help="passed to cronwheel worker"
    )
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
