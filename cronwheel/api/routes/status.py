"""``GET /v1/status``: is it healthy? One answer per pool (due, running, lag, throughput,
failures, dead letter), the live workers and schedulers, the maintenance owner, and
whether the store answers.

Scoping (docs/decisions/0021-status-scoping.md): a system admin acting as itself
sees every tenant's numbers and every process in full; anyone else (a system admin acting
for a tenant too) sees the numbers of its own tenant's runs, its own remote workers, and
the shared fleet (in-process workers, schedulers, the maintenance owner) without hosts,
loads or scheduler names. Another tenant's job names, pools or counts are never shown.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import Field

from cronwheel._version import installed_version
from cronwheel.api.guards import GuardedRoute
from cronwheel.api.openapi import problems
from cronwheel.core.model import (
    MAINTENANCE_LEASE,
    SCHEDULER_TENANT,
    SEEN_WINDOW,
    SHARED_WORKERS,
    ShardLease,
    WorkerInfo,
)
from cronwheel.core.records import PoolStatus, Replication
from cronwheel.store.base import Store
from cronwheel.web.auth import Principal, Reader
from cronwheel.web.schemas import Instant, _Out, dump
from cronwheel.web.state import api_state

router = APIRouter(tags=["status"], route_class=GuardedRoute)

STORE_TIMEOUT = 2.0
"""Seconds the store has to answer; a status page must not hang on a dead store."""
LATE_AFTER = timedelta(seconds=60)
"""A due run waiting longer than this is a problem worth a line."""
OVERDUE_AFTER = timedelta(seconds=30)
"""An active job whose fire time passed this long ago has no scheduler keeping up (a
scheduler plans runs ahead of their time)."""
OVERDUE_LIMIT = 10_000
"""Overdue jobs are counted no further: past it, the answer changes nothing."""
WindowMinutes = Annotated[
    int,
    Query(
        ge=1,
        le=60,
        description="Minutes of finished attempts the lag, throughput and failures cover.",
    ),
]


class StoreOut(_Out):
    reachable: bool
    answered_in_ms: float | None
    schema_version: int | None
    error: str | None = Field(description="Why the store did not answer (an error class).")


class PoolOut(_Out):
    pool: str
    due: int = Field(description="Runs due and not started.")
    held_by_key: int = Field(
        description="Of the due runs, those waiting for their concurrency key, which is full:"
        " the limit working, not lateness (never the oldest due run)."
    )
    held_by_overlap: int = Field(
        description="Of the due runs, those of an `overlap: queue` job waiting for its"
        " running run, or for the pipeline run it started to end (never the oldest due run)."
    )
    running: int
    oldest_due_at: Instant | None = Field(
        description="The oldest due run that no limit holds back (see held_by_key)."
    )
    oldest_due_age_seconds: float | None
    lag_p50_seconds: float | None = Field(description="Median start lag in the window.")
    lag_p99_seconds: float | None
    finished: int = Field(description="Attempts that finished in the window.")
    throughput_per_minute: float
    failures: int = Field(description="Attempts of the window that failed, timed out or were lost.")
    dead: int = Field(description="Runs in the dead-letter queue.")
    workers: int = Field(description="Live workers (that the caller may see) serving the pool.")


class StatusWorkerOut(_Out):
    id: str
    tenant_id: str | None = Field(description="None for a shared (in-process) worker.")
    shared: bool
    host: str | None
    pools: list[str]
    capacity: int
    in_flight: int | None
    last_seen_at: Instant


class SchedulerOut(_Out):
    id: str | None = Field(description="Shown to system admins only.")
    shards_owned: int
    last_seen_at: Instant


class ShardsOut(_Out):
    total: int = Field(description="Shards that have ever been leased.")
    owned: int = Field(description="Of those, held under a live lease.")
    unowned: list[int] = Field(
        default_factory=list,
        description="The others: shards with no live lease, whose jobs get no new runs.",
    )


class MaintenanceOut(_Out):
    active: bool
    owner: str | None = Field(description="Shown to system admins only.")
    expires_at: Instant | None


class ReplicationOut(_Out):
    mode: str = Field(
        description="`synchronous` (a commit returns once a standby has it: a promoted"
        " standby has every acknowledged write), `asynchronous` (a failover loses the"
        " last commits), `none` (no standby streams; an SQLite file) or `waiting`"
        " (synchronous replication configured, no synchronous standby connected: every"
        " commit waits for one). docs/cluster.md#high-availability."
    )
    standbys: int = Field(description="Standbys streaming from the store's server.")
    synchronous_standby_names: str | None = Field(
        description="The server's setting; shown to system admins only."
    )
    synchronous_commit: str | None = Field(description="The server's setting.")


class StatusReportOut(_Out):
    """What ``cronwheel status`` shows."""

    version: str = Field(description="The API server's cronwheel version.")
    now: Instant
    scope: str = Field(description="`system` (every tenant) or `tenant`.")
    tenant_id: str | None
    window_minutes: int
    healthy: bool
    problems: list[str]
    notes: list[str] = Field(
        default_factory=list,
        description="What is waiting by design, one line each: runs a limit holds back.",
    )
    store: StoreOut
    replication: ReplicationOut | None = Field(
        description="How the store replicates what it commits; null when it did not answer."
    )
    pools: list[PoolOut]
    workers: list[StatusWorkerOut]
    schedulers: list[SchedulerOut]
    shards: ShardsOut
    maintenance: MaintenanceOut
    overdue_jobs: int | None = Field(
        description="Active jobs (of every tenant) whose fire time passed over 30 s ago"
        " (counted up to 10,000): no scheduler keeps up. System admins only; null otherwise."
    )


@router.get(
    "/v1/status",
    response_model=StatusReportOut,
    responses=problems(),
    summary="Is it healthy?",
)
async def status(request: Request, principal: Reader, window: WindowMinutes = 5) -> Any:
    """Per pool: due, running, oldest due age, start lag p50/p99, throughput, failures and
    dead letter over the last ``window`` minutes; live workers and their pools;
    schedulers and the shards they own; the maintenance owner; the store's answer."""
    state = api_state(request)
    now = state.clock.now()
    system = principal.system_admin and principal.home_tenant_id is None
    store = await _probe(state.store)
    pools: list[PoolStatus] = []
    processes: list[WorkerInfo] = []
    leases: list[ShardLease] = []
    overdue: int | None = None
    replication: ReplicationOut | None = None
    if store.reachable:
        try:
            async with asyncio.timeout(STORE_TIMEOUT):
                tenant = None if system else principal.tenant_id
                since = now - timedelta(minutes=window)
                pools = await state.store.pool_status(tenant, now=now, since=since)
                processes = await state.store.list_live_workers(seen_since=now - SEEN_WINDOW)
                leases = await state.store.list_shard_leases()
                replication = _replication(await state.store.replication(), system)
                if system:  # a count over every tenant's jobs
                    overdue = await state.store.count_due_jobs(
                        now - OVERDUE_AFTER, limit=OVERDUE_LIMIT
                    )
        except Exception as exc:  # whatever the backend raises, the answer is "unreachable"
            store = _unreachable(exc)
    workers = _workers(processes, principal, system)
    report = StatusReportOut(
        version=installed_version(),
        now=now,
        scope="system" if system else "tenant",
        tenant_id=None if system else principal.tenant_id,
        window_minutes=window,
        healthy=True,
        problems=[],
        store=store,
        replication=replication,
        pools=_pools(pools, workers, now, window),
        workers=workers,
        schedulers=_schedulers(processes, leases, now, system),
        shards=_shards(leases, now),
        maintenance=_maintenance(leases, now, system),
        overdue_jobs=overdue,
    )
    found = problems_of(report)
    update = {"healthy": not found, "problems": found, "notes": notes_of(report)}
    return dump(report.model_copy(update=update))


async def _probe(store: Store) -> StoreOut:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(STORE_TIMEOUT):
            version = await store.schema_version()  # a real query: now() may not touch it
    except Exception as exc:  # whatever the backend raises, the answer is "unreachable"
        return _unreachable(exc)
    elapsed = round((time.perf_counter() - started) * 1000, 3)
    return StoreOut(reachable=True, answered_in_ms=elapsed, schema_version=version, error=None)


def _replication(found: Replication, system: bool) -> ReplicationOut:
    return ReplicationOut(
        mode=found.mode,
        standbys=found.standbys,
        # Standby names are the fleet's own, like hosts (decision 0021).
        synchronous_standby_names=found.synchronous_standby_names if system else None,
        synchronous_commit=found.synchronous_commit,
    )


def _unreachable(exc: BaseException) -> StoreOut:
    # The class only: a driver's message may carry a DSN (see cronwheel/security/redact.py).
    error = "timed out" if isinstance(exc, TimeoutError) else type(exc).__name__
    return StoreOut(reachable=False, answered_in_ms=None, schema_version=None, error=error)


def _live(lease: ShardLease, now: datetime) -> bool:
    return lease.holder is not None and lease.expires_at is not None and lease.expires_at > now


def _shards(leases: Sequence[ShardLease], now: datetime) -> ShardsOut:
    """Every shard ever leased, and which of them no live lease holds now, whatever the
    registry says: a scheduler stopped (SIGTERM) hands its shards back and leaves it, a
    killed one ages out of it, and their shards are unowned all the same (issue 29)."""
    shards = [lease for lease in leases if lease.shard >= 0]
    unowned = sorted(lease.shard for lease in shards if not _live(lease, now))
    return ShardsOut(total=len(shards), owned=len(shards) - len(unowned), unowned=unowned)


def spans(numbers: Sequence[int]) -> str:
    """``0-3, 7, 9-15``: sorted numbers as runs of consecutive ones."""
    parts: list[str] = []
    start = prev = None
    for n in [*numbers, None]:
        if start is not None and (n is None or prev is None or n != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if n is not None and start is None:
            start = n
        prev = n
    return ", ".join(parts)


def _workers(
    processes: Sequence[WorkerInfo], principal: Principal, system: bool
) -> list[StatusWorkerOut]:
    """Every worker for a system admin; otherwise the tenant's own, then the shared ones
    without their host or load (docs/decisions/0015-shared-workers.md)."""
    shown = []
    for worker in processes:
        shared = worker.tenant_id == SHARED_WORKERS
        own = worker.tenant_id == principal.tenant_id
        if worker.tenant_id == SCHEDULER_TENANT or not (system or shared or own):
            continue
        full = system or not shared
        shown.append(
            StatusWorkerOut(
                id=worker.id if system else worker.id.removeprefix(f"{principal.tenant_id}/"),
                tenant_id=None if shared else worker.tenant_id,
                shared=shared,
                host=worker.host if full else None,
                pools=list(worker.pools),
                capacity=worker.capacity,
                in_flight=worker.in_flight if full else None,
                last_seen_at=worker.last_seen_at,
            )
        )
    shown.sort(key=lambda w: (w.shared, w.id))
    return shown


def _pools(
    pools: Sequence[PoolStatus], workers: Sequence[StatusWorkerOut], now: datetime, window: int
) -> list[PoolOut]:
    """The pools with runs, and the pools a visible worker serves (all zero: served,
    and quiet)."""
    by_name = {p.pool: p for p in pools}
    for worker in workers:
        for name in worker.pools:
            by_name.setdefault(name, PoolStatus(name))
    out = []
    for name in sorted(by_name):
        p = by_name[name]
        age = None if p.oldest_due_at is None else (now - p.oldest_due_at).total_seconds()
        out.append(
            PoolOut(
                pool=name,
                due=p.due,
                held_by_key=p.held_by_key,
                held_by_overlap=p.held_by_overlap,
                running=p.running,
                oldest_due_at=p.oldest_due_at,
                oldest_due_age_seconds=None if age is None else max(0.0, round(age, 3)),
                lag_p50_seconds=p.lag_p50,
                lag_p99_seconds=p.lag_p99,
                finished=p.finished,
                throughput_per_minute=round(p.finished / window, 3),
                failures=p.failures,
                dead=p.dead,
                workers=sum(1 for w in workers if name in w.pools),
            )
        )
    return out


def _schedulers(
    processes: Sequence[WorkerInfo], leases: Sequence[ShardLease], now: datetime, system: bool
) -> list[SchedulerOut]:
    owned: dict[str, int] = {}
    for lease in leases:
        if lease.shard >= 0 and _live(lease, now) and lease.holder is not None:
            owned[lease.holder] = owned.get(lease.holder, 0) + 1
    return [
        SchedulerOut(
            id=w.id if system else None,
            shards_owned=owned.get(w.id, 0),
            last_seen_at=w.last_seen_at,
        )
        for w in processes
        if w.tenant_id == SCHEDULER_TENANT
    ]


def _maintenance(leases: Sequence[ShardLease], now: datetime, system: bool) -> MaintenanceOut:
    for lease in leases:
        if lease.shard == MAINTENANCE_LEASE and _live(lease, now):
            owner = lease.holder if system else None
            return MaintenanceOut(active=True, owner=owner, expires_at=lease.expires_at)
    return MaintenanceOut(active=False, owner=None, expires_at=None)


def problems_of(report: StatusReportOut) -> list[str]:
    """What an operator must look at, one line each, worst first."""
    if not report.store.reachable:
        return [f"the store does not answer ({report.store.error}): nothing is scheduled or run"]
    found = []
    if report.replication is not None and report.replication.mode == "waiting":
        found.append(
            "synchronous replication has no synchronous standby connected"
            " (synchronous_standby_names): every commit waits until one is"
        )
    if report.overdue_jobs:
        many = " or more" if report.overdue_jobs >= OVERDUE_LIMIT else ""
        jobs = "active job" if report.overdue_jobs == 1 else "active jobs"
        found.append(
            f"{report.overdue_jobs}{many} {jobs} should have fired over"
            f" {OVERDUE_AFTER.total_seconds():.0f} s ago: no scheduler keeps up (is one running?)"
        )
    shards = report.shards
    if shards.unowned and not shards.owned:
        found.append(
            f"no scheduler owns shards {spans(shards.unowned)}: no run is being created on"
            " time (is a scheduler running?)"
        )
    elif shards.unowned:
        found.append(
            f"{len(shards.unowned)} of {shards.total} shards have no live scheduler"
            f" ({spans(shards.unowned)}): their jobs get no new runs"
        )
    for pool in report.pools:
        if pool.due and not pool.workers:
            found.append(f"pool {pool.pool}: {pool.due} due, and no live worker serves it")
        age = pool.oldest_due_age_seconds
        if age is not None and age > LATE_AFTER.total_seconds():
            found.append(f"pool {pool.pool}: the oldest due run has waited {age:.0f} s")
    return found


def notes_of(report: StatusReportOut) -> list[str]:
    """Runs that wait because a limit works (decision 0042): not a problem, not late."""
    found = []
    for pool in report.pools:
        if pool.held_by_key:
            runs = "1 run waits" if pool.held_by_key == 1 else f"{pool.held_by_key} runs wait"
            found.append(f"pool {pool.pool}: {runs} for their concurrency key (it is full)")
        if pool.held_by_overlap:
            n = pool.held_by_overlap
            runs = "1 run waits" if n == 1 else f"{n} runs wait"
            found.append(
                f"pool {pool.pool}: {runs} for their job's running run or unfinished"
                " pipeline run (overlap: queue)"
            )
    return found
