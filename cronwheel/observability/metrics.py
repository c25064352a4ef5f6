"""Prometheus metrics: every name cronwheel exports, in one place (docs/observability.md).

Each process has one :class:`Metrics` (:func:`default`) with a registry of its own, not
prometheus-client's global one, so a test can build as many as it likes. Events are
recorded where they happen, from numbers already computed there: the worker after each
batch of completions, the scheduler after each tick, the webhook action per response.
The store-derived gauges (runs due, running, dead, live workers) are not recorded: a
:class:`StoreGauges` collector reads them with one cached store query per scrape
(:class:`GaugeCache`), and only the API serves them, so a cluster reports them once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Container, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cronwheel.core.clock import Clock
from cronwheel.core.model import Priority
from cronwheel.core.records import Completion
from cronwheel.core.records import GaugeReading as Snapshot

LAG_BUCKETS = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
    60.0, 300.0,
)  # fmt: skip
"""Start lag: the workers start runs within a millisecond or two; the seeds promise
one or two seconds; minutes mean a backlog."""
DURATION_BUCKETS = (
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
    3600.0,
)  # fmt: skip
TICK_BUCKETS = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

UNKNOWN_POOL = "unknown"
"""The pool of a lost attempt: the rescue that records it does not read the run's pool."""
ALL_TENANTS = "all"
"""The ``tenant`` of ``cronwheel_dead_letter_runs`` unless tenant labels are asked for."""
WORKER_ALIVE_SECONDS = 30.0
"""A worker seen within this long counts as alive (it heartbeats every few seconds)."""
WEBHOOK_CLASSES = ("2xx", "3xx", "4xx", "5xx", "timeout", "connection")
SKIP_REASONS = ("misfire", "paused", "overlap")
REPLICA_READ_SOURCES = ("replica", "primary_lagging", "primary_unreachable", "primary_unmeasured")
"""The ``served_by`` values of ``cronwheel_replica_reads_total`` (cronwheel/store/replica.py)."""
"""The ``reason`` values of ``cronwheel_runs_skipped_total``: a fixed set."""
GAUGE_TTL_SECONDS = 5.0
STORE_READ_TIMEOUT = 2.0
"""A scrape waits this long for the store; Prometheus's own timeout is 10 s by default."""
"""How long one read of the store-derived gauges serves every scrape."""


LOOP_LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def status_class(status: int) -> str:
    """``2xx`` … ``5xx`` for an HTTP status: the bounded label of a webhook response."""
    return f"{min(max(status // 100, 1), 5)}xx"


class Metrics:
    """The in-process metrics of one process, in a registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.start_lag = Histogram(
            "cronwheel_run_start_lag_seconds",
            "How late an attempt started after the instant it was due (its scheduled_for,"
            " or its retry's available_at).",
            ["pool"],
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.start_wait = Histogram(
            "cronwheel_run_start_wait_seconds",
            "How late an attempt started after the instant it was due, for a run that a limit"
            " may hold back (a concurrency key, overlap: queue): its wait includes the"
            " limit's, so it is kept out of cronwheel_run_start_lag_seconds.",
            ["pool"],
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "cronwheel_run_duration_seconds",
            "How long an attempt's action ran, by how it ended.",
            ["pool", "outcome"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.attempts = Counter(
            "cronwheel_attempts_total",
            "Attempts recorded by this process, by how they ended.",
            ["pool", "outcome"],
            registry=r,
        )
        self.skipped = Counter(
            "cronwheel_runs_skipped_total",
            "Runs recorded as skipped by this process (misfire, paused, overlap).",
            ["reason"],
            registry=r,
        )
        self.unclaimed = Counter(
            "cronwheel_runs_unclaimed_total",
            "At-most-once runs claimed ahead whose worker's lease expired before it started"
            " them, made claimable again by a rescue without an attempt.",
            registry=r,
        )
        self.webhooks = Counter(
            "cronwheel_webhook_responses_total",
            "Webhook requests by what came back: a status class, a timeout or a connection error.",
            ["status_class"],
            registry=r,
        )
        # Every value of a bounded label exists from the start, at 0: a rate over it
        # is defined before the first event.
        self._webhook_of = {label: self.webhooks.labels(label) for label in WEBHOOK_CLASSES}
        for label in SKIP_REASONS:
            self.skipped.labels(label)
        self._replica: tuple[dict[str, Counter], Gauge] | None = None
        self._scheduler: _SchedulerMetrics | None = None
        self._loop_lag: Histogram | None = None
        # The worker records a batch at a time: labelled children looked up once per
        # pool and outcome, not once per run.
        self._children: dict[tuple[str, str], tuple[Histogram, Counter]] = {}
        self._lag_of: dict[str, Histogram] = {}
        self._wait_of: dict[str, Histogram] = {}
        self._lock = threading.Lock()

    def attempts_done(
        self, done: Iterable[tuple[str, Completion]], *, limited: Container[int] = ()
    ) -> None:
        """Record finished attempts, as ``(pool, completion)``, from a written batch. The
        lag of the runs in ``limited`` (ids of runs a limit may hold back: a concurrency
        key, ``overlap: queue``) goes to the start wait, not the start lag (decision 0042).

        The batch is counted here first and goes to the Prometheus children in bulk: one
        increment per counter, bucket and sum that changed, not three locked updates per
        run (decision 0051)."""
        attempts: dict[tuple[str, str], int] = {}
        durations: dict[tuple[str, str], _Observed] = {}
        lags: dict[str, _Observed] = {}
        waits: dict[str, _Observed] = {}
        for pool, c in done:
            key = (pool, c.outcome.value)
            attempts[key] = attempts.get(key, 0) + 1
            if c.started_at is not None:
                seen = durations.get(key)
                if seen is None:
                    seen = durations[key] = _Observed(DURATION_BUCKETS)
                seen.add((c.finished_at - c.started_at).total_seconds())
            if c.lag_seconds is not None:
                into = waits if c.run_id in limited else lags
                seen = into.get(pool)
                if seen is None:
                    seen = into[pool] = _Observed(LAG_BUCKETS)
                seen.add(c.lag_seconds if c.lag_seconds > 0.0 else 0.0)
        for key, n in attempts.items():
            pair = self._children.get(key)
            if pair is None:
                pair = self._child(*key)
            pair[1].inc(n)
            if key in durations:
                durations[key].into(pair[0])
        for pool, seen in lags.items():
            lag = self._lag_of.get(pool)
            if lag is None:
                lag = self._lag_of[pool] = self.start_lag.labels(pool)
            seen.into(lag)
        for pool, seen in waits.items():
            wait = self._wait_of.get(pool)
            if wait is None:
                wait = self._wait_of[pool] = self.start_wait.labels(pool)
            seen.into(wait)

    def _child(self, pool: str, outcome: str) -> tuple[Histogram, Counter]:
        with self._lock:
            pair = (self.duration.labels(pool, outcome), self.attempts.labels(pool, outcome))
            self._children[(pool, outcome)] = pair
            return pair

    def attempts_cancelled(self, pools: Iterable[str]) -> None:
        """Attempts a stopping worker's release recorded as ``cancelled``, one per pool
        given (runs that had started; a run released before it started has none)."""
        for pool in pools:
            self.attempts.labels(pool, "cancelled").inc()

    def attempts_lost(self, n: int) -> None:
        """Attempts a rescue recorded as ``lost`` (their worker's lease expired)."""
        if n:
            self.attempts.labels(UNKNOWN_POOL, "lost").inc(n)

    def runs_unclaimed(self, n: int) -> None:
        """Runs a rescue gave back unstarted (at-most-once, claimed ahead, never begun): no
        attempt."""
        if n:
            self.unclaimed.inc(n)

    def runs_skipped(self, reason: str, n: int) -> None:
        if n:
            self.skipped.labels(reason).inc(n)

    def webhook_response(self, status: int | str) -> None:
        """``status``: the HTTP status, or ``timeout`` / ``connection``."""
        label = status_class(status) if isinstance(status, int) else status
        self._webhook_of[label].inc()

    def _replica_metrics(self) -> tuple[dict[str, Counter], Gauge]:
        """Registered at the first use: only an API with --read-replica exports them."""
        with self._lock:
            if self._replica is None:
                reads = Counter(
                    "cronwheel_replica_reads_total",
                    "List and history reads of an API with --read-replica, by the store that"
                    " served them: the replica, or the primary because the replica lagged,"
                    " was unreachable or could not be measured.",
                    ["served_by"],
                    registry=self.registry,
                )
                lag = Gauge(
                    "cronwheel_replica_lag_seconds",
                    "How far the read replica was behind the primary at its last check (NaN:"
                    " unknown, the replica did not answer or is not a standby).",
                    registry=self.registry,
                )
                lag.set(math.nan)
                self._replica = ({s: reads.labels(s) for s in REPLICA_READ_SOURCES}, lag)
            return self._replica

    def replica_read(self, served_by: str) -> None:
        """One routed read of cronwheel/store/replica.py, by where it went."""
        self._replica_metrics()[0][served_by].inc()

    def replica_lag(self, seconds: float | None) -> None:
        """The read replica's lag at its last check; None: unknown."""
        self._replica_metrics()[1].set(math.nan if seconds is None else seconds)

    def loop_lag(self, seconds: float) -> None:
        """How late one turn of a worker's event loop came (registered at the first
        use: only a process with a worker exports it)."""
        if self._loop_lag is None:
            with self._lock:
                if self._loop_lag is None:
                    self._loop_lag = Histogram(
                        "cronwheel_worker_loop_lag_seconds",
                        "How late a worker's event loop turned, sampled every 0.1 s: past a"
                        " second, heartbeats, claims and the stop signal wait (issue 26).",
                        buckets=LOOP_LAG_BUCKETS,
                        registry=self.registry,
                    )
        self._loop_lag.observe(seconds)

    def scheduler_started(self, *, shard_count: int) -> None:
        """Register the scheduler's metrics: only a process that runs a scheduler exports
        them (an API or a worker exporting ``shards_owned 0`` of ``shards 0`` would hide a
        cluster with no scheduler at all from ``CronwheelShardsWithoutScheduler``). It owns
        no shard until its first tick says otherwise."""
        with self._lock:
            if self._scheduler is None:
                self._scheduler = _SchedulerMetrics(self.registry)
            self._scheduler.shards.set(shard_count)

    def scheduler_tick(
        self, seconds: float, *, lead_seconds: float, shards_owned: int, shard_count: int
    ) -> None:
        if self._scheduler is None:
            self.scheduler_started(shard_count=shard_count)
        assert self._scheduler is not None
        self._scheduler.tick.observe(seconds)
        self._scheduler.lead.set(lead_seconds)
        self._scheduler.shards_owned.set(shards_owned)
        self._scheduler.shards.set(shard_count)

    def render(self) -> bytes:
        """The text exposition format of everything in this registry."""
        return generate_latest(self.registry)


class _Observed:
    """Observations of one histogram child gathered over a batch: how many fell in each
    bucket, and their sum, added to the child in one step by :meth:`into`."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, buckets: Sequence[float]) -> None:
        self.bounds = (*buckets, math.inf)
        self.counts = [0] * len(self.bounds)
        self.total = 0.0

    def add(self, value: float) -> None:
        # The bucket Histogram.observe picks: the first bound the value does not exceed.
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def into(self, child: Histogram) -> None:
        """Add the batch to ``child``, a labelled child of a histogram with these buckets.

        prometheus-client observes one value at a time; a bulk observation adds to the
        child's per-bucket values and its sum directly (the attributes ``observe``
        updates). tests/unit/test_metrics.py checks that the result equals one
        ``observe`` per value, should a release of the client change them."""
        child._sum.inc(self.total)
        buckets = child._buckets
        for i, n in enumerate(self.counts):
            if n:
                buckets[i].inc(n)


class _SchedulerMetrics:
    """The metrics of a scheduler process (:meth:`Metrics.scheduler_started`)."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.tick = Histogram(
            "cronwheel_scheduler_tick_seconds",
            "How long one scheduler tick took (reading due jobs, writing their runs).",
            buckets=TICK_BUCKETS,
            registry=r,
        )
        self.shards_owned = Gauge(
            "cronwheel_scheduler_shards_owned",
            "Shards this scheduler holds (1 of 1 when it runs unsharded).",
            registry=r,
        )
        self.shards = Gauge(
            "cronwheel_scheduler_shards",
            "How many shards the job space is split into, as this scheduler sees it.",
            registry=r,
        )
        self.lead = Gauge(
            "cronwheel_scheduler_lead_seconds",
            "How far ahead the last tick materialised runs (the horizon, more for a herd).",
            registry=r,
        )


_default: Metrics | None = None
_default_lock = threading.Lock()


def default() -> Metrics:
    """This process's metrics: what ``/metrics`` and ``--metrics-port`` serve."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Metrics()
        return _default


class GaugeCache:
    """One store read serves every scrape for ``ttl`` seconds; concurrent scrapes of a
    stale cache share one read instead of each making their own."""

    def __init__(
        self,
        read: Callable[[], Awaitable[Snapshot]],
        *,
        ttl: float = GAUGE_TTL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self.ttl = ttl
        self._monotonic = monotonic
        self.value: Snapshot | None = None
        self.read_at = -float("inf")
        self.reads = 0
        """How many times the store was read: what the tests count."""
        self._pending: asyncio.Future[Snapshot] | None = None

    async def get(self) -> Snapshot:
        """The cached snapshot, read again first if it is older than ``ttl``. A failed
        read raises, and the next call tries again."""
        if self.value is not None and self._monotonic() - self.read_at < self.ttl:
            return self.value
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._refresh())
        pending = self._pending
        try:
            return await asyncio.shield(pending)
        finally:
            if pending.done() and self._pending is pending:
                self._pending = None

    async def _refresh(self) -> Snapshot:
        self.reads += 1
        value = await self._read()
        self.value, self.read_at = value, self._monotonic()
        return value


class StoreGauges(Collector):
    """The store-derived gauges, from the last snapshot a scrape read (see :meth:`refresh`)."""

    def __init__(self, cache: GaugeCache, *, tenant_labels: bool = False) -> None:
        self.cache = cache
        self.tenant_labels = tenant_labels
        self.up = 0
        self._snapshot: Snapshot | None = None

    async def refresh(self) -> None:
        """Read (or reuse) the snapshot; a store that does not answer sets ``up`` to 0
        and leaves the store-derived gauges out rather than showing stale numbers."""
        try:
            async with asyncio.timeout(STORE_READ_TIMEOUT):  # the shared read goes on
                self._snapshot = await self.cache.get()
            self.up = 1
        except Exception:
            self._snapshot, self.up = None, 0

    def describe(self) -> Iterable[Metric]:
        return []  # collected at scrape time: nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "cronwheel_store_up", "1 if the last read of the store-derived gauges succeeded."
        )
        up.add_metric([], self.up)
        yield up
        snap = self._snapshot
        if snap is None:
            return
        due = GaugeMetricFamily(
            "cronwheel_runs_due", "Runs due and not started yet.", labels=["pool", "priority"]
        )
        for (pool, priority), n in sorted(snap.due.items()):
            due.add_metric([pool, _priority_name(priority)], n)
        yield due
        oldest = GaugeMetricFamily(
            "cronwheel_oldest_due_run_age_seconds",
            "How long the oldest due run of a pool has waited to start (of the runs no"
            " limit holds back: see cronwheel_runs_held).",
            labels=["pool"],
        )
        for pool, at in sorted(snap.oldest_due.items()):
            oldest.add_metric([pool], max((snap.read_at - at).total_seconds(), 0.0))
        yield oldest
        held = GaugeMetricFamily(
            "cronwheel_runs_held",
            "Runs due and not started because a limit holds them back, by reason:"
            " concurrency_key (their key is full), overlap_queue (their overlap: queue job"
            " has a run running). Counted in cronwheel_runs_due, never the oldest due run.",
            labels=["pool", "reason"],
        )
        for (pool, reason), n in sorted(snap.held.items()):
            held.add_metric([pool, reason], n)
        yield held
        running = GaugeMetricFamily(
            "cronwheel_runs_running", "Runs held by a worker (claimed).", labels=["pool"]
        )
        for pool, n in sorted(snap.running.items()):
            running.add_metric([pool], n)
        yield running
        dead = GaugeMetricFamily(
            "cronwheel_dead_letter_runs",
            "Runs in the dead-letter queue (state dead).",
            labels=["tenant"],
        )
        if self.tenant_labels:
            for tenant, n in sorted(snap.dead.items()):
                dead.add_metric([tenant], n)
        else:
            dead.add_metric([ALL_TENANTS], sum(snap.dead.values()))
        yield dead
        workers = GaugeMetricFamily(
            "cronwheel_workers_alive",
            f"Workers serving a pool, seen within {WORKER_ALIVE_SECONDS:g} s.",
            labels=["pool"],
        )
        for pool, n in sorted(snap.workers.items()):
            workers.add_metric([pool], n)
        yield workers


def _priority_name(priority: int) -> str:
    """``critical`` … ``low``, as the API spells a job's priority."""
    try:
        return Priority(priority).name.lower()
    except ValueError:
        return str(priority)


class ApiMetrics:
    """What the API's ``GET /metrics`` serves: this process's metrics and the
    store-derived gauges."""

    def __init__(
        self,
        read: Callable[[], Awaitable[Snapshot]],
        *,
        tenant_labels: bool = False,
        metrics: Metrics | None = None,
    ) -> None:
        self.metrics = metrics or default()
        self.cache = GaugeCache(read)
        self.gauges = StoreGauges(self.cache, tenant_labels=tenant_labels)
        # A registry of its own per app: the process's metrics and this app's gauges,
        # without registering the gauges twice when one process builds two apps.
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Both(self.metrics.registry))
        self.registry.register(self.gauges)

    async def render(self) -> bytes:
        await self.gauges.refresh()
        return generate_latest(self.registry)


class _Both(Collector):
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()


class GaugeSource(Protocol):
    """What a scrape reads the store-derived gauges from: a store's
    :meth:`~cronwheel.store.base.Store.read_gauges`."""

    async def read_gauges(self, *, now: datetime, workers_seen_since: datetime) -> Snapshot: ...


def store_reader(store: GaugeSource, *, clock: Clock) -> Callable[[], Awaitable[Snapshot]]:
    """The one read a scrape makes: the store's gauges at the clock's now."""

    async def read() -> Snapshot:
        now = clock.now()
        return await store.read_gauges(
            now=now, workers_seen_since=now - timedelta(seconds=WORKER_ALIVE_SECONDS)
        )

    return read


@contextlib.contextmanager
def serving(port: int | None, host: str, metrics: Metrics | None = None) -> Iterator[int | None]:
    """Serve this process's metrics on ``host:port`` (``--metrics-port``) while in the
    block; yield the bound port (None when ``port`` is None: off)."""
    if port is None:
        yield None
        return
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, host, (metrics or default()).registry)
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
