"""A scheduler SIGKILLed while per-second cron jobs fire (2,000 of them with
CRONWHEEL_CLUSTER_FULL=1, 500 otherwise): nothing missed, nothing doubled (I1, I2), and its
shards owned again within twice the shard lease TTL."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import datetime, timedelta

import pytest

import cronwheel
from cronwheel.core.model import Run
from tests.cluster.conftest import (
    Cluster,
    Execution,
    all_runs,
    check_history,
    executions,
    quiet,
    scale,
    shards_of,
)
from tests.engine.helpers import eventually

JOBS = scale(500, 2_000)
WINDOW_SECONDS = scale(15, 60)
"""Long enough for the kill, the failover (bound: 2 x SHARD_LEASE) and the newcomer's
joining (shards handed over between live schedulers) to fall inside it, with seconds of
steady work after them."""
KILL_AFTER_SECONDS = scale(5, 20)
"""When, into the window, one scheduler dies: once every scheduler is materialising
ahead (its horizon is about two seconds)."""
SHARDS = 16
SHARD_LEASE = 3.0
WORKER_LEASE = 10.0
CONCURRENCY = 50


@pytest.mark.timeout(400)
async def test_a_killed_scheduler_misses_and_doubles_nothing(
    cw: cronwheel.JobService, cluster: Cluster
) -> None:
    store = cw.store
    schedulers = [
        cluster.scheduler(f"scheduler-{i}", shards=SHARDS, shard_lease=SHARD_LEASE)
        for i in range(3)
    ]
    workers = [
        cluster.worker(f"worker-{i}", lease=WORKER_LEASE, concurrency=CONCURRENCY) for i in range(3)
    ]

    async def spread() -> bool:  # every shard leased, each scheduler holding some
        leases = [lease for lease in await store.list_shard_leases() if lease.shard >= 0]
        owned = [shards_of(leases, s) for s in schedulers]
        return sum(map(len, owned)) == SHARDS and all(owned)

    await eventually(spread, timeout=60)

    every_second = {"kind": "cron", "cron": "* * * * * *"}
    noop = {"type": "handler", "name": "noop"}
    jobs = await cw.create_many(
        [{"name": f"tick-{i}", "schedule": every_second, "action": noop} for i in range(JOBS)]
    )
    # The window starts at the first whole second that every job surely fires at.
    first = _whole_second_after(max(j.created_at for j in jobs)) + timedelta(seconds=1)
    last = first + timedelta(seconds=WINDOW_SECONDS - 1)
    expected = {(j.id, first + timedelta(seconds=k)) for j in jobs for k in range(WINDOW_SECONDS)}

    await _sleep_until(cw, first + timedelta(seconds=KILL_AFTER_SECONDS))
    victim = schedulers[0]
    orphans = shards_of(await store.list_shard_leases(), victim)
    assert orphans, "the victim held no shard: nothing would be tested"
    killed = time.monotonic()
    victim.kill()
    newcomer = cluster.scheduler("scheduler-3", shards=SHARDS, shard_lease=SHARD_LEASE)

    async def owned_again() -> float | None:
        now = await store.now()
        leases = {lease.shard: lease for lease in await store.list_shard_leases()}
        if all(
            (lease := leases[s]).holder is not None
            and not victim.owns(lease.holder)
            and lease.expires_at is not None
            and lease.expires_at > now
            for s in orphans
        ):
            return time.monotonic() - killed
        return None

    failover: float = await eventually(owned_again, timeout=60)
    print(
        f"\nscheduler failover: {failover:.1f} s until its {len(orphans)} shards were owned"
        f" again (shard lease {SHARD_LEASE:g} s, bound {2 * SHARD_LEASE:g} s)"
    )

    async def materialised_through_window() -> bool:  # every job's next fire is past it
        return not await store.fetch_due_jobs(last, limit=1)

    await eventually(materialised_through_window, timeout=120)
    for s in [*schedulers, newcomer]:
        if s is not victim:
            assert s.alive, f"{s.name} died:\n{s.output()}"
            s.kill()  # no new runs from here on: the workers drain what exists
    await eventually(lambda: quiet(store), timeout=120)
    assert all(w.alive for w in workers), [w.output() for w in workers if not w.alive]

    runs = await all_runs(store)
    in_window = [(r.job_id, r.scheduled_for) for r in runs if first <= r.scheduled_for <= last]
    doubled = [key for key, n in Counter(in_window).items() if n > 1]
    missing = expected - set(in_window)
    extra = set(in_window) - expected
    recorded = executions(cluster.executions)
    history = await check_history(store, runs, recorded)
    p50, p99, worst = _start_lag(runs, recorded)
    print(
        f"scheduler kill: {len(expected)} occurrences expected in the window"
        f" ({JOBS} jobs x {WINDOW_SECONDS} s), {len(set(in_window))} materialised,"
        f" {len(missing)} missing, {len(doubled)} doubled;"
        f" {history.executions} executions, {history.duplicates} duplicates,"
        f" {history.lost} lost attempts; start lag p50 {p50:.3f} s, p99 {p99:.3f} s,"
        f" max {worst:.3f} s"
    )
    assert not missing, f"{len(missing)} occurrences never materialised: {sorted(missing)[:5]}"
    assert not doubled, f"occurrences materialised twice: {doubled[:5]}"
    assert not extra, f"runs at instants the schedule does not have: {sorted(extra)[:5]}"
    assert failover <= 2 * SHARD_LEASE


def _whole_second_after(instant: datetime) -> datetime:
    return instant.replace(microsecond=0) + timedelta(seconds=1)


async def _sleep_until(cw: cronwheel.JobService, instant: datetime) -> None:
    """Sleep until ``instant`` by the store's clock (the one the cluster follows)."""
    await asyncio.sleep(max((instant - await cw.store.now()).total_seconds(), 0.0))


def _start_lag(runs: list[Run], recorded: list[Execution]) -> tuple[float, float, float]:
    """p50, p99 and max of how late handlers started after their run's instant (the
    orphaned shards' runs are late by up to the failover time)."""
    due = {r.id: r.scheduled_for.timestamp() for r in runs}
    lags = sorted(e.start_ns / 1e9 - due[e.run_id] for e in recorded)
    if not lags:
        return 0.0, 0.0, 0.0
    return lags[len(lags) // 2], lags[int(len(lags) * 0.99)], lags[-1]
