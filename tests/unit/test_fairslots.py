"""A worker's slots go round robin by tenant (decision 0028)."""

from __future__ import annotations

import asyncio

from cronwheel.fairslots import FairSlots


async def test_a_freed_slot_goes_to_the_next_tenant_in_turn() -> None:
    slots = FairSlots(1)
    order: list[str] = []
    gate = asyncio.Event()

    async def run(tenant: str, key: str) -> None:
        async with slots.hold(tenant):
            order.append(key)
            await gate.wait()

    first = asyncio.create_task(run("a", "a0"))
    await asyncio.sleep(0)
    # A's backlog queues first, then one run of B: B's goes second, not after A's.
    tasks = [asyncio.create_task(run("a", f"a{i}")) for i in range(1, 6)]
    tasks.append(asyncio.create_task(run("b", "b0")))
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, *tasks)
    assert order[:3] == ["a0", "a1", "b0"]
    assert order[3:] == ["a2", "a3", "a4", "a5"]


async def test_slots_limit_concurrency_and_survive_cancellation() -> None:
    slots = FairSlots(2)
    running = 0
    peak = 0
    release = asyncio.Event()

    async def run(tenant: str) -> None:
        nonlocal running, peak
        async with slots.hold(tenant):
            running += 1
            peak = max(peak, running)
            await release.wait()
            running -= 1

    tasks = [asyncio.create_task(run(t)) for t in "abcabcabc"]
    await asyncio.sleep(0)
    assert running == 2
    tasks[5].cancel()  # a waiter gives up: its place is not lost, nor is a slot
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert peak == 2
    assert sum(isinstance(r, asyncio.CancelledError) for r in results) == 1
    async with slots.hold("a"), slots.hold("b"):  # both slots are free again
        pass
