"""The maintenance service: one pass rescues every expired lease and trims history."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import RetryPolicy, RunState
from cronwheel.engine.maintenance import Maintenance, MaintenanceConfig
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at, make_job, make_run, succeeded

# Crashes, races between processes and what each store keeps differ by store: this
# file runs on both whatever CRONWHEEL_TEST_STORE says (tests/tiers.py).
pytestmark = pytest.mark.both_stores


async def test_a_pass_rescues_every_expired_lease_in_batches(store: Store) -> None:
    poison = make_job(retry=RetryPolicy(max_attempts=1))
    normal = make_job()
    await store.create_jobs([poison, normal])
    await store.materialize_runs(
        [make_run(poison, at(0))] + [make_run(normal, at(i)) for i in range(5)], []
    )
    await store.claim_runs(
        "w", ["default"], limit=10, now=at(5), prefetch_until=at(5), lease_seconds=10
    )
    clock = FrozenClock(at(15))
    result = await Maintenance(
        store, clock=clock, config=MaintenanceConfig(rescue_batch=2)
    ).run_once()
    assert (len(result.retried), len(result.dead)) == (5, 1)
    states = sorted(r.state.value for r in await store.list_runs("default"))
    assert states == ["dead"] + ["pending"] * 5


async def test_a_stopping_process_ends_its_pass_after_the_statement_in_progress(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM during a pass (a rescue backlog, an archive, a vacuum): the process must
    stop within seconds, and the next holder of the maintenance lease does the rest."""
    job = make_job()
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(i)) for i in range(5)], [])
    await store.claim_runs(
        "w", ["default"], limit=10, now=at(5), prefetch_until=at(5), lease_seconds=10
    )
    stop = asyncio.Event()
    rescue = store.rescue_expired
    later: list[str] = []

    async def rescue_then_stop(**kwargs: Any) -> Any:
        stop.set()  # the signal arrives while the first batch is being rescued
        return await rescue(**kwargs)

    async def recorded(name: str, result: Any) -> Any:
        later.append(name)
        return result

    monkeypatch.setattr(store, "rescue_expired", rescue_then_stop)
    for name, result in [
        ("advance_pipelines", 0),
        ("archive_runs", 0),
        ("delete_history", 0),
        ("delete_notifications", 0),
        ("vacuum_live_tables", []),
    ]:
        monkeypatch.setattr(store, name, lambda *a, n=name, r=result, **k: recorded(n, r))
    config = MaintenanceConfig(rescue_batch=2)
    result = await Maintenance(store, clock=FrozenClock(at(15)), config=config).run_once(stop)
    assert len(result.retried) == 2  # the batch in progress, whole
    assert later == []  # nothing after it
    states = sorted(r.state.value for r in await store.list_runs("default"))
    assert states == ["pending"] * 2 + ["running"] * 3  # the next pass rescues those


async def test_a_pass_deletes_history_past_retention(store: Store) -> None:
    job = make_job()
    await store.create_jobs([job])
    await store.materialize_runs(
        [make_run(job, at(0), state=RunState.SKIPPED, reason="misfire")], []
    )
    [run] = await store.list_runs("default")
    assert run.finished_at is not None
    clock = FrozenClock(run.finished_at + timedelta(days=1, seconds=1))
    keep_week = Maintenance(store, clock=clock, config=MaintenanceConfig(retention_days=7))
    assert (await keep_week.run_once()).deleted == 0
    keep_day = Maintenance(store, clock=clock, config=MaintenanceConfig(retention_days=1))
    assert (await keep_day.run_once()).deleted == 1


async def test_a_pass_deletes_finished_notifications_past_retention(store: Store) -> None:
    from cronwheel.store.base import NotificationResult

    job = make_job(notify=({"on": ["skipped"], "url": "http://127.0.0.1:9/n"},))
    await store.create_jobs([job])
    skipped = [make_run(job, at(i), state=RunState.SKIPPED, reason="misfire") for i in (0, 1)]
    await store.materialize_runs(skipped, [])
    done, waiting = await store.claim_notifications(now=at(1), limit=10, lease_seconds=5)
    await store.finish_notifications([NotificationResult(done.id, 1, delivered=True)], now=at(2))
    clock = FrozenClock(at(2) + timedelta(days=1, seconds=1))
    keep_day = Maintenance(store, clock=clock, config=MaintenanceConfig(retention_days=1))
    assert (await keep_day.run_once()).notifications_deleted == 1
    # The one not delivered yet is kept, however old: it is still owed to its target.
    assert [n.id for n in await store.list_notifications("default")] == [waiting.id]


async def test_a_pass_archives_settled_runs_and_retention_forgets_them(store: Store) -> None:
    """PostgreSQL moves a finished run into history once it has settled, and retention
    drops its day's partition; SQLite keeps it in runs and deletes it by rows. Either
    way a reader sees the run until retention, and not after."""
    job = make_job()
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(-30))], [])
    [claimed] = await store.claim_runs(
        "w", ["default"], limit=1, now=at(0), prefetch_until=at(0), lease_seconds=10
    )
    await store.complete_runs([succeeded(claimed, at(0))])
    before = await store.get_run("default", claimed.run.id)
    postgres = store.__class__.__name__ == "PostgresStore"
    config = MaintenanceConfig(retention_days=1)
    early = await Maintenance(store, clock=FrozenClock(at(5)), config=config).run_once()
    assert early.archived == 0  # not settled yet
    settled = await Maintenance(store, clock=FrozenClock(at(20)), config=config).run_once()
    assert settled.archived == (1 if postgres else 0)
    assert await store.get_run("default", claimed.run.id) == before
    # Two days on, the day it finished (a partition) is past the one-day retention.
    later = Maintenance(store, clock=FrozenClock(at(2 * 86_400)), config=config)
    assert (await later.run_once()).deleted == (0 if postgres else 1)  # a drop counts none
    assert await store.get_run("default", claimed.run.id) is None
    assert await store.list_attempts("default", claimed.run.id) == []


async def test_a_pass_gives_back_unstarted_runs_without_counting_a_lost_attempt(
    store: Store,
) -> None:
    # At-most-once: a run claimed ahead without a stored start never began (its start is
    # stored before it begins): unclaimed. Any other may have begun: a lost attempt, not
    # charged ("Duplicates under overload", decision 0037).
    from cronwheel.core.model import Delivery
    from cronwheel.observability import metrics
    from cronwheel.store.base import Start
    from tests.engine.test_metrics_events import sample

    once = make_job(delivery=Delivery.AT_MOST_ONCE, retry=RetryPolicy(max_attempts=1))
    twice = make_job(retry=RetryPolicy(max_attempts=1))
    await store.create_jobs([once, twice])
    await store.materialize_runs(
        [make_run(once, at(i)) for i in range(4)] + [make_run(twice, at(4 + i)) for i in range(2)],
        [],
    )
    begun, *waiting, lagging, late = await store.claim_runs(
        "w", ["default"], limit=10, now=at(0), prefetch_until=at(5), lease_seconds=10, started=False
    )
    await store.mark_started("w", [Start(begun.run.id, begun.run.fence, at(0))])
    registry = metrics.default().registry
    lost = sample(registry, "cronwheel_attempts_total", pool="unknown", outcome="lost")
    unclaimed = sample(registry, "cronwheel_runs_unclaimed_total")
    result = await Maintenance(
        store, clock=FrozenClock(at(60)), config=MaintenanceConfig(rescue_batch=2)
    ).run_once()
    assert (result.dead, result.retried) == ([begun.run.id], [lagging.run.id, late.run.id])
    assert sorted(result.unstarted) == sorted(c.run.id for c in waiting)
    assert sample(registry, "cronwheel_attempts_total", pool="unknown", outcome="lost") == lost + 3
    assert sample(registry, "cronwheel_runs_unclaimed_total") == unclaimed + 3
