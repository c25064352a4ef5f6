"""Publish runs per second, per broker (issue 30 item 2): a backlog of immediate publish
jobs drained by one in-process worker, against the machine's NATS JetStream, RabbitMQ
and Redis; beside it, the action alone (the same publishes without store or worker).

Each run's publish waits for its broker's confirmation (JetStream PubAck, a RabbitMQ
publisher confirm, Redis's XADD id through cronwheel's de-duplicating script). Every
broker destination is made for the run and deleted after; the messages are counted on
the broker, so a figure is only printed for runs that all arrived.

    python bench/publish.py                      # 2,000 runs a broker, SQLite
    python bench/publish.py --store pg --runs 5000
    python bench/publish.py --quick              # CI: 100 runs a broker

Figures are printed, never asserted: tests/engine/test_publish.py checks correctness.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import cronwheel
from cronwheel.actions.context import RunContext
from cronwheel.actions.publish import PublishAction
from cronwheel.engine.worker import Worker, WorkerConfig

# Redis database 0, not bench/run's 15: bench/run flushes that one before each peer, and
# every key here is the run's own (a unique stream and its markers, deleted after).
URLS = {
    "nats": os.environ.get("CWBENCH_NATS_URL", "nats://127.0.0.1:4222"),
    "rabbitmq": os.environ.get("CWBENCH_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/"),
    "redis": os.environ.get("CWBENCH_PUBLISH_REDIS_URL", "redis://127.0.0.1:6379/0"),
}
PG = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextlib.asynccontextmanager
async def destination(kind: str) -> AsyncIterator[tuple[str, Any]]:
    """A fresh subject+stream / queue / stream key, and a coroutine counting its messages."""
    unique = f"cwbench{uuid.uuid4().hex[:10]}"
    if kind == "nats":
        import nats

        nc = await nats.connect(URLS[kind])
        js = nc.jetstream()
        await js.add_stream(name=unique, subjects=[f"{unique}.>"])

        async def count() -> int:
            return int((await js.stream_info(unique)).state.messages)

        try:
            yield f"{unique}.runs", count
        finally:
            await js.delete_stream(unique)
            await nc.close()
    elif kind == "rabbitmq":
        import aio_pika

        connection = await aio_pika.connect(URLS[kind])
        channel = await connection.channel()
        queue = await channel.declare_queue(unique)

        async def count() -> int:
            declared = await channel.declare_queue(unique, passive=True)
            return int(declared.declaration_result.message_count or 0)

        try:
            yield f"/{unique}", count
        finally:
            await queue.delete(if_unused=False, if_empty=False)
            await connection.close()
    else:
        import redis.asyncio as aioredis

        client = aioredis.from_url(URLS[kind])

        async def count() -> int:
            return int(await client.xlen(unique))

        try:
            yield unique, count
        finally:
            markers = [k async for k in client.scan_iter(f"cronwheel:published:{{{unique}}}:*")]
            await client.delete(unique, *markers)
            await client.aclose()


@contextlib.asynccontextmanager
async def store_url(store: str) -> AsyncIterator[str]:
    if store == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield f"sqlite:///{Path(folder) / 'bench.db'}"
        return
    name = f"cwbench_publish_{os.getpid()}"
    admin = await asyncpg.connect(PG)
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        yield PG.rsplit("/", 1)[0] + f"/{name}"
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


async def through_a_worker(kind: str, runs: int, store: str, concurrency: int) -> float:
    """Runs/s: a backlog of ``runs`` immediate publish jobs, drained by one worker."""
    async with store_url(store) as url, destination(kind) as (to, count):
        async with await cronwheel.connect(url) as cw:
            action = {"type": "publish", "broker": "bench", "to": to, "body": {"n": 1}}
            specs = [
                {"name": f"p{i}", "schedule": {"kind": "immediate"}, "action": action}
                for i in range(runs)
            ]
            for start in range(0, runs, 1000):
                await cw.create_many(specs[start : start + 1000])
            config = WorkerConfig(pools={"default": concurrency}, brokers={"bench": URLS[kind]})
            worker = Worker(cw.store, config, webhook_secret=b"bench-secret")
            stop = asyncio.Event()
            began = time.perf_counter()
            task = asyncio.create_task(worker.run(stop))
            # The worker has no event for "this many completed": its counter, read every
            # 10 ms, ends the drain within 10 ms of its last completion.
            while worker.completed < runs:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            took = time.perf_counter() - began
            stop.set()
            await task
        arrived = await count()
        if arrived != runs:
            raise SystemExit(f"{kind}: {arrived} of {runs} messages arrived")
    return runs / took


async def action_alone(kind: str, runs: int, concurrency: int) -> float:
    """Publishes/s of the action itself, ``concurrency`` at once, no store or worker."""
    async with destination(kind) as (to, count):
        action = PublishAction({"bench": URLS[kind]}, b"bench-secret")
        spec = {"type": "publish", "broker": "bench", "to": to, "body": {"n": 1}}
        at = datetime.now(UTC)
        gate = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            ctx = RunContext(
                run_id=i,
                job_id=f"job-{i}",
                job_name="bench",
                scheduled_for=at,
                attempt=1,
                fence=1,
                payload=None,
                checkpoint_state=None,
                tenant_id="default",
            )
            async with gate:
                outcome = await action.execute(spec, ctx, 30)
            if outcome.error_class:
                raise SystemExit(f"{kind}: {outcome.error_class}: {outcome.error_message}")

        await action.execute(spec | {"to": to}, _warm(at), 30)  # connect before the clock
        began = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(runs)))
        took = time.perf_counter() - began
        await action.close()
        if await count() != runs + 1:
            raise SystemExit(f"{kind}: messages missing")
    return runs / took


def _warm(at: datetime) -> RunContext:
    return RunContext(
        run_id=0,
        job_id="warm-up",
        job_name="bench",
        scheduled_for=at,
        attempt=1,
        fence=1,
        payload=None,
        checkpoint_state=None,
        tenant_id="default",
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "pg"), default="sqlite")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--kind", action="append", choices=tuple(URLS), default=None)
    parser.add_argument("--quick", action="store_true", help="100 runs a broker (CI)")
    args = parser.parse_args()
    runs = 100 if args.quick else args.runs
    print(f"{runs} runs a broker, store {args.store}, {args.concurrency} at once")
    print("| broker | through a worker (runs/s) | the action alone (publishes/s) |")
    print("|---|---:|---:|")
    for kind in args.kind or tuple(URLS):
        worker_rate = await through_a_worker(kind, runs, args.store, args.concurrency)
        alone_rate = await action_alone(kind, runs, args.concurrency)
        print(f"| {kind} | {worker_rate:,.0f} | {alone_rate:,.0f} |", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
