"""A real `cronwheel worker` makes the `no_live_worker` notice go away while it runs, and
come back when it stops cleanly."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx

from cronwheel.api import AuthConfig, create_app
from cronwheel.store import open_store
from tests.api.helpers import ADMIN_TOKEN, spec
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually


async def test_a_worker_process_lifts_the_notice_while_it_runs(
    store_url: str, tmp_path: Path
) -> None:
    store = await open_store(store_url)
    try:
        await store.migrate()
        app = create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))
        app.state.api.notices.cache_seconds = 0.0
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=headers
        ) as api:
            job = (await api.post("/v1/jobs", json=spec(pool="email"))).json()
            assert [n["code"] for n in job["notices"]] == ["no_live_worker"]

            async def notices() -> list[str]:
                body = (await api.get(f"/v1/jobs/{job['id']}")).json()
                return [n["code"] for n in body["notices"]]

            async def lifted() -> bool:
                return await notices() == []

            args = ["worker", "--db", store_url, "--pool", "email"]
            with cronwheel_proc(*args, log=tmp_path / "worker.log") as proc:
                await eventually(lifted, timeout=60)
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()
            assert await notices() == ["no_live_worker"]  # it removed itself on the way out
    finally:
        await store.close()
