"""Issue 17 with real processes: a tenant's max_running holds across four worker
processes, as a webhook receiver counting the requests in flight sees it (decision 0028)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import pytest

import cronwheel
from cronwheel.core.model import RunState, Tenant
from tests.e2e.overlaps import OverlapReceiver, overlap_receiver
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually

# Crashes, races between processes and what each store keeps differ by store: this
# file runs on both whatever CRONWHEEL_TEST_STORE says (tests/tiers.py).
pytestmark = pytest.mark.both_stores

CAP = 3
RUNS = 40


@pytest.fixture
def receiver() -> Iterator[OverlapReceiver]:
    # Each request held long enough for the workers' runs to overlap, if allowed.
    with overlap_receiver(0.05) as server:
        yield server


async def test_max_running_holds_across_four_worker_processes(
    store_url: str, receiver: OverlapReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRONWHEEL_WEBHOOK_ALLOW", "127.0.0.1")  # the receiver is local
    env = {"CRONWHEEL_WEBHOOK_ALLOW": "127.0.0.1"}
    url = receiver.url("hit")
    async with await cronwheel.connect(store_url) as cw:
        await cw.store.create_tenant(Tenant("capped", "capped", datetime.now(UTC), max_running=CAP))
        job = await cw.create(
            "capped",
            name="calls",
            schedule={"kind": "manual"},
            action={"type": "webhook", "url": url},
        )
        await cw.enqueue(job.id, [None] * RUNS, tenant_id="capped")
        with ExitStack() as workers:
            for i in range(4):
                workers.enter_context(
                    cronwheel_proc(
                        "worker",
                        "--concurrency",
                        "10",
                        "--db",
                        store_url,
                        env=env,
                        log=tmp_path / f"worker{i}.log",
                    )
                )

            async def all_done() -> bool:
                await asyncio.sleep(0)
                runs = await cw.store.list_runs("capped", state=RunState.SUCCEEDED, limit=100)
                return len(runs) == RUNS

            await eventually(all_done, timeout=180)
    assert receiver.seen == RUNS
    assert receiver.peak_total <= CAP
    assert receiver.peak_total >= 2  # the runs did overlap: the cap, not luck, held them
