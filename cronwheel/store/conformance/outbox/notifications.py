"""Conformance: completion notifications. The statements that change a run's state write
the outbox rows of its job's targets in the same write, and only for them; the notifier's
claim, lease, delivery, retry, dead letter, replay and retention."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from cronwheel.core.model import (
    MAX_NOTIFY_ERROR,
    AttemptOutcome,
    Delivery,
    Job,
    NotificationState,
    NotifyEvent,
    Overlap,
    RetryPolicy,
    RunState,
)
from cronwheel.store.base import Completion, NotificationResult, Release, Store
from cronwheel.store.conformance.factories import at, make_job, make_run

A = "http://127.0.0.1:9/a"
B = "http://127.0.0.1:9/b"
TARGETS = (
    {"on": ["succeeded", "dead", "skipped"], "url": A},
    {"on": ["failed", "dead"], "url": B},
)


async def _job(store: Store, *occurrences: float, **overrides: Any) -> Job:
    job = make_job(notify=TARGETS, retry=RetryPolicy(max_attempts=2), **overrides)
    await store.create_jobs([job])
    await store.materialize_runs(
        [make_run(job, at(t), overlap=job.overlap) for t in occurrences], []
    )
    return job


async def _claim(store: Store, now: float, limit: int = 10, lease: float = 5) -> list[int]:
    claimed = await store.claim_runs(
        "w", ["default"], limit=limit, now=at(now), prefetch_until=at(now), lease_seconds=lease
    )
    return [c.run.id for c in claimed]


def _done(
    run_id: int, state: RunState, finished: float, *, fence: int = 1, **kw: object
) -> Completion:
    failed = state is not RunState.SUCCEEDED
    return Completion(
        run_id=run_id,
        fence=fence,
        worker_id="w",
        state=state,
        outcome=AttemptOutcome.FAILED if failed else AttemptOutcome.SUCCEEDED,
        started_at=at(finished - 1),
        finished_at=at(finished),
        error_class="RuntimeError" if failed else None,
        error_message="boom" if failed else None,
        available_at=at(finished + 1) if state is RunState.PENDING else None,
        **kw,  # type: ignore[arg-type]
    )


async def _outbox(store: Store, tenant: str = "default") -> list[tuple[str, str, str]]:
    """(event id, event, url) of every notification, oldest first."""
    found = await store.list_notifications(tenant)
    return [(n.event_id, n.event.value, n.url) for n in reversed(found)]


async def _three_events(store: Store) -> None:
    await _job(store, 0, 1, 2)
    runs = sorted(await _claim(store, 2))
    await store.complete_runs([_done(r, RunState.SUCCEEDED, 3) for r in runs])


class NotificationsContract:
    """Completion notifications. The statements that change a run's state write.

    Part of the ``outbox`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_job_keeps_its_targets(self, store: Store) -> None:
        job = await _job(store)
        got = await store.get_job(job.tenant_id, job.id)
        assert got is not None and got.notify == TARGETS
        changed = await store.update_job(replace(got, notify=()), expected_version=1, actor="t")
        assert changed.notify == ()
        got = await store.get_job(job.tenant_id, job.id)
        assert got is not None and got.notify == ()

    async def test_completions_write_the_events_their_targets_listen_to(self, store: Store) -> None:
        job = await _job(store, 0, 1, 2)
        quiet = make_job()
        await store.create_jobs([quiet])
        await store.materialize_runs([make_run(quiet, at(0))], [])
        ok, retry, dead, silent = sorted(await _claim(store, 2))
        long_error = "x" * (MAX_NOTIFY_ERROR + 100)
        accepted = await store.complete_runs(
            [
                _done(ok, RunState.SUCCEEDED, 3),
                _done(retry, RunState.PENDING, 3),
                replace(_done(dead, RunState.DEAD, 3), error_message=long_error),
                _done(silent, RunState.SUCCEEDED, 3),
            ]
        )
        assert sorted(accepted) == [ok, retry, dead, silent]
        assert await _outbox(store) == [
            (f"run-{ok}-succeeded-1", "succeeded", A),
            (f"run-{retry}-failed-1", "failed", B),
            (f"run-{dead}-dead-1", "dead", A),
            (f"run-{dead}-dead-1", "dead", B),
        ]
        [n, *_] = [n for n in await store.list_notifications("default") if n.run_id == dead]
        assert n.error == "x" * MAX_NOTIFY_ERROR and n.job_name == job.name
        assert (n.job_id, n.scheduled_for, n.attempt) == (job.id, at(2), 1)
        assert n.state is NotificationState.PENDING and n.tries == 0 and n.next_at == at(3)
        assert n.envelope()["run"] == {
            "id": dead,
            "scheduled_for": at(2).isoformat(),
            "state": "dead",
            "attempt": 1,
        }

    async def test_a_batch_of_many_jobs_runs_writes_each_jobs_own_events(
        self, store: Store
    ) -> None:
        # The outbox finds each run's job among the batch's jobs (on PostgreSQL, by a
        # lookup made once per batch): with many jobs, each with its own targets or none,
        # every run gets its own job's targets, name and target indexes, and no other's.
        kinds: list[tuple[dict[str, Any], ...]] = [
            TARGETS,
            ({"on": ["succeeded"], "url": B},),
            (),
            ({"on": ["failed"], "url": A}, {"on": ["succeeded", "failed"], "url": B}),
        ]
        jobs = [make_job(notify=kinds[k % len(kinds)]) for k in range(24)]
        await store.create_jobs(jobs)
        await store.materialize_runs([make_run(j, at(t)) for j in jobs for t in (0, 1)], [])
        claim = await store.claim_runs(
            "w", ["default"], limit=100, now=at(2), prefetch_until=at(2), lease_seconds=5
        )
        by_id = {j.id: j for j in jobs}
        runs = sorted((c.run.id, by_id[c.run.job_id]) for c in claim)
        assert len(runs) == 48
        states = [RunState.SUCCEEDED if i % 3 else RunState.PENDING for i in range(len(runs))]
        accepted = await store.complete_runs(
            [_done(r, state, 3) for (r, _), state in zip(runs, states, strict=True)]
        )
        assert sorted(accepted) == [r for r, _ in runs]
        expected = []
        for (run, job), state in zip(runs, states, strict=True):
            event = "succeeded" if state is RunState.SUCCEEDED else "failed"
            for i, target in enumerate(job.notify):
                if event in target["on"]:
                    expected.append((f"run-{run}-{event}-1", event, target["url"], job.name, i))
        found = await store.list_notifications("default", limit=500)
        got = [
            (n.event_id, n.event.value, n.url, n.job_name, n.target)
            for n in sorted(found, key=lambda n: (n.run_id, n.target))
        ]
        assert got == expected and len(expected) > 30  # both events, all four kinds

    async def test_a_stale_completion_writes_no_event(self, store: Store) -> None:
        await _job(store, 0)
        [run] = await _claim(store, 0)
        assert await store.complete_runs([_done(run, RunState.SUCCEEDED, 1, fence=7)]) == []
        assert await _outbox(store) == []

    async def test_rescues_and_releases_write_failed_and_dead_events(self, store: Store) -> None:
        await _job(store, 0)
        await _job(store, 0, delivery=Delivery.AT_MOST_ONCE)
        first, lost = sorted(await _claim(store, 0, lease=5))
        rescued = await store.rescue_expired(now=at(5))
        assert (rescued.retried, rescued.dead) == ([first], [lost])
        events = await _outbox(store)
        assert events == [
            (f"run-{first}-failed-1", "failed", B),
            (f"run-{lost}-dead-1", "dead", A),
            (f"run-{lost}-dead-1", "dead", B),
        ]
        again = await _claim(store, 6, lease=5)
        assert again == [first]
        result = await store.release_runs(
            [Release(first, 2, "w", started=True, why="stopping")], now=at(7)
        )
        assert result.retried == [first]  # a release of an at-least-once run is no event
        assert await _outbox(store) == events

    async def test_a_released_at_most_once_run_is_a_dead_event(self, store: Store) -> None:
        await _job(store, 0, delivery=Delivery.AT_MOST_ONCE)
        [run] = await _claim(store, 0)
        result = await store.release_runs(
            [Release(run, 1, "w", started=True, why="bye")], now=at(1)
        )
        assert result.dead == [run]
        assert await _outbox(store) == [
            (f"run-{run}-dead-1", "dead", A),
            (f"run-{run}-dead-1", "dead", B),
        ]

    async def test_the_last_lost_attempt_is_a_dead_event(self, store: Store) -> None:
        await _job(store, 0)
        [run] = await _claim(store, 0)
        await store.rescue_expired(now=at(5))
        assert await _claim(store, 6) == [run]
        assert (await store.rescue_expired(now=at(11))).dead == [run]
        assert [e for e in await _outbox(store) if e[1] == "dead"] == [
            (f"run-{run}-dead-2", "dead", A),
            (f"run-{run}-dead-2", "dead", B),
        ]

    async def test_skipped_runs_are_events_when_planned_or_claimed(self, store: Store) -> None:
        job = make_job(notify=TARGETS, overlap=Overlap.SKIP)
        await store.create_jobs([job])
        planned = make_run(job, at(0), state=RunState.SKIPPED, reason="misfire")
        await store.materialize_runs([planned, make_run(job, at(1), overlap=Overlap.SKIP)], [])
        await store.materialize_runs([make_run(job, at(2), overlap=Overlap.SKIP)], [])
        assert len(await _claim(store, 1)) == 1
        claim = await store.claim_runs(
            "w", ["default"], limit=10, now=at(2), prefetch_until=at(2), lease_seconds=5
        )
        assert claim.overlap_skipped == 1
        runs = {r.scheduled_for: r.id for r in await store.list_runs("default", job_id=job.id)}
        assert await _outbox(store) == [
            (f"run-{runs[at(0)]}-skipped-0", "skipped", A),
            (f"run-{runs[at(2)]}-skipped-0", "skipped", A),
        ]

    async def test_notifications_are_claimed_once_under_a_lease(self, store: Store) -> None:
        await _three_events(store)
        assert await store.claim_notifications(now=at(2), limit=10, lease_seconds=30) == []
        first = await store.claim_notifications(now=at(3), limit=2, lease_seconds=30)
        assert [n.tries for n in first] == [1, 1]
        assert all(n.next_at == at(33) for n in first)
        rest = await store.claim_notifications(now=at(4), limit=10, lease_seconds=30)
        assert len(rest) == 1 and rest[0].id not in {n.id for n in first}
        assert await store.claim_notifications(now=at(32), limit=10, lease_seconds=30) == []
        # A notifier that never reported: its rows are due again once the lease is over.
        again = await store.claim_notifications(now=at(33), limit=10, lease_seconds=30)
        assert sorted(n.id for n in again) == sorted(n.id for n in first)
        assert [n.tries for n in again] == [2, 2]

    async def test_deliveries_retries_and_the_dead_letter(self, store: Store) -> None:
        await _three_events(store)
        a, b, c = await store.claim_notifications(now=at(3), limit=10, lease_seconds=30)
        results = [
            NotificationResult(a.id, a.tries, delivered=True),
            NotificationResult(b.id, b.tries, delivered=False, error="503", retry_at=at(10)),
            NotificationResult(c.id, c.tries, delivered=False, error="gave up"),
            NotificationResult(c.id, c.tries + 1, delivered=True),  # a stale fence: nothing
        ]
        assert await store.finish_notifications(results, now=at(4)) == sorted([a.id, b.id, c.id])
        assert await store.finish_notifications(results[:1], now=at(5)) == []  # done already
        by_id = {n.id: n for n in await store.list_notifications("default")}
        assert by_id[a.id].state is NotificationState.DELIVERED and by_id[a.id].finished_at == at(4)
        assert (by_id[b.id].state, by_id[b.id].next_at, by_id[b.id].last_error) == (
            NotificationState.PENDING,
            at(10),
            "503",
        )
        assert (by_id[c.id].state, by_id[c.id].last_error) == (NotificationState.DEAD, "gave up")
        dead = await store.list_notifications("default", state=NotificationState.DEAD)
        assert [n.id for n in dead] == [c.id]
        assert await store.claim_notifications(now=at(9), limit=10, lease_seconds=30) == []
        [retried] = await store.claim_notifications(now=at(10), limit=10, lease_seconds=30)
        assert (retried.id, retried.tries) == (b.id, 2)

    async def test_dead_notifications_are_replayed_by_their_tenant(self, store: Store) -> None:
        await _three_events(store)
        [a, *_] = await store.claim_notifications(now=at(3), limit=1, lease_seconds=30)
        await store.finish_notifications([NotificationResult(a.id, 1, delivered=False)], now=at(4))
        await store.ensure_tenant("other", "other", now=at(0))
        assert await store.replay_notifications("other", [a.id], now=at(5)) == []
        assert await store.replay_notifications("default", [a.id, a.id, 999_999], now=at(5)) == [
            a.id
        ]
        assert await store.replay_notifications("default", [a.id], now=at(5)) == []  # pending now
        claimed = await store.claim_notifications(now=at(5), limit=10, lease_seconds=30)
        [again] = [n for n in claimed if n.id == a.id]
        assert (again.tries, again.event_id, again.state) == (1, a.event_id, a.state)

    async def test_finished_notifications_are_deleted_after_retention(self, store: Store) -> None:
        await _three_events(store)
        a, b, _c = await store.claim_notifications(now=at(3), limit=10, lease_seconds=30)
        await store.finish_notifications(
            [
                NotificationResult(a.id, 1, delivered=True),
                NotificationResult(b.id, 1, delivered=False),
            ],
            now=at(4),
        )
        assert await store.delete_notifications(before=at(4)) == 0
        assert await store.delete_notifications(before=at(4) + timedelta(microseconds=1)) == 2
        left = await store.list_notifications("default")
        assert [n.state for n in left] == [NotificationState.PENDING]  # the one still leased

    async def test_event_kinds_are_the_documented_ones(self) -> None:
        assert [e.value for e in NotifyEvent] == [
            "succeeded",
            "failed",
            "dead",
            "skipped",
            "pipeline_succeeded",
            "pipeline_failed",
            "pipeline_cancelled",
        ]
