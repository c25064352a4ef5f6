"""The workers and schedulers page: who is running runs and planning them now, live.

Who sees what follows ``GET /v1/status`` (docs/decisions/0021-status-scoping.md): a
system admin sees every process in full (every tenant's workers with their host and
load, the schedulers' names, their shards and lease epochs, the maintenance owner);
anyone else sees its own tenant's remote workers in full, the shared in-process
workers without host or load (as ``GET /v1/workers`` shows them), the schedulers'
shard counts and heartbeats without their names, and whether maintenance is held.
Another tenant's workers never appear."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from cronwheel.core.model import (
    MAINTENANCE_LEASE,
    SCHEDULER_TENANT,
    SEEN_WINDOW,
    SHARED_WORKERS,
    ShardLease,
    WorkerInfo,
)
from cronwheel.dashboard.live import shared_reads
from cronwheel.dashboard.render import PageRoute, fragment, page
from cronwheel.dashboard.session import CurrentViewer, Viewer
from cronwheel.web.state import api_state

router = APIRouter(route_class=PageRoute, include_in_schema=False)
TITLE = "Workers and schedulers"
STALE_AFTER = 15.0
"""Seconds without a heartbeat after which a process's age is shown as a warning (they
beat every few seconds; the registry forgets them after :data:`SEEN_WINDOW`)."""


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: str
    tenant_id: str | None
    """Shown to a system admin only (None: a shared worker, or the viewer's own)."""
    shared: bool
    host: str | None
    pools: tuple[str, ...]
    capacity: int
    in_flight: int | None
    started_at: datetime
    last_seen_at: datetime
    age: float
    commands: tuple[str, ...] = ()
    """The patterns of what it runs for command actions: shown to every viewer, as by
    GET /v1/workers (the offer a command job is checked against, decision 0054)."""
    brokers: tuple[str, ...] = ()
    """Its brokers as ``name (kind)``, never their URLs."""


@dataclass(frozen=True, slots=True)
class SchedulerRow:
    id: str | None
    """None unless the viewer is a system admin: a scheduler's name carries its host."""
    host: str | None
    shards: list[tuple[int, int]]
    """(shard, lease epoch) of the live leases it holds, by shard; for a system admin."""
    shard_count: int
    last_seen_at: datetime
    age: float


@dataclass(frozen=True, slots=True)
class MaintenanceView:
    held: bool
    owner: str | None = None
    epoch: int | None = None
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Fleet:
    """What the page shows, already scoped to the viewer."""

    system: bool
    workers: list[WorkerRow]
    schedulers: list[SchedulerRow]
    shards_total: int
    shards_held: int
    maintenance: MaintenanceView
    orphans: list[ShardLease] = field(default_factory=list)
    """Live leases whose holder is not a registered scheduler (system admin only)."""


def _live(lease: ShardLease, now: datetime) -> bool:
    return lease.holder is not None and lease.expires_at is not None and lease.expires_at > now


def fleet_for(
    viewer_tenant: str,
    system: bool,
    processes: Sequence[WorkerInfo],
    leases: Sequence[ShardLease],
    now: datetime,
) -> Fleet:
    """The processes and leases of the store, as ``viewer_tenant`` may see them."""
    prefix = f"{viewer_tenant}/"
    workers = []
    for w in processes:
        shared = w.tenant_id == SHARED_WORKERS
        own = w.tenant_id == viewer_tenant
        if w.tenant_id == SCHEDULER_TENANT or not (system or shared or own):
            continue
        full = system or own
        workers.append(
            WorkerRow(
                id=w.id if system else w.id.removeprefix(prefix),
                tenant_id=w.tenant_id if system and not shared else None,
                shared=shared,
                host=w.host if full else None,
                pools=w.pools,
                capacity=w.capacity,
                in_flight=w.in_flight if full else None,
                started_at=w.started_at,
                last_seen_at=w.last_seen_at,
                age=max(0.0, (now - w.last_seen_at).total_seconds()),
                commands=tuple(w.commands),
                brokers=tuple(f"{name} ({kind})" for name, kind in sorted(w.brokers.items())),
            )
        )
    workers.sort(key=lambda r: (r.shared, r.tenant_id or "", r.id))

    live = [lease for lease in leases if lease.shard >= 0 and _live(lease, now)]
    held: dict[str, list[tuple[int, int]]] = {}
    for lease in live:
        held.setdefault(lease.holder or "", []).append((lease.shard, lease.epoch))
    schedulers = []
    names = set()
    for w in processes:
        if w.tenant_id != SCHEDULER_TENANT:
            continue
        names.add(w.id)
        mine = sorted(held.get(w.id, []))
        schedulers.append(
            SchedulerRow(
                id=w.id if system else None,
                host=w.host if system else None,
                shards=mine if system else [],
                shard_count=len(mine),
                last_seen_at=w.last_seen_at,
                age=max(0.0, (now - w.last_seen_at).total_seconds()),
            )
        )
    maintenance = MaintenanceView(held=False)
    for lease in leases:
        if lease.shard == MAINTENANCE_LEASE and _live(lease, now):
            maintenance = MaintenanceView(
                held=True,
                owner=lease.holder if system else None,
                epoch=lease.epoch if system else None,
                expires_at=lease.expires_at,
            )
    orphans = [lease for lease in live if lease.holder not in names] if system else []
    return Fleet(
        system=system,
        workers=workers,
        schedulers=schedulers,
        shards_total=sum(1 for lease in leases if lease.shard >= 0),
        shards_held=len(live),
        maintenance=maintenance,
        orphans=sorted(orphans, key=lambda lease: lease.shard),
    )


async def _fleet(request: Request, viewer: Viewer) -> dict[str, Any]:
    state = api_state(request)
    # A system admin acting as itself sees every process (the dashboard's session is
    # always the key's own tenant, but the rule is the status's).
    system = viewer.can("system admin") and viewer.principal.home_tenant_id is None
    tenant = viewer.tenant_id

    async def read() -> dict[str, Any]:
        now = state.clock.now()
        processes = await state.store.list_live_workers(seen_since=now - SEEN_WINDOW)
        leases = await state.store.list_shard_leases()
        return {"fleet": fleet_for(tenant, system, processes, leases, now), "now": now}

    scope = "system" if system else f"tenant:{tenant}"
    result: dict[str, Any] = await shared_reads(request).get(f"workers:{scope}", read)
    return {**result, "stale_after": STALE_AFTER, "seen_window": SEEN_WINDOW.total_seconds()}


@router.get("/ui/workers")
async def workers(request: Request, viewer: CurrentViewer) -> HTMLResponse:
    return page(request, viewer, "workers.html", title=TITLE, **await _fleet(request, viewer))


@router.get("/ui/live/workers")
async def workers_live(request: Request, viewer: CurrentViewer) -> HTMLResponse:
    return fragment("workers_live.html", **await _fleet(request, viewer))
