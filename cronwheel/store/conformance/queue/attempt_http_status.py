"""Conformance: an attempt keeps the HTTP status its webhook target answered (0008)."""

from __future__ import annotations

from cronwheel.core.model import AttemptOutcome, RetryPolicy, RunState
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run


class AttemptHttpStatusContract:
    """An attempt keeps the HTTP status its webhook target answered (0008).

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_the_webhook_status_is_kept_with_each_attempt(self, store: Store) -> None:
        job = make_job(retry=RetryPolicy(max_attempts=3))
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(0))], [])
        statuses: list[tuple[RunState, AttemptOutcome, int | None]] = [
            (RunState.PENDING, AttemptOutcome.FAILED, 502),
            (RunState.PENDING, AttemptOutcome.FAILED, None),  # no answer: a connection error
            (RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED, 204),
        ]
        for n, (state, outcome, status) in enumerate(statuses):
            [c] = await store.claim_runs(
                "w", ["default"], limit=1, now=at(n), prefetch_until=at(n), lease_seconds=5
            )
            failed = outcome is AttemptOutcome.FAILED
            done = Completion(
                run_id=c.run.id,
                fence=c.run.fence,
                worker_id="w",
                state=state,
                outcome=outcome,
                started_at=at(n),
                finished_at=at(n),
                error_class=f"HTTP{status}" if failed else None,
                available_at=at(n) if state is RunState.PENDING else None,
                http_status=status,
            )
            assert await store.complete_runs([done]) == [c.run.id]
        attempts = await store.list_attempts(job.tenant_id, c.run.id)
        assert [a.http_status for a in attempts] == [502, None, 204]
