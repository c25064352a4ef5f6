"""pgqueuer 1.6 under the workloads. Settings: ``pgqueuer.run`` (= ``pgq run``), batch size 100
(its documented throughput knob; default 10), LISTEN/NOTIFY on, no concurrency limit."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from datetime import timedelta

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

from lib import adapter, flows
from lib.adapter import Args, Result
from peers import _common

BATCH_SIZE = 100
CHUNK = 5_000  # jobs per enqueue statement


class Pgq:
    def __init__(self, args: Args, cron_jobs: int = 0) -> None:
        self.args = args
        self.env = {"PGDSN": args.pg_dsn, "CWBENCH_CRON_JOBS": str(cron_jobs)}
        subprocess.run(
            [sys.executable, "-m", "pgqueuer", "install"],
            env=os.environ | self.env,
            check=True,
            capture_output=True,
        )
        self.runner = asyncio.Runner()
        self.conn = self.runner.run(asyncpg.connect(args.pg_dsn))
        self.queries = Queries(AsyncpgDriver(self.conn))

    def close(self) -> None:
        self.runner.run(self.conn.close())
        self.runner.close()

    def enqueue(self, items: list[flows.Item]) -> None:
        for i in range(0, len(items), CHUNK):
            chunk = items[i : i + CHUNK]
            now = time.time()  # execute_after is relative to the database's now()
            after = [None if at is None else timedelta(seconds=at - now) for _, at in chunk]
            self.runner.run(
                self.queries.enqueue(
                    ["noop"] * len(chunk), [k.encode() for k, _ in chunk], [0] * len(chunk), after
                )
            )

    def processes(self, workload: str) -> list[list[str]]:
        return [[sys.executable, "-m", "peers.pgqueuer_app", "--batch-size", str(BATCH_SIZE)]]

    def system(self) -> flows.System:
        settings = {"batch_size": BATCH_SIZE, "enqueue_chunk": CHUNK}
        return flows.System(
            self.enqueue, self.processes, self.args.workdir, self.env, settings=settings
        )


def run(args: Args, body: object, cron_jobs: int = 0) -> Result:
    pgq = Pgq(args, cron_jobs)
    try:
        result: Result = body(pgq)  # type: ignore[operator]
        return result | {"settings": pgq.system().settings}
    finally:
        pgq.close()


def w1(args: Args) -> Result:
    return run(args, lambda q: flows.throughput(q.system(), args.params["n"]))


def w2(args: Args) -> Result:
    items = flows.w2_items(args.params["n"])
    return run(args, lambda q: flows.at_instants(q.system(), "W2", items, args.params["lead"]))


def w3(args: Args) -> Result:
    p = args.params
    items = flows.w3_items(p["n"], p["span"])
    return run(args, lambda q: flows.at_instants(q.system(), "W3", items, p["lead"]))


def w4(args: Args) -> Result:
    p = args.params
    jobs = [f"w4-{i:04d}" for i in range(p["jobs"])]
    return run(args, lambda q: flows.cron(q.system(), jobs, p["seconds"], p["settle"]), p["jobs"])


if __name__ == "__main__":
    adapter.main(
        {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": _common.w5},
        lambda: _common.versions("pgqueuer", "asyncpg"),
    )
