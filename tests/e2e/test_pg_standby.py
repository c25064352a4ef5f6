"""A real streaming standby (tests/cluster/pgha.py) as cronwheel meets it (issue 31
items 1 and 2): a store reaching it by mistake recognises it, says so once and leaves it;
a multi-host URL finds the primary; ``cronwheel status`` sees synchronous replication."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from cronwheel.api import AuthConfig, create_app
from cronwheel.core.clock import SystemClock
from cronwheel.errors import StoreUnavailable
from cronwheel.store import open_store
from cronwheel.store.postgres import PostgresStore
from tests.cluster import pgha
from tests.cluster.test_pg_failover import DATABASE, ha_database
from tests.engine.helpers import eventually

TOKEN = "a-system-admin-token-for-tests"


@pytest.fixture
async def pair() -> AsyncIterator[pgha.Pair]:
    async with ha_database(sync=True) as pair:
        store = await open_store(pair.primary.dsn(DATABASE))
        try:
            await store.migrate()
        finally:
            await store.close()

        async def replayed() -> bool:  # synchronous_commit=on waits for a flush, not a replay
            conn = await asyncpg.connect(pair.standby.dsn(DATABASE), timeout=10)
            try:
                return bool(await conn.fetchval("SELECT to_regclass('tenants') IS NOT NULL"))
            finally:
                await conn.close()

        await eventually(replayed, timeout=60)
        yield pair


@pytest.mark.timeout(180)
async def test_a_standby_is_recognised_said_once_and_left_and_status_sees_it(
    pair: pgha.Pair, caplog: pytest.LogCaptureFixture
) -> None:
    # target_session_attrs=any on the standby alone: the one way a store lands there.
    url = f"{pair.standby.dsn(DATABASE)}?target_session_attrs=any"
    store = await PostgresStore.connect(url)
    try:
        with caplog.at_level(logging.WARNING, "cronwheel.store.postgres"):
            for _ in range(3):
                with pytest.raises(StoreUnavailable) as raised:
                    await store.ensure_tenant("t1", "One", now=await store.now())
                assert "read-only standby" in str(raised.value)
                assert pair.standby.host in str(raised.value)
        said = [r for r in caplog.records if "read-only standby" in r.getMessage()]
        assert len(said) == 1, [r.getMessage() for r in said]
        # left: each failed write closed its connection, none is kept to write again
        assert store._pool.get_size() <= 1
    finally:
        await store.close()

    # The default (read-write) never keeps a standby: with the primary listed after
    # it, the primary is found; with the standby alone, the outage says why.
    listed = f"postgresql://postgres@{pair.standby.host},{pair.primary.host}/{DATABASE}"
    store = await open_store(listed)
    try:
        await store.ensure_tenant("t1", "One", now=await store.now())
    finally:
        await store.close()
    with pytest.raises(StoreUnavailable) as raised:
        await open_store(pair.standby.dsn(DATABASE))
    assert "is the writable primary now" in str(raised.value)
    assert pair.standby.host in str(raised.value)

    # A read replica's URL in the same form, the primary listed first: the standby.
    both = f"{pair.primary.host},{pair.standby.host}"
    for attrs in ("read-only", "prefer-standby"):
        url = f"postgresql://postgres@{both}/{DATABASE}?target_session_attrs={attrs}"
        replica = await PostgresStore.connect(url, read_only=True)
        try:
            assert await replica.replay_lag("0/0") is not None, attrs  # None: a primary
        finally:
            await replica.close()

    # One pair for both tests' worth: a pair costs seconds to build.
    await _status_shows_the_synchronous_standby(pair)


async def _status_shows_the_synchronous_standby(pair: pgha.Pair) -> None:
    store = await open_store(pair.dsn(DATABASE))
    try:
        app = create_app(store, auth=AuthConfig(admin_token=TOKEN), clock=SystemClock())
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.get("/v1/status", headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["replication"] == {
            "mode": "synchronous",
            "standbys": 1,
            "synchronous_standby_names": pgha.STANDBY_NAME,
            "synchronous_commit": "on",
        }
    finally:
        await store.close()
