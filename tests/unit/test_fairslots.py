"""A worker's slots go round robin by tenant (decision 0028)."""

from __future__ import annotations

import asyncio

from cronwheel.engine.fairslots import FairSlots, Lanes


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


async def test_a_run_waits_for_its_lane_without_holding_a_slot() -> None:
    # Issue 26: webhook runs to one target at its connection limit must not take every
    # slot of the pool: a run for another target (or a handler) goes ahead of them.
    lanes = Lanes(total=10, per_lane=1)
    slots = FairSlots(3, lanes)
    order: list[str] = []
    gate = asyncio.Event()

    async def run(key: str, lane: str | None) -> None:
        async with slots.hold("a", lane):
            order.append(key)
            await gate.wait()

    tasks = [asyncio.create_task(run(f"x{i}", "http://x:80")) for i in range(3)]
    tasks.append(asyncio.create_task(run("y0", "http://y:80")))
    tasks.append(asyncio.create_task(run("h0", None)))
    await asyncio.sleep(0)
    # One run to x (its lane's limit), then y and the handler: the other x runs wait.
    assert order == ["x0", "y0", "h0"]
    assert lanes.in_use("http://x:80") == 1
    gate.set()
    await asyncio.gather(*tasks)
    assert sorted(order) == ["h0", "x0", "x1", "x2", "y0"]
    assert lanes.used == 0


async def test_the_lanes_total_bounds_requests_across_pools_and_tenants_take_turns() -> None:
    lanes = Lanes(total=2, per_lane=2)
    first, second = FairSlots(5, lanes), FairSlots(5, lanes)
    order: list[str] = []
    gates = {k: asyncio.Event() for k in ("a0", "a1", "a2", "a3", "c0", "b0")}

    async def run(slots: FairSlots, tenant: str, key: str, lane: str) -> None:
        async with slots.hold(tenant, lane):
            order.append(key)
            await gates[key].wait()

    async def turn() -> None:
        for _ in range(3):
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(run(first, "a", f"a{i}", f"http://t{i}:80")) for i in range(4)]
    await turn()
    tasks.append(asyncio.create_task(run(first, "c", "c0", "http://v:80")))
    tasks.append(asyncio.create_task(run(second, "b", "b0", "http://u:80")))
    await turn()
    assert order == ["a0", "a1"]  # two connections in all, whatever the pool
    gates["a0"].set()
    await turn()
    gates["a1"].set()
    await turn()
    gates["a2"].set()
    await turn()
    # Freed connections go round: the other pool's B, then the first pool's tenants in
    # turn (A waited first, then C), never all of A's backlog first.
    assert order[2:5] == ["b0", "a2", "c0"]
    for gate in gates.values():
        gate.set()
    await asyncio.gather(*tasks)
    assert sorted(order) == sorted(gates)
    assert lanes.used == 0


async def test_a_cancelled_lane_waiter_gives_back_nothing_it_did_not_take() -> None:
    lanes = Lanes(total=1, per_lane=1)
    slots = FairSlots(2, lanes)
    gate = asyncio.Event()

    async def run(lane: str | None) -> None:
        async with slots.hold("a", lane):
            await gate.wait()

    holder = asyncio.create_task(run("http://x:80"))
    waiter = asyncio.create_task(run("http://x:80"))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    gate.set()
    await holder
    assert (lanes.used, slots.free) == (0, 2)
    async with slots.hold("a", "http://x:80"), slots.hold("b", None):
        assert lanes.used == 1
