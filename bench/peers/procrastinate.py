"""procrastinate 3.10 under the workloads. Settings: ``procrastinate worker`` with
``--concurrency 10`` (default 1; 10 did best of 10, 30 and 100 on W1), LISTEN/NOTIFY on
(default), ``batch_defer_async``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime

from lib import adapter, flows
from lib.adapter import Args, Result
from peers import _common

CONCURRENCY = int(os.environ.get("CWBENCH_PROCRASTINATE_CONCURRENCY", "10"))
CHUNK = 5_000  # jobs per batch_defer_async


class Procrastinate:
    def __init__(self, args: Args, cron_jobs: int = 0) -> None:
        self.args = args
        self.env = {"CWBENCH_PG_DSN": args.pg_dsn, "CWBENCH_CRON_JOBS": str(cron_jobs)}
        os.environ.update(self.env)  # before the app module reads it
        subprocess.run(
            [*self._cli(), "schema", "--apply"], env=os.environ, check=True, capture_output=True
        )
        from peers import procrastinate_app

        self.app_module = procrastinate_app
        self.runner = asyncio.Runner()
        self.runner.run(self._open())

    async def _open(self) -> None:
        await self.app_module.app.open_async()  # an awaitable, not a coroutine

    def _cli(self) -> list[str]:
        return [sys.executable, "-m", "procrastinate", "--app", "peers.procrastinate_app.app"]

    def close(self) -> None:
        self.runner.run(self.app_module.app.close_async())
        self.runner.close()

    def enqueue(self, items: list[flows.Item]) -> None:
        task = self.app_module.noop
        by_instant: dict[float | None, list[str]] = defaultdict(list)
        for key, at in items:
            by_instant[at].append(key)
        self.runner.run(self._defer(task, by_instant))

    async def _defer(self, task: object, by_instant: dict[float | None, list[str]]) -> None:
        # One batch per distinct instant (schedule_at is per batch); at most 20 at once.
        gate = asyncio.Semaphore(20)

        async def batch(at: float | None, keys: list[str]) -> None:
            options = {} if at is None else {"schedule_at": datetime.fromtimestamp(at, UTC)}
            deferrer = task.configure(**options)  # type: ignore[attr-defined]
            async with gate:
                for i in range(0, len(keys), CHUNK):
                    await deferrer.batch_defer_async(*({"key": k} for k in keys[i : i + CHUNK]))

        await asyncio.gather(*(batch(at, keys) for at, keys in by_instant.items()))

    def processes(self, workload: str) -> list[list[str]]:
        return [[*self._cli(), "worker", "--concurrency", str(CONCURRENCY)]]

    def system(self) -> flows.System:
        settings = {"concurrency": CONCURRENCY, "defer_chunk": CHUNK}
        return flows.System(
            self.enqueue, self.processes, self.args.workdir, self.env, settings=settings
        )


def run(args: Args, body: object, cron_jobs: int = 0) -> Result:
    p = Procrastinate(args, cron_jobs)
    try:
        result: Result = body(p)  # type: ignore[operator]
        return result | {"settings": p.system().settings}
    finally:
        p.close()


def w1(args: Args) -> Result:
    return run(args, lambda p: flows.throughput(p.system(), args.params["n"]))


def w2(args: Args) -> Result:
    items = flows.w2_items(args.params["n"])
    return run(args, lambda p: flows.at_instants(p.system(), "W2", items, args.params["lead"]))


def w3(args: Args) -> Result:
    prm = args.params
    items = flows.w3_items(prm["n"], prm["span"])
    return run(args, lambda p: flows.at_instants(p.system(), "W3", items, prm["lead"]))


def w4(args: Args) -> Result:
    prm = args.params
    jobs = [f"w4-{i:04d}" for i in range(prm["jobs"])]
    return run(
        args, lambda p: flows.cron(p.system(), jobs, prm["seconds"], prm["settle"]), prm["jobs"]
    )


if __name__ == "__main__":
    adapter.main(
        {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": _common.w5},
        lambda: _common.versions("procrastinate", "psycopg"),
    )
