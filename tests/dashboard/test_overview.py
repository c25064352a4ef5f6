"""The overview in-process: its charts, its summary, and what live polling costs the
store (tests/browser/test_fleet.py looks at it in a browser)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.core.clock import SystemClock
from cronwheel.core.model import SHARED_WORKERS, WorkerInfo
from cronwheel.dashboard.charts import bar_chart, describe
from cronwheel.dashboard.live import SharedReads
from cronwheel.dashboard.pages import overview
from cronwheel.store.base import AttemptBucket, PoolStatus, Store
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, spec


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


async def test_many_concurrent_readers_cost_one_read_per_ttl() -> None:
    clock = FakeClock()
    reads = SharedReads(ttl=1.0, clock=clock)
    calls = 0

    async def read() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)  # the others arrive while it is being read
        return calls

    answers = await asyncio.gather(*(reads.get("overview:t", read) for _ in range(200)))
    assert calls == 1 and set(answers) == {1}
    clock.t += 0.9
    assert await reads.get("overview:t", read) == 1 and calls == 1
    clock.t += 0.2  # past the TTL: the next wave reads once more
    answers = await asyncio.gather(*(reads.get("overview:t", read) for _ in range(200)))
    assert calls == 2 and set(answers) == {2}
    assert await reads.get("overview:other", read) == 3  # another tenant: its own read


async def test_a_read_that_cost_more_is_kept_longer() -> None:
    """A read given a cost factor is kept that many times as long as it took (the jobs
    count of the overview at ten million jobs), a cheap one for the TTL."""
    clock = FakeClock()
    reads = SharedReads(ttl=1.0, clock=clock)
    calls = 0

    def read(took: float) -> Callable[[], Awaitable[int]]:
        async def timed() -> int:
            nonlocal calls
            calls += 1
            clock.t += took  # the store took this long to answer
            return calls

        return timed

    assert await reads.get("jobs", read(2.0), cost_factor=50) == 1
    clock.t += 99.0  # kept 50 x 2 s from when it was read
    assert await reads.get("jobs", read(2.0), cost_factor=50) == 1
    clock.t += 1.1
    assert await reads.get("jobs", read(0.001), cost_factor=50) == 2
    clock.t += 1.1  # a cheap read is kept for the TTL only
    assert await reads.get("jobs", read(0.001), cost_factor=50) == 3
    assert await reads.get("other", read(2.0)) == 4
    clock.t += 1.1  # no cost factor: the TTL, however long it took
    assert await reads.get("other", read(2.0)) == 5


def _counting(store: Store, names: list[str]) -> dict[str, int]:
    """Count the calls of ``names`` on ``store`` (wrapped on the instance)."""
    counts = dict.fromkeys(names, 0)
    for name in names:
        original: Callable[..., Awaitable[Any]] = getattr(store, name)

        def wrapper(*a: Any, _name: str = name, _f: Any = original, **kw: Any) -> Any:
            counts[_name] += 1
            return _f(*a, **kw)

        setattr(store, name, wrapper)
    return counts


@pytest.fixture
def app(store: Store) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))


async def test_open_tabs_polling_the_overview_read_the_store_once_per_ttl(
    app: FastAPI, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    app.state.dashboard_reads = SharedReads(ttl=1.0, clock=clock)
    async with connect(app, ADMIN_TOKEN) as api:
        assert (await api.post("/v1/jobs", json=spec())).status_code == 201
    reads = ["pool_status", "attempt_history", "count_jobs_by_state", "served_pools"]
    counts = _counting(store, reads)
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as tabs:
        for _ in range(3):  # three polls of 50 tabs within one TTL
            answers = await asyncio.gather(*(tabs.get("/ui/live/overview") for _ in range(50)))
            assert {a.status_code for a in answers} == {200}
        assert counts == dict.fromkeys(reads, 1)
        clock.t += 1.5
        await asyncio.gather(*(tabs.get("/ui/live/overview") for _ in range(50)))
        assert counts == dict.fromkeys(reads, 2)
        page = await tabs.get("/ui/")
    assert "Active jobs" in page.text
    assert re.search(r'id="sum-active">1<', page.text), page.text


def test_pool_views_put_each_minute_in_its_bar() -> None:
    pools = [PoolStatus("email", finished=4, failures=1), PoolStatus("quiet")]
    history = [
        AttemptBucket("email", 0, finished=1, failures=0),
        AttemptBucket("email", 59, finished=3, failures=1),
    ]
    email, quiet = overview.pool_views(pools, history)
    assert email.throughput.count("<rect") == 1 + 2  # the baseline and two bars
    assert email.failures.count("<rect") == 1 + 1
    assert "Pool email: 4 attempts finished in the last 60 minutes, at most 3" in email.throughput
    assert quiet.throughput.count("<rect") == 1


def test_a_chart_is_an_image_with_its_numbers_as_text() -> None:
    values = [0] * 58 + [2, 5]
    label = describe("<pool>", "failed attempts", values, 60)
    svg = bar_chart(values, label, css_class="chart-bad")
    assert svg.startswith('<svg class="chart chart-bad" role="img" aria-label="Pool &lt;pool&gt;')
    assert "<title>Pool &lt;pool&gt;: 7 failed attempts in the last 60 minutes" in svg
    heights = [
        float(h)
        for h in re.findall(r'<rect x="[^"]+" y="[^"]+" width="[^"]+" height="([^"]+)"', svg)
    ]
    assert heights == [pytest.approx(29 * 2 / 5), pytest.approx(29.0)]


async def test_the_overview_without_any_run(app: FastAPI) -> None:
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as tab:
        page = await tab.get("/ui/")
    assert page.status_code == 200
    assert "No pool has any run yet" in page.text


async def test_a_pool_a_live_worker_serves_shows_without_runs(app: FastAPI, store: Store) -> None:
    now = SystemClock().now()
    shared = WorkerInfo("dev-1", SHARED_WORKERS, "h", ("quiet-pool",), 4, 0, now, now)
    other = WorkerInfo("t2/w", "t2", "h", ("t2-pool",), 1, 0, now, now)
    for worker in (shared, other):
        await store.register_worker(worker)
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as tab:
        page = await tab.get("/ui/live/overview")
    assert 'data-pool="quiet-pool"' in page.text
    assert "t2-pool" not in page.text  # another tenant's worker serves it
