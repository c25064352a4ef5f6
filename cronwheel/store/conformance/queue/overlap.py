"""Conformance: overlap policies applied at claim time, one run per job at a time; a
job whose action starts a pipeline is busy until that pipeline run ends (decision 0044)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from cronwheel.core.model import (
    AttemptOutcome,
    ClaimedRun,
    Job,
    Overlap,
    Priority,
    RunState,
    new_id,
)
from cronwheel.core.overlap import Verdict, busy, verdict
from cronwheel.core.pipelines.definition import parse_definition
from cronwheel.core.pipelines.model import Pipeline, PipelineRun, PipelineRunStart
from cronwheel.store.base import Claim, Completion, Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run


async def _claim(store: Store, now: float, worker: str = "w", prefetch: float = 0) -> Claim:
    return await store.claim_runs(
        worker,
        ["default"],
        limit=10,
        now=at(now),
        prefetch_until=at(now + prefetch),
        lease_seconds=60,
    )


async def _job(store: Store, overlap: Overlap, *occurrences: float) -> Job:
    job = make_job(overlap=overlap)
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(t), overlap=overlap) for t in occurrences], [])
    return job


async def _states(store: Store, job: Job) -> list[tuple[float, str, str | None]]:
    runs = await store.list_runs(job.tenant_id, job_id=job.id)
    return sorted(
        ((r.scheduled_for - at(0)).total_seconds(), r.state.value, r.reason) for r in runs
    )


# -- a job whose action starts a pipeline ----------------------------------------------

# a then b, in their own pool (a claim of "default" takes only the job's triggers); a
# has one attempt, so a lost lease makes it dead.
_TWO_STEPS = parse_definition(
    {
        "tasks": {
            "a": {
                "action": {"type": "handler", "name": "a"},
                "pool": "tasks",
                "retry": {"max_attempts": 1},
            },
            "b": {"action": {"type": "handler", "name": "b"}, "pool": "tasks"},
        },
        "edges": [{"from": "a", "to": "b"}],
    }
)


async def _pipeline_job(store: Store, policy: Overlap, *occurrences: float) -> tuple[Job, Pipeline]:
    d = _TWO_STEPS
    pipeline = Pipeline(
        new_id(), "default", f"p-{new_id()[-8:]}", 1, d.to_dict(), d.fingerprint(), T0, T0, 1
    )
    await store.create_pipeline(pipeline, actor="t")
    job = make_job(
        action={"type": "pipeline", "pipeline_id": pipeline.id}, overlap=policy, next_fire_at=None
    )
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(t), overlap=policy) for t in occurrences], [])
    return job, pipeline


async def _start(
    store: Store, job: Job, pipeline: Pipeline, trigger: ClaimedRun, now: float
) -> PipelineRun:
    """What the worker does with a claimed trigger: start its pipeline run, keyed by it."""
    start = PipelineRunStart.of(
        pipeline,
        job_id=job.id,
        job_version=1,
        actor="t",
        now=at(now),
        trigger_run_id=trigger.run.id,
    )
    return await store.start_pipeline_run(start)


async def _trigger(store: Store, job: Job, pipeline: Pipeline, now: float) -> PipelineRun:
    """Claim the job's due trigger, start its pipeline run, and complete it: from here
    nothing of the job is ``running`` until a worker claims the root task."""
    [trigger] = await _claim(store, now)
    started = await _start(store, job, pipeline, trigger, now)
    assert await store.complete_runs([_ended(trigger, now, RunState.SUCCEEDED)])
    return started


async def _claim_tasks(store: Store, now: float) -> Claim:
    return await store.claim_runs(
        "w", ["tasks"], limit=10, now=at(now), prefetch_until=at(now), lease_seconds=60
    )


_OUTCOMES = {
    RunState.SUCCEEDED: AttemptOutcome.SUCCEEDED,
    RunState.DEAD: AttemptOutcome.PERMANENT,
    RunState.CANCELLED: AttemptOutcome.CANCELLED,
}


def _ended(claimed: ClaimedRun, when: float, state: RunState) -> Completion:
    return Completion(
        run_id=claimed.run.id,
        fence=claimed.run.fence,
        worker_id="w",
        state=state,
        outcome=_OUTCOMES[state],
        started_at=at(when),
        finished_at=at(when),
        reason="permanent error" if state is RunState.DEAD else None,
        pipeline_run_id=claimed.run.pipeline_run_id,
    )


async def _pipeline_run(store: Store, pipeline_run_id: str) -> PipelineRun:
    found = await store.get_pipeline_run("default", pipeline_run_id)
    assert found is not None
    return found


# The ways a pipeline run started by the job's first occurrence (0) can stand when its
# next occurrence (10) is claimed: each sets it up and returns the run expected to be the
# job's head, when to claim, and how many unfinished pipeline runs hold that head.
Situation = Callable[[Store, Job, Pipeline], Awaitable[tuple[float, float, int]]]


async def _unfinished(store: Store, job: Job, pipeline: Pipeline) -> tuple[float, float, int]:
    await _trigger(store, job, pipeline, 0)  # its task a pending, nothing running
    return 10, 11, 1


async def _finished(store: Store, job: Job, pipeline: Pipeline) -> tuple[float, float, int]:
    first = await _trigger(store, job, pipeline, 0)
    [a] = await _claim_tasks(store, 5)
    await store.complete_runs([_ended(a, 6, RunState.DEAD)])
    assert (await _pipeline_run(store, first.id)).state == "failed"
    return 10, 11, 0


async def _its_own(store: Store, job: Job, pipeline: Pipeline) -> tuple[float, float, int]:
    """The trigger's worker died after it started the pipeline run and before it
    completed: the trigger's retry is the head, and the pipeline run it started itself
    does not hold it (a retried trigger finds that pipeline run again)."""
    [trigger] = await _claim(store, 0)
    await _start(store, job, pipeline, trigger, 0)
    await store.rescue_expired(now=at(61))  # its lease: 60 s
    return 0, 62, 0


_SITUATIONS: dict[str, Situation] = {
    "unfinished": _unfinished,
    "finished": _finished,
    "started by the head itself": _its_own,
}


class OverlapContract:
    """Overlap policies applied at claim time, one run per job at a time.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_allow_runs_are_prefetched_and_may_overlap(self, store: Store) -> None:
        job = await _job(store, Overlap.ALLOW, 0, 1)
        assert len(await _claim(store, 0, prefetch=2)) == 2
        assert [s for _, s, _ in await _states(store, job)] == ["running", "running"]

    async def test_policy_runs_are_claimed_only_once_due_and_one_at_a_time(
        self, store: Store
    ) -> None:
        await _job(store, Overlap.REPLACE, 0, 1, 5)
        [first] = await _claim(store, 1, prefetch=10)  # 0 and 1 are due; only the earliest goes
        assert first.run.scheduled_for == at(0)

    async def test_skip_records_the_occurrence_as_skipped(self, store: Store) -> None:
        job = await _job(store, Overlap.SKIP, 0, 10)
        [first] = await _claim(store, 0)
        assert await _claim(store, 10) == []
        states = await _states(store, job)
        assert states[0][1] == "running"
        assert states[1][1] == "skipped" and "overlap" in (states[1][2] or "")
        assert (await store.get_run(job.tenant_id, first.run.id)).state is RunState.RUNNING  # type: ignore[union-attr]

    async def test_a_claim_reports_the_runs_it_skipped(self, store: Store) -> None:
        # The count comes back with the claim itself (the worker's skip counter reads it),
        # whether or not the claim also took runs, and a skip is reported once.
        await _job(store, Overlap.SKIP, 0, 10, 20)
        first = await _claim(store, 0)
        assert len(first) == 1 and first.overlap_skipped == 0
        allowed = await _job(store, Overlap.ALLOW, 20)
        both = await _claim(store, 20)
        assert [c.run.job_id for c in both] == [allowed.id]
        assert both.overlap_skipped == 2
        again = await _claim(store, 20)
        assert again == [] and again.overlap_skipped == 0

    async def test_a_claim_that_skips_nothing_reports_none(self, store: Store) -> None:
        await _job(store, Overlap.SKIP, 0)
        assert (await _claim(store, 0)).overlap_skipped == 0
        assert (await _claim(store, 0)).overlap_skipped == 0

    async def test_skip_runs_normally_when_nothing_is_running(self, store: Store) -> None:
        job = await _job(store, Overlap.SKIP, 10)
        assert len(await _claim(store, 10)) == 1
        assert [s for _, s, _ in await _states(store, job)] == ["running"]

    async def test_queue_waits_for_the_running_run(self, store: Store) -> None:
        job = await _job(store, Overlap.QUEUE, 0, 10)
        [first] = await _claim(store, 0)
        assert await _claim(store, 10) == []
        assert [s for _, s, _ in await _states(store, job)] == ["running", "pending"]
        await store.rescue_expired(now=at(1000))  # the first run's lease ends: nothing runs now
        [again] = await _claim(store, 1000)
        assert again.run.scheduled_for == at(0)  # the queue keeps its order
        assert first.run.id == again.run.id

    async def test_replace_asks_the_running_run_to_cancel(self, store: Store) -> None:
        job = await _job(store, Overlap.REPLACE, 0, 10)
        [first] = await _claim(store, 0, worker="w1")
        [second] = await _claim(store, 10, worker="w2")
        assert second.run.scheduled_for == at(10)
        beat = await store.heartbeat(
            "w1", [(first.run.id, first.run.fence)], now=at(11), lease_seconds=60
        )
        assert beat.cancel_requested == [first.run.id]
        assert [s for _, s, _ in await _states(store, job)] == ["running", "running"]

    # -- a job whose action starts a pipeline (decision 0044) ----------------------------

    @pytest.mark.parametrize("ending", ["succeeded", "failed", "cancelled"])
    async def test_queue_waits_until_the_pipeline_run_its_trigger_started_ends(
        self, store: Store, ending: str
    ) -> None:
        """Nothing of the job is ``running`` once its trigger has succeeded and before its
        pipeline run's root task is claimed, nor between one task and the next: the next
        occurrence still waits, until the pipeline run ends, however it ends."""
        job, pipeline = await _pipeline_job(store, Overlap.QUEUE, 0, 10)
        first = await _trigger(store, job, pipeline, 0)
        assert await _claim(store, 10) == []  # the trigger is done, task a not yet claimed
        # Status counts it as held by its job (decision 0042), not as late.
        pools = {p.pool: p for p in await store.pool_status(None, now=at(10), since=at(0))}
        assert (pools["default"].due, pools["default"].held_by_overlap) == (1, 1)
        [a] = await _claim_tasks(store, 10)
        if ending == "cancelled":
            await store.cancel_pipeline_run("default", first.id, now=at(11), actor="t")
            assert await _claim(store, 11) == []  # a was asked to stop: it has not yet
            await store.complete_runs([_ended(a, 12, RunState.CANCELLED)])
        elif ending == "failed":
            await store.complete_runs([_ended(a, 12, RunState.DEAD)])
        else:
            await store.complete_runs([_ended(a, 11, RunState.SUCCEEDED)])
            assert await _claim(store, 11) == []  # between a and b: still the pipeline's
            [b] = await _claim_tasks(store, 11)
            assert b.run.task == "b"
            await store.complete_runs([_ended(b, 12, RunState.SUCCEEDED)])
        assert (await _pipeline_run(store, first.id)).state == ending
        [second] = await _claim(store, 12)
        assert second.run.scheduled_for == at(10)

    async def test_queue_waits_for_a_dead_task_until_maintenance_ends_its_pipeline_run(
        self, store: Store
    ) -> None:
        """A task whose worker vanished on its last attempt is dead, but its pipeline run
        ends (or starts a cleanup task) only at maintenance's next pass: until then the
        pipeline run is unfinished, and its job busy."""
        job, pipeline = await _pipeline_job(store, Overlap.QUEUE, 0, 10)
        first = await _trigger(store, job, pipeline, 0)
        await _claim_tasks(store, 10)
        await store.rescue_expired(now=at(100))  # a's lease: 60 s, its only attempt
        assert (await _pipeline_run(store, first.id)).state == "running"
        assert await _claim(store, 100) == []
        assert await store.advance_pipelines(now=at(101)) == 1
        assert (await _pipeline_run(store, first.id)).state == "failed"
        [second] = await _claim(store, 101)
        assert second.run.scheduled_for == at(10)

    async def test_skip_skips_what_falls_due_while_the_pipeline_run_is_unfinished(
        self, store: Store
    ) -> None:
        job, pipeline = await _pipeline_job(store, Overlap.SKIP, 0, 10, 20)
        first = await _trigger(store, job, pipeline, 0)
        claim = await _claim(store, 10)
        assert claim == [] and claim.overlap_skipped == 1
        [a] = await _claim_tasks(store, 10)
        await store.complete_runs([_ended(a, 11, RunState.SUCCEEDED)])
        [b] = await _claim_tasks(store, 11)
        await store.complete_runs([_ended(b, 12, RunState.SUCCEEDED)])
        assert (await _pipeline_run(store, first.id)).state == "succeeded"
        [third] = await _claim(store, 20)
        assert third.run.scheduled_for == at(20)
        triggers = [(t, s) for t, s, _ in await _states(store, job) if t in (0, 10, 20)]
        assert triggers == [(0, "succeeded"), (10, "skipped"), (20, "running")]

    async def test_a_claim_smaller_than_the_heads_takes_them_in_turn_order(
        self, store: Store
    ) -> None:
        """Heads of many jobs under ``queue``, more than the claim's limit: the claim
        takes the first free ones in effective priority (aged a level per period), then
        due order, passing over a busy job's head and a lower one left behind."""
        jobs = [make_job(overlap=Overlap.QUEUE) for _ in range(8)]
        await store.create_jobs(jobs)
        # (priority, due): one low run aged a period (100 s) to normal, the others not.
        plan = [
            (Priority.LOW, -150),  # effective NORMAL, the oldest normal: third
            (Priority.LOW, -20),  # stays LOW: not taken
            (Priority.NORMAL, -30),  # fourth, but its job is busy
            (Priority.NORMAL, -10),  # fifth: taken in the busy one's place
            (Priority.HIGH, -5),  # second
            (Priority.CRITICAL, -1),  # first
            (Priority.NORMAL, -5),  # sixth: past the limit
            (Priority.LOW, -50),  # LOW: not taken
        ]
        await store.materialize_runs(
            [
                make_run(j, at(t), overlap=Overlap.QUEUE, priority=p)
                for j, (p, t) in zip(jobs, plan, strict=True)
            ],
            [],
        )
        busy_job = jobs[2]
        await store.materialize_runs([make_run(busy_job, at(-400), overlap=Overlap.QUEUE)], [])
        [running] = await store.claim_runs(
            "w", ["default"], limit=1, now=at(-399), prefetch_until=at(-399), lease_seconds=600
        )
        assert running.run.job_id == busy_job.id
        claim = await store.claim_runs(
            "w",
            ["default"],
            limit=4,
            now=at(0),
            prefetch_until=at(0),
            lease_seconds=60,
            priority_aging_seconds=100,
        )
        assert [c.run.job_id for c in claim] == [jobs[5].id, jobs[4].id, jobs[0].id, jobs[3].id]

    @pytest.mark.parametrize("policy", [Overlap.QUEUE, Overlap.SKIP, Overlap.REPLACE])
    @pytest.mark.parametrize("situation", list(_SITUATIONS))
    async def test_the_claim_does_what_the_overlap_rule_says(
        self, store: Store, policy: Overlap, situation: str
    ) -> None:
        """Every policy against every way its pipeline run keeps a job busy or not, on
        each store, as :func:`cronwheel.core.overlap.verdict` decides."""
        job, pipeline = await _pipeline_job(store, policy, 0, 10)
        head, now, unfinished = await _SITUATIONS[situation](store, job, pipeline)
        held = busy(running_runs=0, unfinished_pipeline_runs=unfinished)
        expected = verdict(policy, job_busy=held)
        claim = await _claim(store, now)
        [run] = [
            r
            for r in await store.list_runs("default", job_id=job.id)
            if r.scheduled_for == at(head)
        ]
        if expected is Verdict.WAIT:
            assert (claim, run.state) == ([], RunState.PENDING)
        elif expected is Verdict.SKIP:
            assert (claim, run.state, claim.overlap_skipped) == ([], RunState.SKIPPED, 1)
        else:
            assert [c.run.id for c in claim] == [run.id]
        if expected is Verdict.DISPLACE:
            # Once it starts its own pipeline run, the one it displaces is cancelled: that
            # one's task a was pending, so it ends at once.
            [first] = [
                p for p in await store.list_pipeline_runs("default") if p.trigger_run_id != run.id
            ]
            await _start(store, job, pipeline, claim[0], now)
            assert (await _pipeline_run(store, first.id)).state == "cancelled"
