"""Celery 5.7 (Redis broker) under the workloads. Settings: prefork pool with one child per
core (its default), prefetch multiplier 64, no result backend, gossip/mingle/heartbeat
off (the documented tuning for throughput); ETA tasks for runs due later; beat for cron."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

from lib import adapter, flows
from lib.adapter import Args, Result
from peers import _common

CONCURRENCY = os.cpu_count() or 2


class CeleryPeer:
    def __init__(self, args: Args, cron_jobs: int = 0) -> None:
        self.args = args
        self.env = {"CWBENCH_REDIS_URL": args.redis_url, "CWBENCH_CRON_JOBS": str(cron_jobs)}
        os.environ.update(self.env)
        from peers import celery_app

        self.noop = celery_app.noop
        self.cron_jobs = cron_jobs

    def enqueue(self, items: list[flows.Item]) -> None:
        # One apply_async per task: Celery has no bulk enqueue (a group is still one
        # message per task, plus a group id).
        with self.noop.app.producer_or_acquire() as producer:
            for key, at in items:
                eta = None if at is None else datetime.fromtimestamp(at, UTC)
                self.noop.apply_async((key,), eta=eta, producer=producer)

    def processes(self, workload: str) -> list[list[str]]:
        celery = [sys.executable, "-m", "celery", "-A", "peers.celery_app"]
        worker = [*celery, "worker", "--pool", "prefork", "--concurrency", str(CONCURRENCY)]
        worker += ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "WARNING"]
        if not self.cron_jobs:
            return [worker]
        beat = [*celery, "beat", "-S", "peers.celery_app:AlignedScheduler", "-l", "WARNING"]
        return [worker, beat]

    def system(self) -> flows.System:
        settings = {"pool": "prefork", "concurrency": CONCURRENCY, "prefetch_multiplier": 64}
        return flows.System(
            self.enqueue, self.processes, self.args.workdir, self.env, settings=settings
        )


def w1(args: Args) -> Result:
    c = CeleryPeer(args)
    return flows.throughput(c.system(), args.params["n"]) | {"settings": c.system().settings}


def w2(args: Args) -> Result:
    c = CeleryPeer(args)
    items = flows.w2_items(args.params["n"])
    result = flows.at_instants(c.system(), "W2", items, args.params["lead"])
    return result | {"settings": c.system().settings}


def w3(args: Args) -> Result:
    c, p = CeleryPeer(args), args.params
    result = flows.at_instants(c.system(), "W3", flows.w3_items(p["n"], p["span"]), p["lead"])
    return result | {"settings": c.system().settings}


def w4(args: Args) -> Result:
    p = args.params
    c = CeleryPeer(args, p["jobs"])
    jobs = [f"w4-{i:04d}" for i in range(p["jobs"])]
    result = flows.cron(c.system(), jobs, p["seconds"], p["settle"])
    return result | {"settings": c.system().settings | {"beat": "AlignedScheduler"}}


if __name__ == "__main__":
    adapter.main(
        {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": _common.w5},
        lambda: _common.versions("celery", "kombu", "redis"),
    )
