"""Conformance: an attempt keeps what its command left (exit code, output tails), through
the archive of finished runs into history too; a worker's record keeps the executables
its operator allows it to run (issue 30 item 1, step 23)."""

from __future__ import annotations

import json

from cronwheel.core.model import SHARED_WORKERS, AttemptOutcome, RetryPolicy, RunState, WorkerInfo
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run


class AttemptOutputContract:
    """A command's output tails stay with their attempt; a worker's allowed commands
    with its record.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_the_output_is_kept_with_each_attempt_and_in_history(self, store: Store) -> None:
        job = make_job(retry=RetryPolicy(max_attempts=2))
        await store.create_jobs([job])
        await store.materialize_runs([make_run(job, at(-30))], [])
        failed = json.dumps({"exit_code": 3, "stdout": "", "stderr": "é" * 70_000})
        ends = [
            (RunState.PENDING, AttemptOutcome.FAILED, failed),
            (RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED, '{"exit_code": 0, "stdout": "ok"}'),
        ]
        for n, (state, outcome, output) in enumerate(ends):
            [c] = await store.claim_runs(
                "w", ["default"], limit=1, now=at(n), prefetch_until=at(n), lease_seconds=5
            )
            done = Completion(
                run_id=c.run.id,
                fence=c.run.fence,
                worker_id="w",
                state=state,
                outcome=outcome,
                started_at=at(n),
                finished_at=at(n),
                error_class="ExitCode" if state is RunState.PENDING else None,
                available_at=at(n) if state is RunState.PENDING else None,
                output=output,
            )
            assert await store.complete_runs([done]) == [c.run.id]
        expected = [failed, '{"exit_code": 0, "stdout": "ok"}']
        attempts = await store.list_attempts(job.tenant_id, c.run.id)
        assert [a.output for a in attempts] == expected
        # Archived (PostgreSQL moves the run and its attempts to history; SQLite keeps
        # them): the reads are the same.
        await store.archive_runs(now=at(3600), settle_seconds=10, partition_seconds=60)
        attempts = await store.list_attempts(job.tenant_id, c.run.id)
        assert [a.output for a in attempts] == expected

    async def test_a_worker_record_keeps_its_allowed_commands(self, store: Store) -> None:
        worker = WorkerInfo(
            id="host-1",
            tenant_id=SHARED_WORKERS,
            host="host",
            pools=("default",),
            capacity=4,
            in_flight=0,
            started_at=at(0),
            last_seen_at=at(0),
            commands=("pg_dump", "/opt/jobs/*"),
        )
        await store.register_worker(worker)
        plain = WorkerInfo("host-2", SHARED_WORKERS, "host", ("default",), 4, 0, at(0), at(0))
        await store.register_worker(plain)
        live = {w.id: w.commands for w in await store.list_live_workers(seen_since=at(0))}
        assert live == {"host-1": ("pg_dump", "/opt/jobs/*"), "host-2": ()}
