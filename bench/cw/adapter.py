"""cronwheel under the workloads: ``python -m cw.adapter --system cronwheel-pg|-sqlite``.

Shapes, as the README documents them: on SQLite the embedded shape (one process runs
scheduler, worker and maintenance: SQLite wake-ups are in-process); on PostgreSQL the
cluster shape, a ``cronwheel worker`` process and a ``cronwheel scheduler`` process.
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from typing import Any

import cronwheel
import httpx
from cronwheel.cli.services import ASYNC_CONCURRENCY
from cronwheel.engine.scheduler import Scheduler
from cronwheel.security.egress import ALLOW_ENV, LOOPBACK

from lib import adapter, flows, records
from lib.adapter import Args, Result
from lib.stats import lag_summary

CONCURRENCY = os.environ.get("CWBENCH_CW_CONCURRENCY")
"""Runs at once in the worker's pool (``--concurrency``); unset: cronwheel's default for a
pool of async handlers (the bench's ``noop`` is async), which holds up to 4x this many
claimed runs (prefetch)."""
BATCH = 5_000
"""Jobs per create_many call: the bulk path."""
NOTIFY = os.environ.get("CWBENCH_NOTIFY") == "1"
"""W1 with a notification on every run: the queue job names a target for ``succeeded``
(a sink on loopback in this process), so each completion writes an outbox row and the
worker process's notifier delivers it."""
if NOTIFY:  # the sink listens on loopback: the processes this adapter starts may reach it
    os.environ[ALLOW_ENV] = ",".join(LOOPBACK)


class _Sink(BaseHTTPRequestHandler):
    """A notification target that takes everything (keep-alive, as a real one would)."""

    protocol_version = "HTTP/1.1"
    received = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        _Sink.received += 1
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class _SinkServer(ThreadingHTTPServer):
    request_queue_size = 1024  # the notifier opens up to a batch's connections at once
    daemon_threads = True


def _sink() -> str:
    server = _SinkServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}/notifications"


NOOP = {"type": "handler", "name": "noop"}


class Cronwheel:
    def __init__(self, args: Args) -> None:
        self.args = args
        self.pg = args.system == "cronwheel-pg"
        self.url = args.pg_dsn if self.pg else f"sqlite:///{args.workdir / 'cw.db'}"
        self.runner = asyncio.Runner()  # one loop, one connection pool for every call
        self.cw: cronwheel.JobService = self.runner.run(cronwheel.connect(self.url))
        self.probes = 0
        self.queue: str | None = None
        self.notify_url = _sink() if NOTIFY else None
        self.api_port: int | None = None
        """W6 on SQLite: the serving process's API, through which B enqueues."""

    def close(self) -> None:
        self.runner.run(self.cw.close())
        self.runner.close()

    def enqueue(self, items: list[flows.Item]) -> None:
        # Runs due now go to one manual job, each with its key as payload: what the queue
        # peers do with one entrypoint or task and an argument per run. Runs due later are
        # one-time jobs, each its own definition.
        now = [key for key, at in items if at is None]
        for i in range(0, len(now), BATCH):
            self.runner.run(self.cw.enqueue(self._queue(), now[i : i + BATCH]))
        specs = [self._spec(key, at) for key, at in items if at is not None]
        for i in range(0, len(specs), BATCH):
            self.runner.run(self.cw.create_many(specs[i : i + BATCH]))

    def _queue(self) -> str:
        if self.queue is None:
            spec: dict[str, Any] = {
                "name": "bench-queue",
                "schedule": {"kind": "manual"},
                "action": NOOP,
            }
            if self.notify_url is not None:
                spec["notify"] = [{"on": ["succeeded"], "url": self.notify_url}]
            self.queue = self.runner.run(self.cw.create(**spec)).id
        return self.queue

    def _spec(self, key: str, at: float) -> dict[str, Any]:
        if key == "probe":  # job names are unique: each probe gets its own
            self.probes += 1
            key = f"probe-{self.probes}"
        schedule = {"kind": "once", "at": datetime.fromtimestamp(at, UTC).isoformat()}
        return {"name": key, "schedule": schedule, "action": NOOP}

    def processes(self, workload: str) -> list[list[str]]:
        py = sys.executable
        if not self.pg:
            serve = [py, "-m", "cw.serve", "--db", self.url]
            if CONCURRENCY is not None:
                serve += ["--concurrency", CONCURRENCY]
            if self.api_port is not None:
                serve += ["--api-port", str(self.api_port)]
            return [serve]
        # Warnings only, as the peers' workers log by default (Celery's level is WARNING):
        # a line per attempt at info is a production default, not a cost to measure here.
        quiet = ["--log-level", "warning"]
        worker = [py, "-m", "cronwheel", "worker", "--app", "cw.app:worker", "--db", self.url]
        if CONCURRENCY is not None:
            worker += ["--concurrency", CONCURRENCY]
        worker += quiet
        if workload in ("W1", "W6"):  # immediate runs need no scheduler: only the worker
            return [worker]
        return [worker, [py, "-m", "cronwheel", "scheduler", "--db", self.url, *quiet]]

    def system(self) -> flows.System:
        shape = "cluster: worker + scheduler processes" if self.pg else "embedded: one process"
        settings = {
            "shape": shape,
            "concurrency": int(CONCURRENCY) if CONCURRENCY else f"default ({ASYNC_CONCURRENCY})",
            "enqueue_batch": BATCH,
            "create_many_batch": BATCH,
        }
        if self.notify_url is not None:
            settings["notify"] = "a notification on every run (succeeded)"
            # Counted after the worker stopped: rows written by the completions, and
            # how many its notifier had delivered by then (it keeps up, or catches up
            # after the workload: delivery is not on the runs' path).
            outbox = self.runner.run(self.cw.store.list_notifications("default", limit=10**7))
            settings["outbox_rows"] = len(outbox)
            settings["notifications_delivered"] = sum(n.state == "delivered" for n in outbox)
            settings["notifications_dead"] = sum(n.state == "dead" for n in outbox)
            settings["notifications_received"] = _Sink.received
        return flows.System(self.enqueue, self.processes, self.args.workdir, settings=settings)


def run(args: Args, body: Any) -> Result:
    cw = Cronwheel(args)
    try:
        result: Result = body(cw)
        return result | {"settings": cw.system().settings}
    finally:
        cw.close()


def w1(args: Args) -> Result:
    return run(args, lambda cw: flows.throughput(cw.system(), args.params["n"]))


def w2(args: Args) -> Result:
    items = flows.w2_items(args.params["n"])
    return run(args, lambda cw: flows.at_instants(cw.system(), "W2", items, args.params["lead"]))


def w3(args: Args) -> Result:
    p = args.params
    items = flows.w3_items(p["n"], p["span"])
    return run(args, lambda cw: flows.at_instants(cw.system(), "W3", items, p["lead"]))


def w4(args: Args) -> Result:
    jobs = [f"w4-{i:04d}" for i in range(args.params["jobs"])]

    def body(cw: Cronwheel) -> Result:
        every_second = {"kind": "cron", "cron": "* * * * * *", "timezone": "UTC"}
        specs = [{"name": j, "schedule": every_second, "action": NOOP} for j in jobs]
        cw.runner.run(cw.cw.create_many(specs))
        return flows.cron(cw.system(), jobs, args.params["seconds"], args.params["settle"])

    return run(args, body)


def w5(args: Args) -> Result:
    p = args.params
    return run(args, lambda cw: cw.runner.run(_at_rest(cw.cw, p)))


async def _at_rest(cw: cronwheel.JobService, p: dict[str, Any]) -> Result:
    """Bulk-create jobs that stay at rest (yearly cron), timing the scheduler's tick with
    ``small`` of them and again with all of them."""
    yearly = {"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"}
    created, create_s, ticks = 0, 0.0, {}
    for target in (p["small"], p["jobs"]):
        while created < target:
            size = min(p["batch"], target - created)
            specs = [
                {"name": f"w5-{created + i:07d}", "schedule": yearly, "action": NOOP}
                for i in range(size)
            ]
            t0 = time.perf_counter()
            await cw.create_many(specs)
            create_s += time.perf_counter() - t0
            created += size
        ticks[target] = await _tick_ms(cw, p["ticks"])
    small, large = ticks[p["small"]], ticks[p["jobs"]]
    return {
        "jobs": p["jobs"],
        "create_s": round(create_s, 2),
        "jobs_per_s": round(p["jobs"] / create_s),
        "tick_ms": {str(k): v for k, v in ticks.items()},
        "tick_ratio": round(large["median"] / small["median"], 2),
        "small": p["small"],
    }


async def _tick_ms(cw: cronwheel.JobService, n: int) -> dict[str, float]:
    scheduler = Scheduler(cw.store)
    await scheduler.run_once()  # warm: connections, plans, caches
    durations = []
    for _ in range(n):
        t0 = time.perf_counter()
        await scheduler.run_once()
        durations.append((time.perf_counter() - t0) * 1000)
    return {"median": round(statistics.median(durations), 3), "max": round(max(durations), 3)}


def w6(args: Args) -> Result:
    return run(args, lambda cw: _fairness(cw, args.params))


def _fairness(cw: Cronwheel, p: dict[str, Any]) -> Result:
    """W6: tenant B's runs, one every ``b_every`` seconds, first alone (the reference),
    then while tenant A's backlog of ``a`` runs drains. B's start lag is the handler's
    start minus the instant just before its enqueue was called (the enqueue included)."""
    for tenant in ("w6-a", "w6-b"):
        cw.runner.run(cw.cw.store.ensure_tenant(tenant, tenant, now=datetime.now(UTC)))
    queue = {"schedule": {"kind": "manual"}, "action": NOOP}
    a_job = cw.runner.run(cw.cw.create("w6-a", name="w6-a", **queue)).id
    b_job = cw.runner.run(cw.cw.create("w6-b", name="w6-b", **queue)).id
    system = cw.system()
    rec = system.workdir / "W6.records"
    intended: dict[str, float] = {}
    a_keys = [f"w6-a-{i:06d}" for i in range(p["a"])]

    api = None
    if not cw.pg:
        # The embedded shape's clients enqueue through its API (cronwheel dev): another
        # process writing the SQLite file waits for its write lock behind the serving
        # process's back-to-back transactions (B's p99 2.4 s measured so), which is not
        # how a run reaches a `cronwheel dev`. A's backlog is written directly, before.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            cw.api_port = s.getsockname()[1]
        api = httpx.Client(base_url=f"http://127.0.0.1:{cw.api_port}", timeout=60)

    def b_run(key: str) -> None:
        intended[key] = time.time()
        if api is None:
            cw.runner.run(cw.cw.enqueue(b_job, [key], tenant_id="w6-b"))
            return
        r = api.post(
            f"/v1/jobs/{b_job}/runs", json={"payloads": [key]}, headers={"Cronwheel-Tenant": "w6-b"}
        )
        r.raise_for_status()

    def b_every(until: Any) -> list[str]:
        """B's runs, one per tick, until ``until()`` says stop; their keys."""
        keys: list[str] = []
        tick = time.time()
        while not until(len(keys)):
            key = f"w6-b-{len(intended):06d}"
            b_run(key)
            keys.append(key)
            tick += p["b_every"]
            time.sleep(max(0.0, tick - time.time()))
        return keys

    running = flows._Running(system, "W6", rec)
    try:
        flows._probe(system, rec, running)
        alone_ticks = round(p["alone"] / p["b_every"])
        alone = b_every(lambda sent: sent >= alone_ticks)
        records.wait_for(rec, 1 + len(alone), stall=30.0, deadline=time.time() + 60)
        before = records.count(rec)
        t0 = time.perf_counter()
        for i in range(0, len(a_keys), BATCH):
            cw.runner.run(cw.cw.enqueue(a_job, a_keys[i : i + BATCH], tenant_id="w6-a"))
        enqueue_s = time.perf_counter() - t0
        drain_deadline = time.time() + 60 + p["a"] / 1000
        # B keeps sending until A's backlog is drained (every A run and B run recorded).
        during = b_every(
            lambda sent: (
                records.count(rec) >= before + len(a_keys) + sent or time.time() > drain_deadline
            )
        )
        records.wait_for(
            rec, before + len(a_keys) + len(during), stall=30.0, deadline=drain_deadline
        )
        running.check()
    finally:
        running.stop()
    execs = records.read(rec)
    first = flows._first_starts(execs, set(intended) | set(a_keys))
    a_starts = sorted(first[k] for k in a_keys if k in first)

    def lags(keys: list[str]) -> list[float]:
        return [first[k] - intended[k] for k in keys if k in first]

    # Only B's runs sent while A's backlog was still there count as "during".
    drained_at = a_starts[-1] if a_starts else math.inf
    while_backlog = [k for k in during if intended[k] <= drained_at]
    return {
        "a": p["a"],
        "a_enqueue_s": round(enqueue_s, 3),
        "a_drain_s": round(a_starts[-1] - a_starts[0], 3) if len(a_starts) > 1 else None,
        "b_every_s": p["b_every"],
        "b_alone": lag_summary(lags(alone)),
        "b_during": lag_summary(lags(while_backlog)),
        **flows._tally(execs, set(intended) | set(a_keys)),
    }


def info() -> Result:
    return {"versions": {"cronwheel": version("cronwheel"), "python": sys.version.split()[0]}}


if __name__ == "__main__":
    adapter.main({"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6}, info)
