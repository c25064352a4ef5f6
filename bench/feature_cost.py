"""bench/feature_cost.py: what each feature costs per run, when it is off and when it is on.

Issue 28 asks that every feature cost only the pools that use it. For each feature this
measures the same number of runs with the feature off and with it on (one or more "on"
variants), in rounds that alternate off and on feature by feature (A/B/A/B), so that a
busy machine's noise shows as ranges rather than as a difference. Each variant is
measured twice, each time in a fresh database holding the same N runs:

- **store**: the store's own calls, no worker, as ``bench/statement_cost.py`` does: runs
  claimed ``--claim`` at a time (W1's size by default) and completed 1,000 at a time.
  Printed per run: PostgreSQL's CPU for the claim and the completion (this database's
  backends, from /proc/PID/schedstat: the server must run on this machine), and this
  process's CPU in those calls (asyncpg's encoding and decoding, cronwheel's rows; on
  SQLite that is the whole store's cost). Measured only for features that change what
  the store does; the others (logs, tracing, metrics) change nothing the store sees.
- **worker**: one :class:`~cronwheel.Worker` (the CLI's default concurrency, an async
  no-op handler) drains the runs in this process, as ``bench/worker_cost.py`` does:
  this process's CPU from the worker's start to its last completion written, per run,
  and PostgreSQL's CPU over the same span (every statement the worker made: claims,
  starts, completions, heartbeats).

The features and how each is turned on (off is always the plain case: one tenant, one
manual job of N runs, no policy, warning logs, no tracer, nobody scraping):

- ``fairness``: the runs shared by ``--tenants`` tenants, a manual job each;
- ``concurrency-key``: the job has ``concurrency = {key: "acct-{payload.k}", limit:
  1000}`` over 20 keys (never reached: the cost of counting, not of waiting);
- ``tenant-cap``: the tenant has ``max_running = 1,000,000`` (never reached);
- ``many-jobs``: N one-time jobs (``immediate``, overlap ``allow``), one run each, so that
  every claim and completion holds runs of as many jobs as runs (a herd of cron jobs, W2
  and W3, has this shape), against the plain case's runs of one job;
- ``overlap``: N one-time jobs (``immediate``), one run each, with ``overlap`` ``queue``
  or ``skip`` against ``allow`` (a job is never busy: the policy's cost, not its waits);
- ``notify``: the job has a notification target on ``failed``/``dead`` (nothing to
  write for a success), or on ``succeeded`` (an outbox row per run; no notifier runs);
- ``at-most-once``: ``delivery = at_most_once`` (a run's start is stored before it runs);
- ``pipeline``: the runs are the tasks of pipeline runs of 100 independent tasks each,
  against a manual job's runs;
- ``archive``: the history archive's pass (decision 0032) moving the finished runs out of
  the live tables after the drain: it is maintenance, not on a run's path, so its cost
  is shown apart (``archive`` column, store only; SQLite has none);
- ``metrics-scrape``: the worker serves its metrics and a separate process scrapes them
  every ``--scrape-seconds`` (counting is always on, decision 0051);
- ``tracing``: an OpenTelemetry tracer provider with a batch span processor and an
  exporter that drops the spans (the SDK's work, not a collector's), every attempt
  sampled, or 1 in 10 (``TraceIdRatioBased``);
- ``logs``: JSON logs at info (a line per attempt, to /dev/null) against warning.

``--custom-plans`` sets ``plan_cache_mode = force_custom_plan`` on the bench database:
PostgreSQL then plans each execution for its parameters, never switching a connection's
prepared statement to its generic plan (from its sixth execution, when the generic one
looks no costlier), so that a cost the generic plan alone adds can be told apart.

Webhook signing is not measured here: it needs an HTTP target (``bench/webhooks.py``).

    python bench/feature_cost.py                           # every feature, 3 rounds
    python bench/feature_cost.py --only fairness --only logs --rounds 5
    python bench/feature_cost.py --store sqlite            # the worker and store on SQLite
    python bench/feature_cost.py --only fairness --custom-plans   # no generic plans

Ends with a table of the ranges (lowest to highest over the rounds), in Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import asyncpg
import cronwheel
from cronwheel import RunContext
from cronwheel.cli.services import ASYNC_CONCURRENCY
from cronwheel.control.service import JobService
from cronwheel.core.model import AttemptOutcome, RunState
from cronwheel.engine import eventloop
from cronwheel.engine.runtime import tune_process
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.observability import metrics, tracing
from cronwheel.observability.logs import configure
from cronwheel.store.base import Completion

PG = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
DB = f"cwbench_feat_{os.getpid()}"
CLAIM = 250  # --claim: a saturated W1 worker claims a tenth of its 2,500 slots at a time
COMPLETE = 1_000
KEYS = 20  # the runs' payloads name one of this many keys, keyed or not
PIPELINE_TASKS = 100  # tasks per pipeline run (the most a pipeline may have)


# ---------------------------------------------------------------- the server's CPU


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


def _server_ns() -> dict[int, int]:
    """CPU time each backend of this database has run, in ns (/proc/PID/schedstat)."""
    ns = {}
    for pid in _backends():
        with contextlib.suppress(OSError), open(f"/proc/{pid}/schedstat") as f:
            ns[pid] = int(f.read().split()[0])
    return ns


def _since(before: dict[int, int]) -> float:
    """Seconds of server CPU since ``before``; a backend that connected since counts
    from its start (a few milliseconds of its own start-up, the same in every variant)."""
    return sum(ns - before.get(pid, 0) for pid, ns in _server_ns().items()) / 1e9


# ---------------------------------------------------------------- the data


@dataclass(frozen=True)
class Variant:
    """One side of a comparison: how its runs are made, and how the worker is set."""

    label: str
    setup: Callable[[JobService, int], Awaitable[None]]
    log_level: str = "warning"
    tracing: float | None = None  # the share of attempts sampled; None: no tracer
    scrape: bool = False
    archive: bool = False


def _payloads(start: int, stop: int) -> list[Any]:
    return [{"k": i % KEYS} for i in range(start, stop)]


NOOP = {"type": "handler", "name": "noop"}


async def _manual(cw: JobService, n: int, *, tenant: str = "default", **spec: Any) -> None:
    """A manual job of the tenant, and n runs of it enqueued (payloads ``{"k": i % 20}``)."""
    job = await cw.create(
        tenant_id=tenant, name="q", schedule={"kind": "manual"}, action=NOOP, **spec
    )
    for i in range(0, n, 2_000):
        await cw.enqueue(job.id, _payloads(i, min(n, i + 2_000)), tenant_id=tenant)


def _plain(**spec: Any) -> Callable[[JobService, int], Awaitable[None]]:
    async def setup(cw: JobService, n: int) -> None:
        await _manual(cw, n, **spec)

    return setup


def _tenants(count: int) -> Callable[[JobService, int], Awaitable[None]]:
    async def setup(cw: JobService, n: int) -> None:
        now = cw.clock.now()
        share, extra = divmod(n, count)
        for t in range(count):
            tenant = f"t{t}"
            await cw.store.ensure_tenant(tenant, tenant, now=now)
            await _manual(cw, share + (t < extra), tenant=tenant)

    return setup


async def _capped(cw: JobService, n: int) -> None:
    tenant = await cw.store.get_tenant("default")
    assert tenant is not None
    await cw.store.update_tenant(replace(tenant, max_running=1_000_000))
    await _manual(cw, n)


def _one_time(overlap: str) -> Callable[[JobService, int], Awaitable[None]]:
    async def setup(cw: JobService, n: int) -> None:
        for i in range(0, n, 2_000):
            await cw.create_many(
                [
                    {
                        "name": f"once-{j}",
                        "schedule": {"kind": "immediate"},
                        "action": NOOP,
                        "payload": {"k": j % KEYS},
                        "overlap": overlap,
                    }
                    for j in range(i, min(n, i + 2_000))
                ]
            )

    return setup


async def _pipelines(cw: JobService, n: int) -> None:
    assert n % PIPELINE_TASKS == 0, f"--runs must be a multiple of {PIPELINE_TASKS}"
    pipeline = await cw.pipelines.create(
        "wide", {"tasks": {f"t{i}": {"action": NOOP} for i in range(PIPELINE_TASKS)}}
    )
    for _ in range(n // PIPELINE_TASKS):
        await cw.pipelines.start(pipeline.id)


TARGET = "https://hooks.example.com/cronwheel"
PLAIN = Variant("off", _plain())

FEATURES: dict[str, tuple[bool, list[Variant]]] = {}
"""Feature → (whether the store's statements see it, [off, on…])."""


def _features(tenants: int) -> None:
    FEATURES.update(
        {
            "fairness": (True, [PLAIN, Variant(f"{tenants} tenants", _tenants(tenants))]),
            "concurrency-key": (
                True,
                [
                    PLAIN,
                    Variant(
                        f"{KEYS} keys, limit 1000",
                        _plain(concurrency={"key": "acct-{payload.k}", "limit": 1000}),
                    ),
                ],
            ),
            "tenant-cap": (True, [PLAIN, Variant("max_running", _capped)]),
            "many-jobs": (
                True,
                [PLAIN, Variant("one-time jobs, a run each", _one_time("allow"))],
            ),
            "overlap": (
                True,
                [
                    Variant("allow (one-time jobs)", _one_time("allow")),
                    Variant("queue", _one_time("queue")),
                    Variant("skip", _one_time("skip")),
                ],
            ),
            "notify": (
                True,
                [
                    PLAIN,
                    Variant(
                        "on failed, dead",
                        _plain(notify=[{"on": ["failed", "dead"], "url": TARGET}]),
                    ),
                    Variant("on succeeded", _plain(notify=[{"on": ["succeeded"], "url": TARGET}])),
                ],
            ),
            "at-most-once": (
                True,
                [PLAIN, Variant("at_most_once", _plain(delivery="at_most_once"))],
            ),
            "pipeline": (True, [PLAIN, Variant(f"tasks of {PIPELINE_TASKS}", _pipelines)]),
            "archive": (True, [PLAIN, replace(PLAIN, label="archive pass", archive=True)]),
            "metrics-scrape": (False, [PLAIN, replace(PLAIN, label="scraped", scrape=True)]),
            "tracing": (
                False,
                [
                    PLAIN,
                    replace(PLAIN, label="every attempt", tracing=1.0),
                    replace(PLAIN, label="1 in 10", tracing=0.1),
                ],
            ),
            "logs": (False, [PLAIN, replace(PLAIN, label="info, json", log_level="info")]),
        }
    )


# ---------------------------------------------------------------- the databases


class Target:
    """Where the runs live: a fresh PostgreSQL database or SQLite file per measurement."""

    def __init__(self, kind: str, *, custom_plans: bool = False) -> None:
        self.kind = kind
        self.custom_plans = custom_plans
        self.path = os.path.join(tempfile.gettempdir(), f"{DB}.db")

    @property
    def pg(self) -> bool:
        return self.kind == "postgres"

    @contextlib.asynccontextmanager
    async def fresh(self) -> Any:
        if self.pg:
            admin = await asyncpg.connect(PG)
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
                await admin.execute(f'CREATE DATABASE "{DB}"')
                if self.custom_plans:
                    await admin.execute(
                        f'ALTER DATABASE "{DB}" SET plan_cache_mode = force_custom_plan'
                    )
                try:
                    cw = await cronwheel.connect(f"{PG.rsplit('/', 1)[0]}/{DB}")
                    try:
                        yield cw
                    finally:
                        await cw.close()
                finally:
                    await admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
            finally:
                await admin.close()
        else:
            self._remove()
            try:
                cw = await cronwheel.connect(f"sqlite:///{self.path}")
                try:
                    yield cw
                finally:
                    await cw.close()
            finally:
                self._remove()

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm", ".key"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path + suffix)

    def server(self) -> dict[int, int]:
        return _server_ns() if self.pg else {}

    def since(self, before: dict[int, int]) -> float:
        return _since(before) if self.pg else float("nan")


# ---------------------------------------------------------------- the store alone


async def store_round(target: Target, variant: Variant, n: int) -> dict[str, float]:
    """µs per run: the claim and completion's server CPU and this process's CPU in them
    (and the archive pass's, with ``variant.archive``)."""
    async with target.fresh() as cw:
        await variant.setup(cw, n)
        store = cw.store
        now = await store.now()
        server = defaultdict(float)
        client = defaultdict(float)

        @contextlib.contextmanager
        def step(name: str) -> Iterator[None]:
            before, cpu = target.server(), time.process_time()
            yield
            client[name] += time.process_time() - cpu
            server[name] += target.since(before)

        done = 0
        while True:
            with step("claim"):
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
                        # A task's ending moves its pipeline run on, as the worker's does.
                        pipeline_run_id=r.run.pipeline_run_id,
                    )
                    for r in claim
                ),
                key=lambda d: d.run_id,
            )
            for i in range(0, len(completions), COMPLETE):
                with step("complete"):
                    await store.complete_runs(completions[i : i + COMPLETE])
            done += len(completions)
        assert done == n, f"{variant.label}: claimed {done} of {n}"
        if variant.archive:
            later = now + timedelta(minutes=1)
            moved = 0
            while True:
                with step("archive"):
                    got = await store.archive_runs(now=later, settle_seconds=0)
                if not got:
                    break
                moved += got
            assert moved == n or not target.pg, f"archived {moved} of {n}"
    return {
        f"{side}_{k}": v / n * 1e6
        for side, d in (("server", server), ("client", client))
        for k, v in d.items()
    }


# ---------------------------------------------------------------- the worker


async def noop(ctx: RunContext) -> None:
    pass


class DropSpans:
    """A span exporter that keeps nothing: the SDK's work per span, not a collector's."""

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


@contextlib.contextmanager
def traced(share: float | None) -> Iterator[Any]:
    if share is None:
        assert tracing.tracer() is None, "a tracer provider is installed: tracing is not off"
        yield None
        return
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased

    sampler = ALWAYS_ON if share >= 1 else ParentBased(TraceIdRatioBased(share))
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(DropSpans()))  # type: ignore[arg-type]
    tracing.configure(provider)
    try:
        yield provider
    finally:
        tracing.configure(None)
        provider.shutdown()


SCRAPER = """
import sys, time, urllib.request
url, every = sys.argv[1], float(sys.argv[2])
while True:
    urllib.request.urlopen(url).read()
    time.sleep(every)
"""


@contextlib.contextmanager
def scraped(on: bool, every: float) -> Iterator[None]:
    """The worker's metrics served (``--metrics-port``) and scraped by another process,
    whose own CPU is not this one's."""
    if not on:
        yield
        return
    with metrics.serving(0, "127.0.0.1") as port:
        scraper = subprocess.Popen(
            [sys.executable, "-c", SCRAPER, f"http://127.0.0.1:{port}/metrics", str(every)]
        )
        try:
            yield
        finally:
            scraper.terminate()
            scraper.wait()


@contextlib.contextmanager
def logging_at(level: str) -> Iterator[None]:
    configure("json", level)
    # The lines' cost, not a terminal's: they go to /dev/null.
    [handler] = logging.getLogger().handlers
    assert isinstance(handler, logging.StreamHandler)
    with open(os.devnull, "w") as devnull:
        handler.setStream(devnull)
        try:
            yield
        finally:
            configure("text", "warning")


async def worker_round(
    target: Target, variant: Variant, n: int, *, concurrency: int, scrape_every: float
) -> dict[str, float]:
    """µs per run: this process's CPU while a Worker drains the runs, of which the
    collector's, and the server's CPU over the same span."""
    async with target.fresh() as cw:
        await variant.setup(cw, n)
        worker = Worker(cw.store, WorkerConfig(pools={"default": concurrency}))
        worker.handlers.register("noop", noop)
        collecting = [0.0, 0.0]

        def timed(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                collecting[1] = time.process_time()
            else:
                collecting[0] += time.process_time() - collecting[1]

        with (
            logging_at(variant.log_level),
            traced(variant.tracing),
            scraped(variant.scrape, scrape_every),
        ):
            stop = asyncio.Event()
            gc.collect()
            tune_process()
            gc.callbacks.append(timed)
            before = target.server()
            wall, cpu = time.perf_counter(), time.process_time()
            task = asyncio.create_task(worker.run(stop))
            try:
                while worker.completed < n:  # no event to await: poll
                    if task.done():
                        task.result()
                        raise RuntimeError(f"the worker stopped at {worker.completed} of {n}")
                    await asyncio.sleep(0.005)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                server = target.since(before)
            finally:
                gc.callbacks.remove(timed)
                stop.set()
                await task
                gc.unfreeze()
    return {
        "worker": cpu / n * 1e6,
        "worker_gc": collecting[0] / n * 1e6,
        "worker_server": server / n * 1e6,
        "rate": n / wall,
    }


# ---------------------------------------------------------------- the report

COLUMNS = (
    ("server_claim", "claim, PostgreSQL"),
    ("server_complete", "completion, PostgreSQL"),
    ("server_total", "claim + completion, PostgreSQL"),
    ("client_total", "claim + completion, client CPU"),
    ("server_archive", "archive pass, PostgreSQL"),
    ("worker", "worker CPU"),
    ("worker_server", "PostgreSQL while the worker drains"),
)


def _totals(r: dict[str, float]) -> dict[str, float]:
    for side in ("server", "client"):
        if f"{side}_claim" in r:
            r[f"{side}_total"] = r[f"{side}_claim"] + r[f"{side}_complete"]
    return r


DASH = "\N{EN DASH}"


def _cell(values: list[float]) -> str:
    values = [v for v in values if v == v]  # NaN: not measured on this store
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.1f}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}{DASH}{hi:.1f}"


def report(results: dict[tuple[str, str], list[dict[str, float]]], pg: bool) -> None:
    columns = [
        (k, h) for k, h in COLUMNS if pg or not (k.startswith("server") or k == "worker_server")
    ]
    if not pg:
        columns = [(k, h.replace("client CPU", "the store's CPU")) for k, h in columns]
    print("\n| feature | variant | " + " | ".join(h for _, h in columns) + " |")
    print("|---|---|" + "---:|" * len(columns))
    for (feature, label), rounds in results.items():
        cells = [_cell([r[k] for r in rounds if k in r]) for k, _ in columns]
        print(f"| {feature} | {label} | " + " | ".join(cells) + " |")


async def main() -> None:
    global CLAIM
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=10_000, help="runs per measurement (%(default)s)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", action="append", help="measure only these features (repeatable)")
    p.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    p.add_argument("--claim", type=int, default=CLAIM, help="runs a claim (%(default)s)")
    p.add_argument("--tenants", type=int, default=10, help="tenants for fairness (%(default)s)")
    p.add_argument("--concurrency", type=int, default=ASYNC_CONCURRENCY)
    p.add_argument("--scrape-seconds", type=float, default=1.0)
    p.add_argument(
        "--custom-plans",
        action="store_true",
        help="PostgreSQL plans every statement for its parameters (plan_cache_mode ="
        " force_custom_plan on the bench database), never a generic plan",
    )
    p.add_argument("--no-worker", action="store_true", help="the store's statements only")
    p.add_argument("--no-store", action="store_true", help="the worker only")
    a = p.parse_args()
    CLAIM = a.claim
    _features(a.tenants)
    unknown = set(a.only or ()) - set(FEATURES)
    if unknown:
        p.error(f"--only: no feature {', '.join(sorted(unknown))}; features: {', '.join(FEATURES)}")
    os.environ.setdefault("CRONWHEEL_WEBHOOK_SECRET", "bench")  # no warning line
    configure("text", "warning")
    target = Target(a.store, custom_plans=a.custom_plans)
    print(
        f"µs per run, {a.runs:,} runs, {a.store}, claims of {CLAIM:,}, completions of "
        f"{COMPLETE:,}, worker concurrency {a.concurrency:,}"
        + (", custom plans only" if a.custom_plans else ""),
        flush=True,
    )
    # Warm up (imports, the first connections, the statements' first plans): unreported.
    await store_round(target, PLAIN, 1_000)
    await worker_round(target, PLAIN, 1_000, concurrency=a.concurrency, scrape_every=1)
    results: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    for round_ in range(1, a.rounds + 1):
        for feature, (in_store, variants) in FEATURES.items():
            if a.only and feature not in a.only:
                continue
            for variant in variants:
                r: dict[str, float] = {}
                if in_store and not a.no_store:
                    r |= await store_round(target, variant, a.runs)
                # The archive is maintenance, after the drain: the worker's is the plain one.
                if not a.no_worker and feature != "archive":
                    r |= await worker_round(
                        target,
                        variant,
                        a.runs,
                        concurrency=a.concurrency,
                        scrape_every=a.scrape_seconds,
                    )
                _totals(r)
                results[feature, variant.label].append(r)
                shown = " ".join(f"{k}={v:.1f}" for k, v in r.items() if v == v and k != "rate")
                rate = f" {r['rate']:,.0f} runs/s" if "rate" in r else ""
                print(f"round {round_} {feature:<16} {variant.label:<22} {shown}{rate}", flush=True)
    report(results, target.pg)


if __name__ == "__main__":
    eventloop.run(main())
