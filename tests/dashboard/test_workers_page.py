"""The workers and schedulers page in-process, on both stores: who sees which process
(decision 0021). tests/browser/test_fleet.py looks at it in a browser."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.core.clock import SystemClock
from cronwheel.core.model import SCHEDULER_TENANT, SHARED_WORKERS, WorkerInfo
from cronwheel.engine.maintenance import MAINTENANCE_LEASE
from cronwheel.store.base import Store
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, new_tenant


@pytest.fixture
def app(store: Store) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))


async def _scene(store: Store) -> None:
    now = SystemClock().now()
    processes = [
        ("default/remote-a", "default", "host-a", ("email",), 3, 1),
        ("t2/remote-b", "t2", "host-b", ("batch",), 2, 0),
        ("dev-worker-1", SHARED_WORKERS, "host-shared", ("default",), 4, 2),
        ("scheduler-host-s-1", SCHEDULER_TENANT, "host-s", (), 0, 0),
    ]
    for wid, tenant, host, pools, capacity, in_flight in processes:
        await store.register_worker(
            WorkerInfo(wid, tenant, host, pools, capacity, in_flight, now, now)
        )
    await store.acquire_shards("scheduler-host-s-1", [0, 1], now=now, ttl_seconds=60)
    await store.acquire_shards("maintenance-77-abc", [MAINTENANCE_LEASE], now=now, ttl_seconds=60)


async def _page(app: FastAPI, token: str, path: str = "/ui/workers") -> httpx.Response:
    async with connect(app, cookies={SESSION_COOKIE: token}) as tab:
        return await tab.get(path)


async def test_a_system_admin_sees_every_process_in_full(app: FastAPI, store: Store) -> None:
    async with connect(app, ADMIN_TOKEN) as api:
        await new_tenant(api, "t2")
    await _scene(store)
    page = await _page(app, ADMIN_TOKEN)
    assert page.status_code == 200
    html = page.text
    for shown in ("default/remote-a", "t2/remote-b", "dev-worker-1", "host-shared", "host-b"):
        assert shown in html
    assert 'data-scheduler="scheduler-host-s-1"' in html
    assert "0 (1)" in html and "1 (1)" in html  # shards and their lease epochs
    assert "maintenance-77-abc" in html
    assert "2 of 2 shards held" in html
    live = await _page(app, ADMIN_TOKEN, "/ui/live/workers")
    assert live.status_code == 200 and "<html" not in live.text and "dev-worker-1" in live.text


async def test_a_tenant_sees_its_own_and_the_shared_workers_only(
    app: FastAPI, store: Store
) -> None:
    async with connect(app, ADMIN_TOKEN) as api:
        await new_tenant(api, "t2")
        token = (await new_key(api, "read", "t2"))["token"]
    await _scene(store)
    html = (await _page(app, token)).text
    assert 'data-worker="remote-b"' in html and "host-b" in html  # its own, in full
    assert 'data-worker="dev-worker-1"' in html  # shared: without host or load
    assert "host-shared" not in html
    for hidden in ("remote-a", "host-a", "email", "scheduler-host-s-1", "host-s", "maintenance-77"):
        assert hidden not in html, hidden
    assert "Scheduler 1" in html  # its shard count and heartbeat, not its name
    assert "A process holds the maintenance lease" in html


async def test_a_read_key_of_the_default_tenant_is_not_a_system_admin(
    app: FastAPI, store: Store
) -> None:
    async with connect(app, ADMIN_TOKEN) as api:
        await new_tenant(api, "t2")
        token = (await new_key(api, "read"))["token"]
    await _scene(store)
    html = (await _page(app, token)).text
    assert 'data-worker="remote-a"' in html and "remote-b" not in html
    assert "scheduler-host-s-1" not in html and "maintenance-77" not in html


async def test_each_worker_shows_the_commands_it_runs_and_the_brokers_it_names(
    app: FastAPI, store: Store
) -> None:
    now = SystemClock().now()
    await store.register_worker(
        WorkerInfo(
            "dev-worker-1",
            SHARED_WORKERS,
            "host-shared",
            ("default",),
            4,
            0,
            now,
            now,
            {"events": "nats"},
            ("pg_dump", "/opt/jobs/*"),
        )
    )
    await store.register_worker(
        WorkerInfo("default/edge-1", "default", "edge", ("edge",), 1, 0, now, now)
    )
    async with connect(app, ADMIN_TOKEN) as api:
        token = (await new_key(api, "read"))["token"]
    html = (await _page(app, token)).text
    assert "pg_dump, /opt/jobs/*</span>; publishes to events (nats)" in html
    assert "no command, no broker" in html  # the remote worker announced neither
