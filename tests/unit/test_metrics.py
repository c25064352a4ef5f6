"""The metrics module: what the worker records per batch, the store gauges' cache and
their rendering (the real-process scrape is in tests/e2e/test_metrics.py)."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.values import MutexValue

from cronwheel.core.model import AttemptOutcome, RunState
from cronwheel.observability.metrics import (
    DURATION_BUCKETS,
    LAG_BUCKETS,
    GaugeCache,
    Metrics,
    StoreGauges,
    status_class,
)
from cronwheel.store.base import Completion, GaugeReading

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def reading(**overrides: object) -> GaugeReading:
    values: dict[str, object] = {
        "read_at": T0,
        "due": {},
        "oldest_due": {},
        "running": {},
        "dead": {},
        "workers": {},
    }
    return GaugeReading(**(values | overrides))  # type: ignore[arg-type]


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_one_read_serves_every_scrape_until_the_ttl_has_passed() -> None:
    clock = FakeMonotonic()
    reads: list[float] = []

    async def read() -> GaugeReading:
        reads.append(clock.now)
        return reading()

    cache = GaugeCache(read, ttl=5.0, monotonic=clock)
    for _ in range(10):
        await cache.get()
    clock.now += 4.9
    await cache.get()
    assert reads == [100.0]
    clock.now += 0.1
    await cache.get()
    assert reads == [100.0, 105.0]


async def test_concurrent_scrapes_of_a_stale_cache_share_one_read() -> None:
    release = asyncio.Event()
    reads = 0

    async def read() -> GaugeReading:
        nonlocal reads
        reads += 1
        await release.wait()
        return reading(running={"mail": reads})

    cache = GaugeCache(read, ttl=5.0, monotonic=FakeMonotonic())
    scrapes = [asyncio.create_task(cache.get()) for _ in range(20)]
    await asyncio.sleep(0)
    release.set()
    got = await asyncio.gather(*scrapes)
    assert reads == 1
    assert all(g.running == {"mail": 1} for g in got)


async def test_a_failed_read_is_not_cached_and_the_next_scrape_reads_again() -> None:
    clock = FakeMonotonic()
    answers: list[GaugeReading | Exception] = [OSError("store down"), reading(dead={"a": 2})]

    async def read() -> GaugeReading:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    cache = GaugeCache(read, ttl=5.0, monotonic=clock)
    with pytest.raises(OSError):
        await cache.get()
    assert (await cache.get()).dead == {"a": 2}


async def test_store_gauges_render_one_total_unless_tenant_labels_are_asked_for() -> None:
    snap = reading(
        due={("mail", 2): 3, ("mail", 0): 1},
        oldest_due={"mail": T0 - timedelta(seconds=7.5)},
        running={"mail": 2},
        dead={"acme": 2, "default": 1},
        workers={"mail": 1},
    )

    async def read() -> GaugeReading:
        return snap

    for tenant_labels, dead in (
        (False, {(("tenant", "all"),): 3.0}),
        (True, {(("tenant", "acme"),): 2.0, (("tenant", "default"),): 1.0}),
    ):
        gauges = StoreGauges(GaugeCache(read), tenant_labels=tenant_labels)
        await gauges.refresh()
        registry = CollectorRegistry()
        registry.register(gauges)
        got = samples(generate_latest(registry).decode())
        assert got[("cronwheel_store_up", ())] == 1
        assert got[("cronwheel_runs_due", (("pool", "mail"), ("priority", "normal")))] == 3
        assert got[("cronwheel_runs_due", (("pool", "mail"), ("priority", "critical")))] == 1
        assert got[("cronwheel_oldest_due_run_age_seconds", (("pool", "mail"),))] == 7.5
        assert got[("cronwheel_runs_running", (("pool", "mail"),))] == 2
        assert got[("cronwheel_workers_alive", (("pool", "mail"),))] == 1
        assert {k[1]: v for k, v in got.items() if k[0] == "cronwheel_dead_letter_runs"} == dead


async def test_a_store_that_does_not_answer_sets_store_up_to_0_and_leaves_its_gauges_out() -> None:
    async def read() -> GaugeReading:
        raise OSError("connection refused")

    gauges = StoreGauges(GaugeCache(read))
    await gauges.refresh()
    names = {m.name for m in gauges.collect()}
    assert names == {"cronwheel_store_up"}
    assert next(iter(gauges.collect())).samples[0].value == 0


def test_a_batch_of_completions_records_attempts_durations_and_lags() -> None:
    m = Metrics()

    def done(outcome: AttemptOutcome, lag: float, seconds: float) -> Completion:
        return Completion(
            run_id=1,
            fence=1,
            worker_id="w",
            state=RunState.SUCCEEDED,
            outcome=outcome,
            started_at=T0,
            finished_at=T0 + timedelta(seconds=seconds),
            lag_seconds=lag,
        )

    m.attempts_done(
        [
            ("mail", done(AttemptOutcome.SUCCEEDED, 0.0004, 0.25)),
            ("mail", done(AttemptOutcome.SUCCEEDED, 0.003, 0.5)),
            ("mail", done(AttemptOutcome.FAILED, 0.0015, 1.0)),
        ]
    )
    m.attempts_lost(2)
    got = samples(m.render().decode())
    attempts = "cronwheel_attempts_total"
    assert got[(attempts, (("outcome", "succeeded"), ("pool", "mail")))] == 2
    assert got[(attempts, (("outcome", "failed"), ("pool", "mail")))] == 1
    assert got[(attempts, (("outcome", "lost"), ("pool", "unknown")))] == 2
    lag = "cronwheel_run_start_lag_seconds_bucket"
    # millisecond buckets: the three lags land in three different ones
    assert got[(lag, (("le", "0.0005"), ("pool", "mail")))] == 1
    assert got[(lag, (("le", "0.002"), ("pool", "mail")))] == 2
    assert got[(lag, (("le", "0.005"), ("pool", "mail")))] == 3
    duration = "cronwheel_run_duration_seconds_sum"
    assert got[(duration, (("outcome", "succeeded"), ("pool", "mail")))] == 0.75


@pytest.mark.parametrize(
    ("status", "label"), [(200, "2xx"), (204, "2xx"), (302, "3xx"), (404, "4xx"), (503, "5xx")]
)
def test_a_webhook_status_is_counted_by_its_class(status: int, label: str) -> None:
    assert status_class(status) == label
    m = Metrics()
    m.webhook_response(status)
    m.webhook_response("timeout")
    got = samples(m.render().decode())
    counter = "cronwheel_webhook_responses_total"
    assert got[(counter, (("status_class", label),))] == 1
    assert got[(counter, (("status_class", "timeout"),))] == 1
    assert got[(counter, (("status_class", "connection"),))] == 0  # there from the start


def test_two_metrics_in_one_process_do_not_collide() -> None:
    a, b = Metrics(), Metrics()
    a.runs_skipped("misfire", 3)
    assert (
        samples(b.render().decode())[("cronwheel_runs_skipped_total", (("reason", "misfire"),))]
        == 0
    )


async def test_a_store_that_hangs_fails_the_read_within_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("cronwheel.observability.metrics.STORE_READ_TIMEOUT", 0.05)
    never = asyncio.Event()

    async def read() -> GaugeReading:
        await never.wait()
        raise AssertionError("unreachable")

    gauges = StoreGauges(GaugeCache(read))
    await asyncio.wait_for(gauges.refresh(), timeout=10)
    assert gauges.up == 0


def test_the_lag_of_a_run_a_limit_may_hold_back_is_a_wait_not_a_start_lag() -> None:
    """Issue 29: a run that waited 69 s for its full concurrency key made
    CronwheelRunsStartLate fire. Runs with a key or under ``overlap: queue`` record their
    lag in cronwheel_run_start_wait_seconds instead (decision 0042)."""
    m = Metrics()

    def done(run_id: int, lag: float) -> Completion:
        return Completion(
            run_id=run_id,
            fence=1,
            worker_id="w",
            state=RunState.SUCCEEDED,
            outcome=AttemptOutcome.SUCCEEDED,
            started_at=T0,
            finished_at=T0,
            lag_seconds=lag,
        )

    m.attempts_done([("mail", done(1, 0.001)), ("mail", done(2, 69.0))], limited={2})
    got = samples(m.render().decode())
    inf = (("le", "+Inf"), ("pool", "mail"))
    assert got[("cronwheel_run_start_lag_seconds_bucket", inf)] == 1
    assert got[("cronwheel_run_start_lag_seconds_sum", (("pool", "mail"),))] == 0.001
    assert got[("cronwheel_run_start_wait_seconds_bucket", inf)] == 1
    assert got[("cronwheel_run_start_wait_seconds_sum", (("pool", "mail"),))] == 69.0
    assert got[("cronwheel_attempts_total", (("outcome", "succeeded"), ("pool", "mail")))] == 2


async def test_runs_held_back_by_a_limit_have_a_gauge_of_their_own() -> None:
    async def read() -> GaugeReading:
        return reading(
            due={("mail", 2): 3},
            oldest_due={"mail": T0 - timedelta(seconds=5)},
            held={("mail", "concurrency_key"): 2},
        )

    gauges = StoreGauges(GaugeCache(read))
    await gauges.refresh()
    [held] = [f for f in gauges.collect() if f.name == "cronwheel_runs_held"]
    assert [(s.labels, s.value) for s in held.samples] == [
        ({"pool": "mail", "reason": "concurrency_key"}, 2)
    ]


def _attempt(run_id: int, outcome: AttemptOutcome, lag: float, seconds: float) -> Completion:
    return Completion(
        run_id=run_id,
        fence=1,
        worker_id="w",
        state=RunState.SUCCEEDED,
        outcome=outcome,
        started_at=T0,
        finished_at=T0 + timedelta(seconds=seconds),
        lag_seconds=lag,
    )


def test_a_batch_goes_to_prometheus_in_one_update_per_value_it_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 28 item 3: a worker writing thousands of completions a second made three
    locked prometheus updates per run (counter, duration, lag). A batch is counted first,
    then added: one update per counter, bucket and sum it changed."""
    m = Metrics()
    updates = 0
    inc = MutexValue.inc

    def counted(self: MutexValue, amount: float) -> None:
        nonlocal updates
        updates += 1
        inc(self, amount)

    monkeypatch.setattr(MutexValue, "inc", counted)
    batch = [("mail", _attempt(i, AttemptOutcome.SUCCEEDED, 0.001, 0.002)) for i in range(1000)]
    m.attempts_done(batch)
    # the counter; the duration's bucket and sum; the lag's bucket and sum
    assert updates == 5
    monkeypatch.undo()
    got = samples(m.render().decode())
    assert got[("cronwheel_attempts_total", (("outcome", "succeeded"), ("pool", "mail")))] == 1000
    assert got[("cronwheel_run_start_lag_seconds_count", (("pool", "mail"),))] == 1000


def test_a_batch_recorded_in_bulk_reads_as_one_observe_per_run() -> None:
    """The bulk path adds to prometheus-client's per-bucket values directly: whatever a
    batch holds (values on a bucket's bound, negative lags, beyond the last bucket, two
    pools, a limited run), the exposition is the one observing each value gives."""
    rng = random.Random(51)
    bounds = [*LAG_BUCKETS, *DURATION_BUCKETS]
    values = [*bounds, -1.0, 0.0, 1e9, *(rng.uniform(0, 4000) for _ in range(300))]
    outcomes = [AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED, AttemptOutcome.TIMED_OUT]
    batch = [
        (
            rng.choice(["mail", "reports"]),
            _attempt(i, rng.choice(outcomes), rng.choice(values), abs(rng.choice(values))),
        )
        for i in range(2000)
    ]
    limited = {i for i in range(2000) if i % 7 == 0}
    bulk, one_by_one = Metrics(), Metrics()
    bulk.attempts_done(batch[:1500], limited=limited)
    bulk.attempts_done(batch[1500:], limited=limited)
    for pool, c in batch:
        assert c.started_at is not None and c.lag_seconds is not None
        one_by_one.attempts.labels(pool, c.outcome.value).inc()
        seconds = (c.finished_at - c.started_at).total_seconds()
        one_by_one.duration.labels(pool, c.outcome.value).observe(seconds)
        lag = one_by_one.start_wait if c.run_id in limited else one_by_one.start_lag
        lag.labels(pool).observe(max(c.lag_seconds, 0.0))

    def exposition(m: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        got = samples(m.render().decode())
        return {k: pytest.approx(v) for k, v in got.items() if not k[0].endswith("_created")}

    assert exposition(bulk) == exposition(one_by_one)
