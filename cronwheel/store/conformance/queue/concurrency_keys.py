"""Conformance: concurrency keys (decision 0031). A run with a key starts only while fewer
of its tenant's runs with the same key are running than its limit, across claimers; the
others wait pending, and a key at its limit holds back nothing else."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from cronwheel.core.model import AttemptOutcome, Concurrency, Job, Overlap, RunState, Tenant
from cronwheel.store.base import Claim, Completion, Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run


async def _claim(store: Store, limit: int = 50, now: float = 0.0, **kw: Any) -> Claim:
    return await store.claim_runs(
        "w", ["default"], limit=limit, now=at(now), prefetch_until=at(now), lease_seconds=60, **kw
    )


async def _keyed(store: Store, job: Job, keys: Sequence[str | None], limit: int = 1) -> None:
    """One due run of ``job`` per key, in order, a millisecond apart (None: no key)."""
    runs = [
        make_run(
            job,
            at(-100 + i / 1000),
            concurrency_key=key,
            concurrency_limit=None if key is None else limit,
        )
        for i, key in enumerate(keys)
    ]
    await store.materialize_runs(runs, [])


def _keys(claim: Claim) -> list[str | None]:
    return [c.run.concurrency_key for c in claim]


async def _finish(store: Store, claim: Claim, now: float = 1.0) -> None:
    done = [
        Completion(
            c.run.id, c.run.fence, "w", RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED, at(0), at(now)
        )
        for c in claim
    ]
    await store.complete_runs(done)


class ConcurrencyKeysContract:
    """Concurrency keys (decision 0031). A run with a key starts only while fewer.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_key_of_limit_one_never_has_two_running(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await _keyed(store, job, ["report:42"] * 5)
        first = await _claim(store)
        assert _keys(first) == ["report:42"]
        assert first[0].run.concurrency_limit == 1
        assert len(await _claim(store)) == 0  # the key is full: its runs wait
        pending = await store.list_runs("default", state=RunState.PENDING, limit=10)
        assert len(pending) == 4  # waiting, not failed, not lost
        await _finish(store, first)
        second = await _claim(store, now=1)
        assert _keys(second) == ["report:42"]  # one finished: the next starts
        assert second[0].run.scheduled_for == at(-100 + 1 / 1000)  # in order

    async def test_a_limit_of_n_runs_n_at_once(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await _keyed(store, job, ["k"] * 10, limit=3)
        assert len(await _claim(store)) == 3
        assert len(await _claim(store)) == 0

    async def test_different_keys_run_in_parallel(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await _keyed(store, job, ["report:1", "report:2", "report:3", "report:1", "report:2"])
        claimed = await _claim(store)
        assert sorted(k or "" for k in _keys(claimed)) == ["report:1", "report:2", "report:3"]

    async def test_a_full_key_holds_back_neither_other_keys_nor_runs_without_one(
        self,
        store: Store,
    ) -> None:
        # A's 300 older runs of one key come first in priority-then-due order: a claim that
        # read them like any other would take one and leave the rest of the batch empty.
        job = make_job()
        await store.create_jobs([job])
        await _keyed(store, job, ["busy"] * 300 + ["other", None, None])
        claimed = await _claim(store, limit=10)
        assert Counter(_keys(claimed)) == {"busy": 1, "other": 1, None: 2}
        again = await _claim(store, limit=10)
        assert len(again) == 0  # busy is full, other is full, nothing else waits

    async def test_keys_are_per_tenant(self, store: Store) -> None:
        for tenant in ("a", "b"):
            await store.create_tenant(Tenant(tenant, tenant, T0))
        a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
        await store.create_jobs([a, b])
        await _keyed(store, a, ["report:42"] * 3)
        await _keyed(store, b, ["report:42"] * 3)
        claimed = await _claim(store)
        assert Counter(c.run.tenant_id for c in claimed) == {"a": 1, "b": 1}

    async def test_the_smallest_limit_of_a_key_holds(self, store: Store) -> None:
        # Two jobs naming the same key with limits 1 and 5: the strictest one holds.
        strict, loose = make_job(), make_job()
        await store.create_jobs([strict, loose])
        await _keyed(store, loose, ["shared"] * 3, limit=5)
        await _keyed(store, strict, ["shared"], limit=1)
        first = await _claim(store, limit=1)
        assert len(first) == 1
        # One of the key's runs is running: whichever limit the next has, the strict job's
        # limit of 1 is full (the key's smallest, running or next).
        if first[0].run.job_id == strict.id:
            assert len(await _claim(store)) == 0

    async def test_a_key_holds_across_claimers(self, store: Store, store2: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        await _keyed(store, job, ["k1"] * 40 + ["k2"] * 40, limit=2)
        claims = await asyncio.gather(*(_claim(s, 10) for s in (store, store2, store, store2)))
        started = Counter(k for c in claims for k in _keys(c))
        assert started == {"k1": 2, "k2": 2}
        running = await store.list_runs("default", state=RunState.RUNNING, limit=100)
        assert Counter(r.concurrency_key for r in running) == {"k1": 2, "k2": 2}

    async def test_keyed_runs_keep_their_tenant_cap_and_overlap_heads_their_key(
        self,
        store: Store,
    ) -> None:
        await store.create_tenant(Tenant("a", "a", T0, max_running=2))
        job = make_job(tenant_id="a")
        await store.create_jobs([job])
        await _keyed(store, job, ["k1", "k2", "k3", None])
        assert len(await _claim(store)) == 2  # max_running counts keyed runs too

    async def test_a_job_keeps_its_concurrency(self, store: Store) -> None:
        job = make_job(concurrency=Concurrency("report:{payload.customer}", 2))
        await store.create_jobs([job])
        found = await store.get_job(job.tenant_id, job.id)
        assert found is not None and found.concurrency == Concurrency(
            "report:{payload.customer}", 2
        )
        updated = replace(found, concurrency=None, version=found.version)
        saved = await store.update_job(updated, expected_version=found.version, actor="t")
        assert saved.concurrency is None

    async def test_overlap_heads_sharing_a_key_take_its_room_in_turn(self, store: Store) -> None:
        # Two jobs queueing their own runs (overlap "queue") that share one key of limit 1:
        # each job's head may start as far as its overlap policy goes, but not both at once.
        first, second = make_job(overlap=Overlap.QUEUE), make_job(overlap=Overlap.QUEUE)
        await store.create_jobs([first, second])
        for job in (first, second):
            run = make_run(job, at(-10), overlap=Overlap.QUEUE)
            await store.materialize_runs(
                [replace(run, concurrency_key="shared", concurrency_limit=1)], []
            )
        claimed = await _claim(store)
        assert _keys(claimed) == ["shared"]
        assert len(await _claim(store)) == 0
        await _finish(store, claimed)
        assert _keys(await _claim(store, now=1)) == ["shared"]

    async def test_a_tenant_with_only_keyed_runs_keeps_its_cap_and_weight(
        self, store: Store
    ) -> None:
        await store.create_tenant(Tenant("a", "a", T0, max_running=2))
        await store.create_tenant(Tenant("b", "b", T0, claim_weight=3.0))
        a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
        await store.create_jobs([a, b])
        await _keyed(store, a, [f"k{i}" for i in range(10)])
        await _keyed(store, b, [f"k{i}" for i in range(10)])
        claimed = await _claim(store, limit=6)
        # A's cap holds with no run of A outside a key; B's weight 3 takes the rounds' rest.
        assert Counter(c.run.tenant_id for c in claimed) == {"a": 2, "b": 4}
        assert len(await _claim(store, limit=6)) == 6  # B's other keys; A is at its cap

    async def test_tenants_with_only_keyed_runs_share_a_claim_by_weight(self, store: Store) -> None:
        await store.create_tenant(Tenant("b", "b", T0, claim_weight=3.0))
        await store.create_tenant(Tenant("c", "c", T0))
        b, c = make_job(tenant_id="b"), make_job(tenant_id="c")
        await store.create_jobs([b, c])
        await _keyed(store, c, [f"k{i}" for i in range(10)])
        await _keyed(store, b, [f"k{i}" for i in range(10)])
        claimed = await _claim(store, limit=4)
        assert Counter(r.run.tenant_id for r in claimed) == {"b": 3, "c": 1}
