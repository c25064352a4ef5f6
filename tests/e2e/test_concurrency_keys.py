"""Issue 17 with real processes: a concurrency key of 1 never runs two at once across
three worker processes, while runs of different keys overlap, as a webhook receiver
counting the requests in flight per key sees it (decision 0031)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

import cronwheel
from cronwheel.core.model import RunState
from tests.e2e.overlaps import OverlapReceiver, overlap_receiver
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually

# Crashes, races between processes and what each store keeps differ by store: this
# file runs on both whatever CRONWHEEL_TEST_STORE says (tests/tiers.py).
pytestmark = pytest.mark.both_stores

CUSTOMERS = ("c1", "c2", "c3")
PER_CUSTOMER = 8
RUNS = len(CUSTOMERS) * PER_CUSTOMER


@pytest.fixture
def receiver() -> Iterator[OverlapReceiver]:
    # Each request held long enough for the workers' runs to overlap, if allowed.
    with overlap_receiver(0.1, key_field="customer") as server:
        yield server


async def test_a_key_of_one_never_runs_twice_at_once_across_three_workers(
    store_url: str, receiver: OverlapReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRONWHEEL_WEBHOOK_ALLOW", "127.0.0.1")  # the receiver is local
    env = {"CRONWHEEL_WEBHOOK_ALLOW": "127.0.0.1"}
    url = receiver.url("report")
    async with await cronwheel.connect(store_url) as cw:
        job = await cw.create(
            name="reports",
            schedule={"kind": "manual"},
            action={"type": "webhook", "url": url},
            concurrency={"key": "report:{payload.customer}", "limit": 1},
        )
        payloads = [{"customer": c} for _ in range(PER_CUSTOMER) for c in CUSTOMERS]
        await cw.enqueue(job.id, payloads)
        with ExitStack() as workers:
            for i in range(3):
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
                runs = await cw.store.list_runs("default", state=RunState.SUCCEEDED, limit=100)
                return len(runs) == RUNS

            await eventually(all_done, timeout=180)
    assert receiver.seen == RUNS
    assert receiver.peak == {c: 1 for c in CUSTOMERS}  # one report per customer at a time
    assert receiver.peak_total >= 2  # different keys did run at once
