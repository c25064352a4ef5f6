"""Conformance: the dead-letter listing (``list_dead``) with its filters, its cursor, its
jobs' names and each run's last error, on every store."""

from __future__ import annotations

from datetime import datetime, timedelta

from cronwheel.core.model import AttemptOutcome, Job, RetryPolicy, RunState
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run


async def _fail(store: Store, job: Job, now: datetime, state: RunState, error: str) -> int:
    [c] = await store.claim_runs(
        "w", [job.pool], limit=1, now=now, prefetch_until=now, lease_seconds=5
    )
    await store.complete_runs(
        [
            Completion(
                run_id=c.run.id,
                fence=c.run.fence,
                worker_id="w",
                state=state,
                outcome=AttemptOutcome.FAILED,
                started_at=now,
                finished_at=now,
                error_class=f"{error}Error",
                error_message=f"{error} broke",
                available_at=now if state is RunState.PENDING else None,
                reason="retries exhausted" if state is RunState.DEAD else None,
            )
        ]
    )
    return c.run.id


async def dead_run(
    store: Store, job: Job, start: float, errors: list[str], base: datetime | None = None
) -> int:
    """A run of ``job`` that failed once per error, the last one killing it; its times
    ``start`` seconds after ``base`` (default: the factories' T0)."""

    def when(seconds: float) -> datetime:
        return at(seconds) if base is None else base + timedelta(seconds=seconds)

    await store.materialize_runs([make_run(job, when(start))], [])
    run_id = 0
    for n, error in enumerate(errors):
        last = n == len(errors) - 1
        state = RunState.DEAD if last else RunState.PENDING
        run_id = await _fail(store, job, when(start + n), state, error)
    return run_id


class DeadListContract:
    """The dead-letter listing (``list_dead``) with its filters, its cursor, its.

    Part of the ``history`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_dead_runs_newest_first_with_name_and_last_error(self, store: Store) -> None:
        mail = make_job("mail", pool="email", retry=RetryPolicy(max_attempts=2))
        report = make_job("report", pool="reports", retry=RetryPolicy(max_attempts=1))
        await store.create_jobs([mail, report])
        first = await dead_run(store, mail, 0, ["Timeout", "Http"])
        second = await dead_run(store, report, 10, ["Value"])

        listed = await store.list_dead(mail.tenant_id)
        assert [d.run.id for d in listed] == [second, first]
        assert [d.job_name for d in listed] == ["report", "mail"]
        assert [(d.error_class, d.error_message) for d in listed] == [
            ("ValueError", "Value broke"),
            ("HttpError", "Http broke"),  # the last attempt's, not the first's
        ]
        assert listed[1].run.state is RunState.DEAD and listed[1].run.attempt == 2

    async def test_dead_runs_filtered_by_pool_job_time_and_cursor(self, store: Store) -> None:
        mail = make_job("mail", pool="email", retry=RetryPolicy(max_attempts=1))
        report = make_job("report", pool="reports", retry=RetryPolicy(max_attempts=1))
        await store.create_jobs([mail, report])
        old = await dead_run(store, mail, 0, ["A"])
        new = await dead_run(store, mail, 100, ["B"])
        other = await dead_run(store, report, 50, ["C"])
        tenant = mail.tenant_id

        assert [d.run.id for d in await store.list_dead(tenant, pool="email")] == [new, old]
        assert [d.run.id for d in await store.list_dead(tenant, job_id=report.id)] == [other]
        assert [d.run.id for d in await store.list_dead(tenant, died_since=at(50))] == [other, new]
        assert [d.run.id for d in await store.list_dead(tenant, limit=1)] == [other]
        assert [d.run.id for d in await store.list_dead(tenant, before_id=other)] == [new, old]
        assert await store.list_dead(tenant, pool="nowhere") == []
        assert await store.list_dead(tenant, job_id="not-a-job-id") == []
        assert await store.list_dead("someone-else") == []

    async def test_runs_that_are_not_dead_are_not_listed(self, store: Store) -> None:
        job = make_job(retry=RetryPolicy(max_attempts=3))
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0)), make_run(job, at(5))], [])
        await _fail(store, job, at(0), RunState.PENDING, "Retry")
        assert await store.list_dead(job.tenant_id) == []
