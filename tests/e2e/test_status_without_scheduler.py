"""`cronwheel status` with no live scheduler (issue 29): a real `cronwheel scheduler`
stopped with SIGTERM (it hands its shards back and leaves the registry), then another
killed with SIGKILL (its leases expire, then its registry row ages out). Each time,
status must say NOT HEALTHY and name the unowned shards, until a scheduler owns them."""

from __future__ import annotations

import asyncio
import signal
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from cronwheel.core.model import SCHEDULER_TENANT, SEEN_WINDOW
from cronwheel.store import open_store
from tests.e2e.apiserver import api_url_per_test  # noqa: F401  (the fixture)
from tests.e2e.procs import cronwheel
from tests.e2e.procs import wait_until as _wait_until
from tests.e2e.test_cli import TOKEN
from tests.e2e.test_cli_views import piped_process

HEADERS = {"Authorization": f"Bearer {TOKEN}"}
SHARDS = 16
LEASE = "3"  # the shard lease, in seconds: a killed scheduler's shards expire fast
PROBLEM = "no scheduler owns shards 0-15: no run is being created on time"
PROBLEM += " (is a scheduler running?)"


def _status(url: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/v1/status", headers=HEADERS, timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _scheduler(store_url: str, log: Path) -> Any:
    args = ["scheduler", "--db", store_url, "--shards", str(SHARDS), "--shard-lease", LEASE]
    return cronwheel(*args, log=log)


def _owns_all(url: str, logs: list[Path]) -> dict[str, Any]:
    def owned() -> dict[str, Any] | None:
        body = _status(url)
        return body if body["shards"]["owned"] == SHARDS else None

    body: dict[str, Any] = _wait_until("a scheduler owns every shard", owned, 60, logs)
    return body


def _not_healthy(body: dict[str, Any]) -> None:
    assert body["healthy"] is False, body
    assert PROBLEM in body["problems"], body["problems"]
    assert body["shards"] == {"total": SHARDS, "owned": 0, "unowned": list(range(SHARDS))}


def test_status_is_not_healthy_once_the_only_scheduler_stops_or_dies(
    api_url: str,
    store_url: str,
    tmp_path: Path,
) -> None:
    logs = [tmp_path / "api.log", tmp_path / "stopped.log", tmp_path / "killed.log"]
    with _scheduler(store_url, logs[1]) as stopped:
        body = _owns_all(api_url, logs)
        assert body["healthy"] is True, body["problems"]
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(timeout=60) == 0
    # It handed its shards back and left the registry as it stopped: nobody owns them.
    body = _status(api_url)
    assert body["schedulers"] == []
    _not_healthy(body)
    screen = piped_process(api_url, "status")
    assert screen.returncode == 0, screen.stderr
    assert screen.stdout.startswith("now\thealthy\t")
    assert f"\nproblem\n{PROBLEM}\n" in screen.stdout, screen.stdout

    with _scheduler(store_url, logs[2]) as killed:
        assert _owns_all(api_url, logs)["healthy"] is True
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        # Its leases expire within the shard lease; its registry row stays a while.
        expired = _wait_until(
            "the killed scheduler's leases expire",
            lambda: (b := _status(api_url))["shards"]["owned"] == 0 and b,
            30,
            logs,
        )
        assert len(expired["schedulers"]) == 1
        _not_healthy(expired)
        # Its row ages out of the registry (SEEN_WINDOW, 60 s): still no scheduler, still
        # not healthy. The minute is not waited for: the row is put back as last seen
        # just past the window, as the API will read it a minute from now (nothing
        # renews it: its process is dead).
        asyncio.run(_last_seen_before_the_window(store_url))
        gone = _status(api_url)
        assert gone["schedulers"] == [], gone["schedulers"]
        _not_healthy(gone)


async def _last_seen_before_the_window(store_url: str) -> None:
    store = await open_store(store_url)
    try:
        now = datetime.now(UTC)
        [row] = await store.list_workers(SCHEDULER_TENANT, seen_since=now - SEEN_WINDOW)
        aged = now - SEEN_WINDOW - timedelta(seconds=1)
        await store.register_worker(replace(row, last_seen_at=aged))
    finally:
        await store.close()
