"""PostgreSQL restarted under load: every scheduler and worker comes back on its own, no
occurrence is missed or doubled, every run succeeds (I1, I2, I4)."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

import pytest

import cronwheel
from cronwheel.core.model import SCHEDULER_TENANT, SHARED_WORKERS, RunState
from cronwheel.errors import StoreUnavailable
from tests import pg
from tests.cluster.conftest import (
    Cluster,
    Proc,
    all_runs,
    check_history,
    databases_dropped,
    executions,
    quiet,
    scale,
)
from tests.engine.helpers import eventually

JOBS = 200
LOAD_BEFORE_SECONDS = scale(3, 5)
"""How long the cluster works normally before the restart (then the test waits until
every process has worked since the window began)."""
LOAD_AFTER_SECONDS = scale(5, 10)
"""How much of the schedule after the restart the window covers (beyond the recovery,
which the test waits for on its own: every process working again)."""
SHARDS = 16
SHARD_LEASE = 3.0
WORKER_LEASE = 10.0

T = TypeVar("T")


def restart_command() -> list[str] | None:
    """How to restart the tests' PostgreSQL, only when asked: ``CRONWHEEL_TEST_PG_RESTART``
    names a command, or ``local`` for this machine's own cluster (root, pg_ctlcluster,
    one cluster, a server on loopback). CI asks for ``local`` (``CI=true``): a developer's
    test run never restarts the machine's PostgreSQL unless told to."""
    command = os.environ.get("CRONWHEEL_TEST_PG_RESTART") or ("local" if pg.REQUIRED else "")
    if command != "local":
        return shlex.split(command) or None
    local = urlsplit(pg.DSN).hostname in ("127.0.0.1", "localhost", "::1")
    versions = sorted(p.name for p in Path("/etc/postgresql").glob("*")) if local else []
    if os.geteuid() != 0 or shutil.which("pg_ctlcluster") is None or len(versions) != 1:
        return None
    return ["pg_ctlcluster", "--skip-systemctl-redirect", versions[0], "main", "restart"]


@pytest.fixture
def restart() -> list[str]:
    command = restart_command()
    if command is None:
        reason = (
            "restarting PostgreSQL was not asked for: set CRONWHEEL_TEST_PG_RESTART to a"
            " command that restarts it, or to 'local' (as root, beside one pg_ctlcluster"
            " cluster) to restart this machine's"
        )
        if pg.REQUIRED:
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    # An earlier test's database may still be being dropped in the background: a restart
    # would cut the drop short, and fail the session at its end.
    databases_dropped()
    return command


@pytest.mark.timeout(300)
async def test_the_cluster_lives_through_a_postgres_restart(
    restart: list[str], cw: cronwheel.JobService, cluster: Cluster
) -> None:
    store = cw.store
    schedulers = [
        cluster.scheduler(f"scheduler-{i}", shards=SHARDS, shard_lease=SHARD_LEASE)
        for i in range(2)
    ]
    workers = [cluster.worker(f"worker-{i}", lease=WORKER_LEASE, concurrency=20) for i in range(2)]
    every_second = {"kind": "cron", "cron": "* * * * * *"}
    noop = {"type": "handler", "name": "noop"}
    jobs = await cw.create_many(
        [{"name": f"tick-{i}", "schedule": every_second, "action": noop} for i in range(JOBS)]
    )
    first = max(j.created_at for j in jobs).replace(microsecond=0) + timedelta(seconds=2)
    await asyncio.sleep((first - await store.now()).total_seconds() + LOAD_BEFORE_SECONDS)

    async def working_since(instant: datetime) -> bool:
        return await _working_since(cw, cluster, schedulers, workers, instant)

    working_before = await eventually(lambda: _with_store(lambda: working_since(first)), 60)
    assert working_before, "the cluster was not working before the restart"

    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(*restart)
    assert await proc.wait() == 0, f"{restart} failed"
    restarted = time.monotonic() - began
    assert pg.unreachable_reason() is None  # left running, as every test must
    up: datetime = await eventually(lambda: _with_store(store.now), timeout=60)

    async def recovered() -> bool:
        if not await working_since(up):
            return False
        # and runs complete again: an occurrence due after the restart has succeeded
        done = await store.list_runs("default", state=RunState.SUCCEEDED, limit=JOBS)
        return any(r.scheduled_for > up for r in done)

    await eventually(lambda: _with_store(recovered), timeout=120)
    recovery = time.monotonic() - began

    last = up.replace(microsecond=0) + timedelta(seconds=LOAD_AFTER_SECONDS)
    await eventually(lambda: _with_store(lambda: _materialised_through(cw, last)), timeout=120)
    for proc_ in [*schedulers, *workers]:
        assert proc_.alive, f"{proc_.name} died:\n{proc_.output()}"
    for s in schedulers:
        s.kill()  # no new runs from here on: the workers drain what exists
    await eventually(lambda: quiet(store), timeout=120)

    runs = await all_runs(store)
    seconds = int((last - first).total_seconds()) + 1
    expected = {(j.id, first + timedelta(seconds=k)) for j in jobs for k in range(seconds)}
    in_window = [(r.job_id, r.scheduled_for) for r in runs if first <= r.scheduled_for <= last]
    history = await check_history(store, runs, executions(cluster.executions))
    print(
        f"\npostgres restart: the restart took {restarted:.1f} s; every scheduler and worker"
        f" was working again and runs completing {recovery:.1f} s after it began;"
        f" {len(expected)} occurrences in the window ({JOBS} jobs x {seconds} s),"
        f" {len(expected - set(in_window))} missing,"
        f" {sum(n > 1 for n in Counter(in_window).values())} doubled;"
        f" {history.executions} executions, {history.duplicates} duplicates,"
        f" {history.lost} lost attempts"
    )
    assert set(in_window) == expected
    assert len(in_window) == len(expected)


async def _working_since(
    cw: cronwheel.JobService,
    cluster: Cluster,
    schedulers: list[Proc],
    workers: list[Proc],
    instant: datetime,
) -> bool:
    """Since ``instant``, every scheduler announced itself and holds shards, and every
    worker heartbeat and started a run."""
    members = await cw.store.list_workers(SCHEDULER_TENANT, seen_since=instant)
    seen = await cw.store.list_workers(SHARED_WORKERS, seen_since=instant)
    leases = [lease for lease in await cw.store.list_shard_leases() if lease.shard >= 0]
    ran = {e.pid for e in executions(cluster.executions) if e.start_ns > instant.timestamp() * 1e9}
    return (
        all(any(s.owns(m.id) for m in members) for s in schedulers)
        and all(any(s.owns(lease.holder) for lease in leases) for s in schedulers)
        and all(any(w.owns(m.id) for m in seen) for w in workers)
        and all(w.pid in ran for w in workers)
    )


async def _materialised_through(cw: cronwheel.JobService, last: datetime) -> bool:
    """Every job's next fire is past ``last``: its runs up to there are written."""
    return not await cw.store.fetch_due_jobs(last, limit=1)


async def _with_store(check: Callable[[], Awaitable[T]]) -> T | None:
    """``check()``, or None while the store is unreachable (the test's own connections
    die with the server too, and come back like everyone else's)."""
    try:
        return await check()
    except StoreUnavailable:
        return None
