"""The overview: how each pool is doing now and over the last hour, live.

Every read of the page (pool status, the hour's attempts per minute, the jobs per state)
happens inside one :class:`SharedReads` entry per tenant, so any number of open tabs
polling it cost the store one round of reads per second."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from cronwheel.core.model import SEEN_WINDOW, JobState
from cronwheel.core.records import AttemptBucket, PoolStatus
from cronwheel.dashboard.charts import bar_chart, describe
from cronwheel.dashboard.live import shared_reads
from cronwheel.dashboard.minutes import SettledMinutes
from cronwheel.dashboard.render import PageRoute, fragment, page
from cronwheel.dashboard.session import CurrentViewer, Viewer
from cronwheel.web.state import api_state

router = APIRouter(route_class=PageRoute, include_in_schema=False)
BUCKET = timedelta(minutes=1)
BARS = 60
LAG_WINDOW = timedelta(minutes=5)
JOB_COUNT_COST_FACTOR = 50.0
"""The jobs-by-state count is kept 50 times as long as it took to read (at least the
shared reads' TTL): at most 2 % of a database's time per tenant watched, e.g. one count
every 70-130 s at 10,000,000 jobs (1.4-2.6 s a count, bench/atrest.py), every 10-20 s at
1,000,000, every second while a count takes under 20 ms."""
"""The hour the charts and the table's totals cover: this minute and the 59 before."""


@dataclass(frozen=True, slots=True)
class PoolView:
    """One pool's row: its status now, and its hour as two charts."""

    status: PoolStatus
    throughput: Markup
    failures: Markup
    finished_total: int
    failures_total: int


@dataclass(frozen=True, slots=True)
class Summary:
    """The line at the top: the tenant's jobs and runs at a glance."""

    active: int
    paused: int
    due: int
    running: int
    dead: int


def pool_views(pools: list[PoolStatus], history: list[AttemptBucket]) -> list[PoolView]:
    """Each pool with its charts: a bar per minute of the window, oldest first."""
    finished: dict[str, list[int]] = {}
    failed: dict[str, list[int]] = {}
    for b in history:
        if 0 <= b.bucket < BARS:
            finished.setdefault(b.pool, [0] * BARS)[b.bucket] = b.finished
            failed.setdefault(b.pool, [0] * BARS)[b.bucket] = b.failures
    minutes = BARS * int(BUCKET.total_seconds()) // 60
    views = []
    for p in pools:
        done = finished.get(p.pool, [0] * BARS)
        bad = failed.get(p.pool, [0] * BARS)
        views.append(
            PoolView(
                status=p,
                throughput=bar_chart(done, describe(p.pool, "attempts finished", done, minutes)),
                failures=bar_chart(
                    bad, describe(p.pool, "failed attempts", bad, minutes), css_class="chart-bad"
                ),
                finished_total=sum(done),
                failures_total=sum(bad),
            )
        )
    return views


def summary(jobs: dict[JobState, int], pools: list[PoolStatus]) -> Summary:
    return Summary(
        active=jobs.get(JobState.ACTIVE, 0),
        paused=jobs.get(JobState.PAUSED, 0),
        due=sum(p.due for p in pools),
        running=sum(p.running for p in pools),
        dead=sum(p.dead for p in pools),
    )


def _name(p: PoolStatus) -> str:
    return p.pool


async def _overview(request: Request, viewer: Viewer) -> dict[str, Any]:
    state = api_state(request)
    tenant = viewer.tenant_id

    async def read() -> dict[str, Any]:
        now: datetime = state.clock.now()
        # Bars of whole clock minutes, the current one last: a bar keeps its attempts
        # from one refresh to the next instead of sliding by a second each time.
        since = now.replace(second=0, microsecond=0) - (BARS - 1) * BUCKET
        # Start lag over the last minutes (as `cronwheel status`): percentiles of the whole
        # hour would sort every attempt of it on each refresh.
        pools = await state.store.pool_status(tenant, now=now, since=now - LAG_WINDOW)
        history = await settled_minutes(request).read(state.store, tenant, since=since, now=now)
        jobs = await shared_reads(request).get(
            f"overview-jobs:{tenant}",
            lambda: state.store.count_jobs_by_state(tenant),
            cost_factor=JOB_COUNT_COST_FACTOR,
        )
        # A pool a live worker serves shows too, all zero: served, and quiet (as in
        # `cronwheel status`, decision 0021).
        served = await state.store.served_pools(tenant, seen_since=now - SEEN_WINDOW)
        known = {p.pool for p in pools}
        quiet = (served | {b.pool for b in history}) - known  # nothing due, running or dead
        pools = sorted([*pools, *(PoolStatus(name) for name in quiet)], key=_name)
        return {"pools": pool_views(pools, history), "summary": summary(jobs, pools), "now": now}

    result: dict[str, Any] = await shared_reads(request).get(f"overview:{tenant}", read)
    return result


def settled_minutes(request: Request) -> SettledMinutes:
    """The app's settled minutes (installed with the dashboard)."""
    minutes: SettledMinutes = request.app.state.dashboard_minutes
    return minutes


@router.get("/ui/")
async def overview(request: Request, viewer: CurrentViewer) -> HTMLResponse:
    return page(
        request, viewer, "overview.html", title="Overview", **await _overview(request, viewer)
    )


@router.get("/ui/live/overview")
async def overview_live(request: Request, viewer: CurrentViewer) -> HTMLResponse:
    return fragment("overview_live.html", **await _overview(request, viewer))
