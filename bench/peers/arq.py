"""arq 0.28 under the workloads. Settings: max_jobs 100 (default 10), poll_delay 0.05 s
(default 0.5: arq finds due jobs only by polling), keep_result 0, ``_defer_until`` for runs
due later, ``cron(second=...)`` for cron."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime

from arq import create_pool
from arq.connections import ArqRedis, RedisSettings

from lib import adapter, flows
from lib.adapter import Args, Result
from peers import _common

CONCURRENT_ENQUEUES = 200  # arq enqueues one job per call; keep many calls in flight


class Arq:
    def __init__(self, args: Args, cron_jobs: int = 0) -> None:
        self.args = args
        self.env = {"CWBENCH_REDIS_URL": args.redis_url, "CWBENCH_CRON_JOBS": str(cron_jobs)}
        os.environ.update(self.env)
        self.runner = asyncio.Runner()
        self.redis: ArqRedis = self.runner.run(create_pool(RedisSettings.from_dsn(args.redis_url)))

    def close(self) -> None:
        self.runner.run(self.redis.aclose())
        self.runner.close()

    def enqueue(self, items: list[flows.Item]) -> None:
        self.runner.run(self._enqueue(items))

    async def _enqueue(self, items: list[flows.Item]) -> None:
        gate = asyncio.Semaphore(CONCURRENT_ENQUEUES)

        async def one(key: str, at: float | None) -> None:
            defer = None if at is None else datetime.fromtimestamp(at, UTC)
            async with gate:
                await self.redis.enqueue_job("noop", key, _defer_until=defer)

        await asyncio.gather(*(one(k, at) for k, at in items))

    def processes(self, workload: str) -> list[list[str]]:
        return [[sys.executable, "-m", "arq", "peers.arq_app.WorkerSettings"]]

    def system(self) -> flows.System:
        settings = {"max_jobs": 100, "poll_delay": 0.05, "keep_result": 0}
        return flows.System(
            self.enqueue, self.processes, self.args.workdir, self.env, settings=settings
        )


def run(args: Args, body: object, cron_jobs: int = 0) -> Result:
    a = Arq(args, cron_jobs)
    try:
        result: Result = body(a)  # type: ignore[operator]
        return result | {"settings": a.system().settings}
    finally:
        a.close()


def w1(args: Args) -> Result:
    return run(args, lambda a: flows.throughput(a.system(), args.params["n"]))


def w2(args: Args) -> Result:
    items = flows.w2_items(args.params["n"])
    return run(args, lambda a: flows.at_instants(a.system(), "W2", items, args.params["lead"]))


def w3(args: Args) -> Result:
    p = args.params
    items = flows.w3_items(p["n"], p["span"])
    return run(args, lambda a: flows.at_instants(a.system(), "W3", items, p["lead"]))


def w4(args: Args) -> Result:
    p = args.params
    jobs = [f"w4-{i:04d}" for i in range(p["jobs"])]
    return run(args, lambda a: flows.cron(a.system(), jobs, p["seconds"], p["settle"]), p["jobs"])


if __name__ == "__main__":
    adapter.main(
        {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": _common.w5},
        lambda: _common.versions("arq", "redis"),
    )
