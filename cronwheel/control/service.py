"""Every user action on jobs and runs, validated, on top of the store.

The Python API (:func:`cronwheel.connect`), the HTTP API and the CLI all go through
:class:`JobService`, so the rules live in one place: how a job is created, what pause,
resume, cancel, trigger and update do to its runs, and what each writes to the audit log.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from cronwheel.control.brokers import broker_problems
from cronwheel.control.commands import check_commands
from cronwheel.core.clock import Clock, SystemClock
from cronwheel.core.jobspec import JobSpec, build_jobs, check_can_follow, encode_payload, spec_of
from cronwheel.core.lifecycle import replay_budget
from cronwheel.core.model import (
    DEFAULT_TENANT,
    JSON,
    REASON_BACKFILL,
    REASON_PAUSED,
    Attempt,
    Job,
    JobState,
    NewRun,
    Priority,
    Run,
    RunState,
    run_key,
)
from cronwheel.core.planning import max_attempts
from cronwheel.errors import Conflict, InvalidInput, InvalidItems, NotFound, StaleVersion
from cronwheel.observability import metrics, tracing
from cronwheel.schedule import ManualSchedule, first_fire, next_fire, schedule_from_dict
from cronwheel.schedule.words import ordinal
from cronwheel.security.sealing import (
    Sealer,
    file_sealer,
    keep_masked,
    keep_masked_notify,
    refuse_sealed,
    seal_action,
    seal_notify,
)
from cronwheel.store import open_store
from cronwheel.store.base import JOBS_TOPIC, Store

if TYPE_CHECKING:  # the policy's module imports httpcore, which a CLI call does not need
    from cronwheel.control.pipelines import PipelineService
    from cronwheel.security.egress import EgressPolicy

MAX_BACKFILL_RUNS = 10_000
"""The most occurrences one backfill creates: a longer range is refused (backfill it in
parts), so one request cannot write an unbounded number of runs."""

BACKFILL_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest instant a backfill may start at."""

MAX_PAUSED_RECORDS = 1000
"""How many occurrences a resume records as ``skipped (paused)``; a longer pause records
the most recent ones."""
PAUSED_LOOKBACK = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Backfill:
    """What :meth:`JobService.backfill` did: ``occurrences`` of the schedule lay in the
    range, ``created`` of them had no run yet and got one (the others kept theirs)."""

    occurrences: int
    created: int
    first: datetime | None
    last: datetime | None


class JobService:
    """The application's verbs. ``actor`` names who acts, for the audit log."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        actor: str = "python",
        egress: EgressPolicy | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.actor = actor
        self.egress = egress
        """Webhook URLs refused at creation (the HTTP API passes its policy); None: no
        check here, the trusted Python caller's own jobs (the worker checks anyway)."""
        self.sealer = sealer if sealer is not None else Sealer.from_env()
        """Seals secret webhook headers before they are stored (cronwheel.security.sealing);
        None (no key given, none in CRONWHEEL_SECRETS_KEY): secret headers are refused."""

    def _sealed(self, jobs: list[Job]) -> list[Job]:
        """``jobs`` with their secret headers sealed; a batch shares its few distinct
        actions (cronwheel.core.jobspec.build_jobs), so each is sealed once."""
        done: dict[int, Any] = {}
        out = []
        for job in jobs:
            action = done.get(id(job.action))
            if action is None:
                action = done[id(job.action)] = seal_action(job.action, job.tenant_id, self.sealer)
            notify = seal_notify(job.notify, job.tenant_id, self.sealer) if job.notify else ()
            if action is not job.action or notify != tuple(job.notify):
                job = replace(job, action=action, notify=notify)
            out.append(job)
        return out

    def _check_urls(self, jobs: list[Job]) -> None:
        """InvalidInput naming ``action.url`` (``notify.N.url``) for a webhook (a
        notification target) the egress policy refuses."""
        if self.egress is None:
            return
        for job in jobs:
            if job.action.get("type") == "webhook":
                why = self.egress.url_refusal(str(job.action.get("url")))
                if why is not None:
                    raise InvalidInput("action.url", why)
            for j, target in enumerate(job.notify):
                why = self.egress.url_refusal(str(target.get("url")))
                if why is not None:
                    raise InvalidInput(f"notify.{j}.url", why)

    async def _check_commands(self, jobs: list[Job]) -> None:
        """InvalidInput naming ``action.argv`` for a command job whose pool's live
        workers would none run it (cronwheel.control.commands)."""
        uses = {
            (j.tenant_id, j.pool, str(j.action.get("argv"))): j
            for j in jobs
            if j.action.get("type") == "command"
        }
        await check_commands(
            self.store,
            self.clock.now(),
            (("action", j.tenant_id, j.pool, j.action) for j in uses.values()),
        )

    async def _check_pipelines(self, jobs: list[Job]) -> None:
        """InvalidInput naming ``action.pipeline_id`` for a job that would start a
        pipeline its tenant does not have (or deleted)."""
        for job in jobs:
            if job.action.get("type") == "pipeline":
                pipeline_id = str(job.action.get("pipeline_id"))
                found = await self.store.get_pipeline(job.tenant_id, pipeline_id)
                if found is None or found.state.value == "deleted":
                    raise InvalidInput(
                        "action.pipeline_id", f"names no pipeline of this tenant: {pipeline_id}"
                    )

    async def _check_brokers(self, jobs: list[Job]) -> None:
        """InvalidItems naming ``action.broker`` for each publish job whose broker no live
        worker of its pool names, and ``action.to`` for a target that broker's kind cannot
        take. A pool with no live worker at all is not checked: its jobs wait for the
        workers to come, as any job's do (decision 0049, cronwheel.control.brokers)."""
        uses = [("action", j.tenant_id, j.pool, j.action) for j in jobs]
        problems = await broker_problems(self.store, self.clock.now(), uses)
        if problems:
            raise InvalidItems(problems)

    @property
    def pipelines(self) -> PipelineService:
        """Pipelines on the same store (decision 0025): define them, start and follow
        their runs: ``await cw.pipelines.start(pipeline.id)``."""
        from cronwheel.control.pipelines import PipelineService

        return PipelineService(
            self.store, clock=self.clock, actor=self.actor, egress=self.egress, sealer=self.sealer
        )

    async def close(self) -> None:
        await self.store.close()

    async def __aenter__(self) -> JobService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- jobs --------------------------------------------------------------------------
    async def create(self, tenant_id: str = DEFAULT_TENANT, **spec: Any) -> Job:
        """Create a job from its spec (see :class:`~cronwheel.core.jobspec.JobSpec`)."""
        [job] = await self.create_many([spec], tenant_id=tenant_id)
        return job

    async def create_many(
        self,
        specs: Sequence[Mapping[str, Any] | JobSpec],
        *,
        tenant_id: str = DEFAULT_TENANT,
        traceparent: str | None = None,
    ) -> list[Job]:
        """Create jobs all or nothing; an immediate job's run is inserted with it.
        ``traceparent``: the creating request's, which each attempt's span links to;
        by default the caller's current span's, if any (docs/observability.md#traces)."""
        return await self.create_planned(
            self.plan_new(specs, tenant_id=tenant_id), traceparent=traceparent
        )

    def plan_new(
        self, specs: Sequence[Mapping[str, Any] | JobSpec], *, tenant_id: str = DEFAULT_TENANT
    ) -> list[Job]:
        """The jobs ``specs`` describe, validated and planned once, nothing stored: the
        first half of :meth:`create_many`, for a caller with something to do between the
        two (the API charges the tenant's quota there). Raises :class:`InvalidItems`
        naming every refused item: a spec that does not validate or has no occurrence
        left, a sealed value sent in, a webhook or notification URL the egress policy
        refuses, a name given twice in the batch."""
        now = self.clock.now()
        problems: list[tuple[int, str, str]] = []
        jobs = self._built(specs, tenant_id, now, problems)
        first_with: dict[str, int] = {}
        for i, job in enumerate(jobs):
            if job is None:
                continue
            problems += [(i, field, why) for field, why in self._refusals(job)]
            if job.name in first_with:
                reason = f"is also the name of item {first_with[job.name]} of this batch"
                problems.append((i, "name", reason))
            first_with.setdefault(job.name, i)
        if problems:
            raise InvalidItems(problems)
        return [j for j in jobs if j is not None]

    def _built(
        self,
        specs: Sequence[Mapping[str, Any] | JobSpec],
        tenant_id: str,
        now: datetime,
        problems: list[tuple[int, str, str]],
    ) -> list[Job | None]:
        """Each spec's job, or None with its problem recorded. A batch of plain mappings
        takes build_jobs' shortcut (distinct values validated once); only when that
        refuses one is the batch walked spec by spec, to name every bad item."""
        if specs and not any(isinstance(s, JobSpec) for s in specs):
            try:
                return list(build_jobs(specs, tenant_id=tenant_id, now=now))
            except (InvalidInput, ArithmeticError):
                pass
        built: list[Job | None] = []
        for i, spec in enumerate(specs):
            try:
                parsed = spec if isinstance(spec, JobSpec) else JobSpec.parse(dict(spec))
                built.append(parsed.to_job(tenant_id=tenant_id, now=now))
            except InvalidInput as exc:
                problems.append((i, exc.field, exc.reason))
                built.append(None)
            except ArithmeticError:  # an occurrence past year 9999, an interval of 1 ns…
                problems.append((i, "schedule", "its occurrences are out of range"))
                built.append(None)
        return built

    def _refusals(self, job: Job) -> list[tuple[str, str]]:
        """(field, reason) for each value of a new job cronwheel refuses once it is built:
        a sealed value a user sent, a URL the egress policy refuses."""
        found: list[tuple[str, str]] = []
        # A notification target's headers are its own to set (it is never sealed but for
        # its URL's password): only the action's headers are checked for sealed values.
        targets = [("action", job.action)] + [
            (f"notify.{j}", target) for j, target in enumerate(job.notify)
        ]
        for field, target in targets:
            try:
                refuse_sealed(target if field == "action" else {"url": target.get("url")}, field)
            except InvalidInput as exc:
                found.append((exc.field, exc.reason))
            if self.egress is not None and (field != "action" or target.get("type") == "webhook"):
                why = self.egress.url_refusal(str(target.get("url")))
                if why is not None:
                    found.append((f"{field}.url", why))
        return found

    async def create_planned(self, jobs: list[Job], *, traceparent: str | None = None) -> list[Job]:
        """Store jobs :meth:`plan_new` made, all or nothing (the second half of
        :meth:`create_many`)."""
        await self._check_pipelines(jobs)
        await self._check_brokers(jobs)
        await self._check_commands(jobs)
        jobs = self._sealed(jobs)
        if traceparent is None:
            traceparent = tracing.current_headers().get("traceparent")
        if traceparent is not None:
            jobs = [replace(j, traceparent=traceparent) for j in jobs]
        # An immediate job's run is due when the job was planned (its created_at).
        runs = [_immediate_run(j, j.created_at) for j in jobs if j.schedule["kind"] == "immediate"]
        await self.store.create_jobs(jobs, runs, actor=self.actor)
        await self.store.notify(JOBS_TOPIC)
        return jobs

    async def get(self, job_id: str, *, tenant_id: str = DEFAULT_TENANT) -> Job:
        """The job, with its ``last_run``: how its newest finished run ended."""
        job = await self.store.get_job(tenant_id, job_id)
        if job is None:
            raise NotFound("job", job_id)
        return await self._with_last_run(job)

    async def _with_last_run(self, job: Job) -> Job:
        last = await self.store.last_runs(job.tenant_id, [job.id])
        return replace(job, last_run=last.get(job.id))

    async def list_jobs(self, *, tenant_id: str = DEFAULT_TENANT, **filters: Any) -> list[Job]:
        """Jobs in creation order, or in ``order`` from the position ``after`` (see
        :meth:`Store.list_jobs` for the filters), each with its ``last_run``, looked up
        in one query for the page."""
        jobs = await self.store.list_jobs(tenant_id, **filters)
        last = await self.store.last_runs(tenant_id, [j.id for j in jobs])
        return [replace(j, last_run=last.get(j.id)) for j in jobs]

    async def update(
        self,
        job_id: str,
        *,
        expected_version: int | None = None,
        tenant_id: str = DEFAULT_TENANT,
        **changes: Any,
    ) -> Job:
        """Change a job's definition; its version bumps. If its schedule changed, the
        next fire time is computed again from now. Changes that change nothing (every
        value as it is) return the job as it is, at the same version."""
        current = await self.get(job_id, tenant_id=tenant_id)
        expected = current.version if expected_version is None else expected_version
        now = self.clock.now()
        if isinstance(changes.get("action"), dict):
            refuse_sealed(changes["action"])
            # A secret header sent back as read (***) keeps its stored value, for the
            # same destination only (else 422: send it again).
            changes = {**changes, "action": keep_masked(changes["action"], current.action)}
        if isinstance(changes.get("notify"), list):
            for j, target in enumerate(changes["notify"]):
                if isinstance(target, dict):
                    refuse_sealed({"url": target.get("url")}, f"notify.{j}")
            changes = {**changes, "notify": keep_masked_notify(changes["notify"], current.notify)}
        # Checked below only if the schedule changes: editing the name of a job whose
        # end_at has passed is fine, giving it a schedule that never fires is not.
        fresh = JobSpec.parse(spec_of(current) | changes).to_job(
            tenant_id=tenant_id, now=now, job_id=job_id, must_fire=False
        )
        if "action" in changes or "pool" in changes:
            await self._check_commands([fresh])
        if "action" in changes or "notify" in changes:
            self._check_urls([fresh])
            await self._check_pipelines([fresh])
            [fresh] = self._sealed([fresh])
        if "action" in changes or "pool" in changes:  # a pool whose workers lack the broker
            await self._check_brokers([fresh])
        updated = replace(
            fresh,
            created_at=current.created_at,
            state=current.state,
            last_fire_at=current.last_fire_at,
        )
        replan = fresh.schedule != current.schedule
        if replan:
            check_can_follow(fresh.schedule, now)
        if not replan:
            updated = replace(updated, next_fire_at=current.next_fire_at)
        unchanged = replace(
            updated, version=current.version, updated_at=current.updated_at, last_run=None
        ) == replace(current, last_run=None)
        if unchanged and expected == current.version:
            return current  # nothing to change: no version bump, no audit row
        job = await self.store.update_job(
            updated, expected_version=expected, actor=self.actor, replan=replan
        )
        await self.store.notify(JOBS_TOPIC)
        # Looked up again: a replan cancels the runs the old schedule planned.
        return await self._with_last_run(job)

    async def pause(self, job_id: str, *, tenant_id: str = DEFAULT_TENANT) -> Job:
        """No new runs until resumed; runs already pending stay pending. Pausing a paused
        job changes nothing (no version bump) and returns it as it is."""
        job = await self.get(job_id, tenant_id=tenant_id)
        if job.state is JobState.PAUSED:
            return job
        return await self._set_state(job, JobState.PAUSED, job.next_fire_at)

    async def resume(
        self, job_id: str, *, catch_up: bool = False, tenant_id: str = DEFAULT_TENANT
    ) -> Job:
        """Resume from now: occurrences the pause covered are recorded as skipped
        (``paused``). With ``catch_up``, they are handed to the job's misfire policy
        instead, as if the scheduler had been down. Resuming an active job changes
        nothing and returns it as it is; a completed or cancelled one: Conflict."""
        job = await self.get(job_id, tenant_id=tenant_id)
        if job.state is JobState.ACTIVE:
            return job
        if job.state is not JobState.PAUSED:
            raise Conflict("state", f"the job is {job.state.value}, not paused")
        if catch_up or job.next_fire_at is None:
            return await self._set_state(job, JobState.ACTIVE, job.next_fire_at)
        now = self.clock.now()
        missed = _occurrences_between(job, job.next_fire_at, now)
        skipped = [_paused_run(job, t) for t in missed[-MAX_PAUSED_RECORDS:]]
        schedule = schedule_from_dict(job.schedule)
        following = first_fire(schedule, now) if missed else job.next_fire_at
        recorded = await self._paused_skips(job, len(skipped))
        resumed = await self._set_state(job, JobState.ACTIVE, following, runs=skipped)
        added = await self._paused_skips(job, len(skipped)) - recorded
        metrics.default().runs_skipped(REASON_PAUSED, len(added))
        return resumed

    async def _paused_skips(self, job: Job, limit: int) -> set[int]:
        """The job's newest skipped runs: read before and after a resume, the runs it
        recorded. An occurrence that already had a run (a tick that raced the pause)
        gets no second one, so counting the occurrences would overstate the skips."""
        if limit == 0:
            return set()
        runs = await self.store.list_runs(
            job.tenant_id, job_id=job.id, state=RunState.SKIPPED, limit=limit
        )
        return {r.id for r in runs}

    async def cancel(self, job_id: str, *, tenant_id: str = DEFAULT_TENANT) -> Job:
        """Soft delete: no new runs, pending runs cancelled, the job kept for audit.
        Cancelling a cancelled job changes nothing and returns it as it is."""
        job = await self.get(job_id, tenant_id=tenant_id)
        if job.state is JobState.CANCELLED:
            return job
        return await self._set_state(job, JobState.CANCELLED, None)

    async def trigger(self, job_id: str, *, tenant_id: str = DEFAULT_TENANT) -> Run:
        """A manual run, now, besides the schedule."""
        job = await self.get(job_id, tenant_id=tenant_id)
        if job.state is not JobState.ACTIVE:
            raise Conflict(
                "state", f"the job is {job.state.value}; only an active job can be triggered"
            )
        now = self.clock.now()
        run = replace(_immediate_run(job, now), reason=f"triggered by {self.actor}")
        # A manual job's runs take their instants as enqueued ones do.
        if job.schedule["kind"] == ManualSchedule.kind:
            [run_id] = await self.store.enqueue_runs(run, [None])
            triggered = await self.store.get_run(tenant_id, run_id)
            assert triggered is not None  # runs are deleted only once finished, by age
            return triggered
        written = await self.store.materialize_runs([run], [])
        if not written.inserted:
            raise Conflict("state", "the job changed while it was being triggered; try again")
        [found] = await self.store.list_runs(tenant_id, job_id=job_id, limit=1)
        return found

    async def backfill(
        self,
        job_id: str,
        *,
        start: datetime,
        end: datetime,
        priority: Priority = Priority.LOW,
        tenant_id: str = DEFAULT_TENANT,
        admit: Callable[[int], Awaitable[None]] | None = None,
    ) -> Backfill:
        """A run now for every occurrence of the job's schedule in ``[start, end)`` that
        has none yet (a run is keyed by its occurrence, so backfilling a range twice
        creates its runs once, and an occurrence the scheduler fired or skipped keeps
        that run). The runs are due now at ``priority`` (low by default: a backfill must
        not starve live work) under the job's other policies. ``end`` may not be in the
        future (what is ahead is the scheduler's), and a range of more than
        :data:`MAX_BACKFILL_RUNS` occurrences is refused. The job must be active and
        have a recurring schedule (cron or interval). ``admit`` is handed the number of
        occurrences before anything is written (the API's rate quota): it may refuse."""
        for field_name, value in (("start", start), ("end", end)):
            if value.tzinfo is None:
                raise InvalidInput(field_name, "give a UTC offset (e.g. 2026-01-01T00:00:00Z)")
        if start < BACKFILL_EPOCH:
            raise InvalidInput("start", f"must be {BACKFILL_EPOCH.isoformat()} or later")
        now = self.clock.now()
        if end <= start:
            raise InvalidInput("end", f"must be after start ({start.isoformat()})")
        if end > now:
            raise InvalidInput(
                "end",
                f"is in the future (now is {now.isoformat()}): a backfill covers occurrences"
                " already past; the scheduler fires the ones ahead",
            )
        job = await self.get(job_id, tenant_id=tenant_id)
        if job.state is not JobState.ACTIVE:
            raise Conflict(
                "state", f"the job is {job.state.value}; only an active job can be backfilled"
            )
        if job.schedule["kind"] not in ("cron", "interval"):
            raise Conflict(
                "schedule",
                f"a {job.schedule['kind']} job has no series of occurrences to backfill;"
                " trigger it instead",
            )
        schedule = schedule_from_dict(job.schedule)
        occurrences: list[datetime] = []
        t = next_fire(schedule, start - timedelta(microseconds=1))
        while t is not None and t < end:
            if len(occurrences) == MAX_BACKFILL_RUNS:
                raise InvalidInput(
                    "end",
                    f"the range holds more than {MAX_BACKFILL_RUNS:,} occurrences (the"
                    f" {ordinal(MAX_BACKFILL_RUNS + 1)} is {t.isoformat()}): backfill it in parts",
                )
            occurrences.append(t)
            t = next_fire(schedule, t)
        template = replace(
            _immediate_run(job, now), priority=priority, reason=f"{REASON_BACKFILL} by {self.actor}"
        )
        runs = [replace(template, scheduled_for=t) for t in occurrences]
        if admit is not None:
            await admit(len(runs))
        # Insert-if-absent by (job, occurrence): the key the scheduler writes runs under.
        written = await self.store.materialize_runs(runs, []) if runs else None
        return Backfill(
            occurrences=len(occurrences),
            created=written.inserted if written is not None else 0,
            first=occurrences[0] if occurrences else None,
            last=occurrences[-1] if occurrences else None,
        )

    async def enqueue(
        self, job_id: str, payloads: Sequence[JSON], *, tenant_id: str = DEFAULT_TENANT
    ) -> list[int]:
        """Runs of a manual job (schedule ``{"kind": "manual"}``), one per payload, due
        now, all or nothing; their ids, in order. A run's payload stands in for the
        job's (None: the job's). The job must be active; runs wait in the pool's queue
        like any other, under the job's action, priority and retry policy."""
        encoded = [encode_payload(f"payloads[{i}]", p) for i, p in enumerate(payloads)]
        job = await self.get(job_id, tenant_id=tenant_id)
        kind = job.schedule["kind"]
        if kind != ManualSchedule.kind:
            raise Conflict(
                "schedule",
                f"the job's schedule is {kind}; runs are enqueued only to a job whose schedule"
                ' is {"kind": "manual"} (trigger runs any active job once, now)',
            )
        now = self.clock.now()
        template = replace(_immediate_run(job, now), reason=f"enqueued by {self.actor}")
        # Each run's key is rendered from its own payload, else from the job's.
        keys = (
            None
            if job.concurrency is None
            else [job.concurrency.render(job.payload if p is None else p) for p in payloads]
        )
        try:
            return await self.store.enqueue_runs(template, encoded, keys)
        except StaleVersion:
            # The job changed between our read and the store's lock: the caller named no
            # version, so this is a race to retry, not a stale edit of theirs.
            raise Conflict(
                "state",
                "the job changed while runs were being enqueued to it; nothing was enqueued:"
                " send the request again",
            ) from None

    async def _set_state(
        self,
        job: Job,
        state: JobState,
        next_fire_at: datetime | None,
        runs: list[NewRun] | None = None,
    ) -> Job:
        updated = await self.store.set_job_state(
            job.tenant_id,
            job.id,
            state,
            next_fire_at=next_fire_at,
            now=self.clock.now(),
            actor=self.actor,
            runs=runs or [],
        )
        await self.store.notify(JOBS_TOPIC)
        # Looked up again: a cancel cancels pending runs, a resume records skipped ones.
        return await self._with_last_run(updated)

    # -- runs ----------------------------------------------------------------------------
    async def runs(
        self, job_id: str, *, tenant_id: str = DEFAULT_TENANT, **filters: Any
    ) -> list[Run]:
        await self.get(job_id, tenant_id=tenant_id)
        return await self.store.list_runs(tenant_id, job_id=job_id, **filters)

    async def run(self, run_id: int, *, tenant_id: str = DEFAULT_TENANT) -> Run:
        run = await self.store.get_run(tenant_id, run_id)
        if run is None:
            raise NotFound("run", run_id)
        return run

    async def attempts(self, run_id: int, *, tenant_id: str = DEFAULT_TENANT) -> list[Attempt]:
        await self.run(run_id, tenant_id=tenant_id)
        return await self.store.list_attempts(tenant_id, run_id)

    async def cancel_run(self, run_id: int, *, tenant_id: str = DEFAULT_TENANT) -> Run:
        """Cancel a pending run, or ask a running one to stop. Idempotent: a finished run,
        or one already asked to stop, is returned as it is."""
        return await self.store.cancel_run(
            tenant_id, run_id, now=self.clock.now(), actor=self.actor
        )

    async def dead_letter(self, *, tenant_id: str = DEFAULT_TENANT, **filters: Any) -> list[Run]:
        return await self.store.list_runs(tenant_id, state=RunState.DEAD, **filters)

    async def replay(self, run_ids: list[int], *, tenant_id: str = DEFAULT_TENANT) -> list[int]:
        """Dead runs back to pending with a fresh budget: their own (a pipeline task's is
        its task's, see :func:`cronwheel.core.lifecycle.replay_budget`)."""
        jobs: dict[str, Job] = {}
        replayed: list[int] = []
        for run_id in run_ids:
            run = await self.store.get_run(tenant_id, run_id)
            if run is None or run.state is not RunState.DEAD:
                continue
            if run.job_id not in jobs:
                jobs[run.job_id] = await self.get(run.job_id, tenant_id=tenant_id)
            job = jobs[run.job_id]
            replayed += await self.store.replay_runs(
                tenant_id,
                [run_id],
                extra_attempts=replay_budget(run, job.retry, job.delivery),
                now=self.clock.now(),
                actor=self.actor,
            )
        return replayed


async def connect(
    url: str, *, clock: Clock | None = None, actor: str = "python", migrate: bool = True
) -> JobService:
    """Open the store at ``url`` (``sqlite:///file.db`` or ``postgresql://…``) and return
    the service to drive it: ``async with await cronwheel.connect(url) as cw: ...``.
    Secret webhook headers are sealed with CRONWHEEL_SECRETS_KEY, or on an SQLite file
    without it, with the key ``cronwheel dev`` keeps beside the file, if there is one."""
    store = await open_store(url)
    if migrate:
        await store.migrate()
    sealer = Sealer.from_env()
    path = getattr(store, "path", None)
    if sealer is None and isinstance(path, str) and path != ":memory:":
        sealer = file_sealer(path)
    return JobService(store, clock=clock, actor=actor, sealer=sealer)


def _immediate_run(job: Job, now: datetime) -> NewRun:
    key, limit = run_key(job, job.payload)
    return NewRun(
        tenant_id=job.tenant_id,
        job_id=job.id,
        scheduled_for=now,
        available_at=now,
        pool=job.pool,
        priority=job.priority,
        max_attempts=max_attempts(job),
        job_version=job.version,
        overlap=job.overlap,
        concurrency_key=key,
        concurrency_limit=limit,
    )


def _paused_run(job: Job, scheduled_for: datetime) -> NewRun:
    return replace(_immediate_run(job, scheduled_for), state=RunState.SKIPPED, reason=REASON_PAUSED)


def _occurrences_between(job: Job, first: datetime, now: datetime) -> list[datetime]:
    """The newest occurrences in ``[first, now)``, looking back at most a day: a resume
    after a long pause stays cheap, and the history shows why the last ones did not run."""
    schedule = schedule_from_dict(job.schedule)
    start = max(first, now - PAUSED_LOOKBACK)
    t = start if start == first else next_fire(schedule, start)
    found: list[datetime] = []
    while t is not None and t < now:
        found.append(t)
        if len(found) > 2 * MAX_PAUSED_RECORDS:
            del found[:-MAX_PAUSED_RECORDS]
        t = next_fire(schedule, t)
    return found
