"""``cronwheel dev --demo`` and `cronwheel dev` riding out a failing store, for real (its
console: test_dev_console.py; a per-second cron job: test_dev_every_second.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

import cronwheel
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.e2e.procs import free_port
from tests.engine.helpers import eventually


async def test_dev_demo_serves_the_api_and_shows_runs_succeeding_and_one_dead_lettered(
    tmp_path: Path,
) -> None:
    port = free_port()
    args = ["dev", "--demo", "--db", f"sqlite:///{tmp_path / 'dev.db'}", "--port", str(port)]
    log = tmp_path / "dev.log"
    with cronwheel_proc(*args, "--duration", "12", log=log) as proc:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as api:

            async def jobs() -> list[str]:
                try:
                    response = await api.get("/v1/jobs")
                except httpx.TransportError:
                    return []
                return sorted(j["name"] for j in response.json()["items"])

            names = await eventually(jobs, timeout=60)
        assert names == ["demo-every-5s", "demo-flaky", "demo-once", "demo-webhook"]
        assert proc.wait(timeout=120) == 0
    out = log.read_text()
    assert "without authentication" in out or "no authentication" in out
    assert "demo: 4 example jobs created" in out
    # Its webhook target is on this machine: dev on loopback allows it, and says so.
    assert "webhooks may reach this machine (loopback)" in out
    for line in (
        "demo-once attempt 1/3 succeeded",
        "demo-every-5s attempt 1/3 succeeded",
        "demo-webhook attempt 1/3 succeeded",
        "demo-flaky attempt 3/3 failed",
    ):
        assert line in out, out
    [dead] = [line for line in out.splitlines() if "demo-flaky attempt 3/3 failed" in line]
    # The line says what became of the run, and why.
    assert dead.endswith("→ run dead (attempts exhausted: attempt 3 of 3 failed)"), dead
    assert "stopped" in out


async def test_dev_demo_restarts_on_its_file_and_renews_the_jobs_of_this_start(
    tmp_path: Path,
) -> None:
    """A restart used to stop at ``state: the job is cancelled`` (the flaky job cancelled
    by the start before), and the webhook job kept the dead echo endpoint's URL."""
    args = ["dev", "--demo", "--db", f"sqlite:///{tmp_path / 'dev.db'}"]
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    for log, duration in ((first, "2"), (first.with_suffix(".2"), "2"), (second, "12")):
        port = str(free_port())
        with cronwheel_proc(*args, "--port", port, "--duration", duration, log=log) as proc:
            assert proc.wait(timeout=120) == 0, log.read_text()
    out = second.read_text()
    assert "demo: 2 example jobs created" in out, out
    live = out.split("live from", 1)[1]
    assert "demo-webhook attempt 1/3 succeeded" in live, out


@pytest.mark.both_stores  # the stores differ here
async def test_dev_on_postgresql_rides_out_a_failing_read(store_url: str, tmp_path: Path) -> None:
    """A store error in one service is reported and retried: `cronwheel dev` stays up.
    Its console read the store with no retry, and a deadlock reported to one of its
    reads took the whole process down (CI, 2026-11-25). Here every read of a run fails
    for a while: the view they read is renamed away, then back."""
    if not store_url.startswith("postgresql"):
        return  # the failure is made with PostgreSQL's catalog
    port = free_port()
    log = tmp_path / "dev.log"
    args = ["dev", "--db", store_url, "--port", str(port), "--duration", "90"]
    with cronwheel_proc(*args, log=log) as proc:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as api:

            async def ready() -> bool:
                try:
                    return (await api.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(ready, timeout=60)
            async with await cronwheel.connect(store_url) as cw:
                store: Any = cw.store
                async with store._connection() as conn:
                    await conn.execute("ALTER VIEW all_runs RENAME TO all_runs_away")

                    async def console_failed() -> bool:
                        await asyncio.sleep(0)
                        return proc.poll() is not None or "for the console failed" in (
                            log.read_text(errors="replace")
                        )

                    try:
                        await eventually(console_failed, timeout=60)
                    finally:
                        await conn.execute("ALTER VIEW all_runs_away RENAME TO all_runs")
            assert proc.poll() is None, log.read_text(errors="replace")
            job = await eventually(lambda: _create_webhookless(api), timeout=60)
            run = (await api.post(f"/v1/jobs/{job}/trigger")).json()

            async def dead() -> bool:  # no handler of that name: one failed attempt
                got = await api.get(f"/v1/runs/{run['id']}")
                return got.status_code == 200 and got.json()["state"] == "dead"

            await eventually(dead, timeout=60)
            assert proc.poll() is None, log.read_text(errors="replace")


async def _create_webhookless(api: httpx.AsyncClient) -> str | None:
    spec = {
        "name": "after-the-cut",
        "schedule": {"kind": "manual"},
        "action": {"type": "handler", "name": "nobody-serves-this"},
        "retry": {"max_attempts": 1},
    }
    try:
        got = await api.post("/v1/jobs", json=spec)
    except httpx.TransportError:
        return None
    return str(got.json()["id"]) if got.status_code == 201 else None
