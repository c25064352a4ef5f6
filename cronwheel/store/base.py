"""The store: cronwheel's single source of truth, behind one interface.

The engine (scheduler, workers, maintenance, API) talks only to :class:`Store`; the
SQLite and PostgreSQL implementations own their SQL and migrations. The methods are the
lifecycle's verbs, not CRUD: a new backend is correct when it passes the conformance
suite in ``tests/store/``.

Rules every implementation keeps:

* Time is a parameter. Methods that compare with "now" take ``now`` from the caller
  (the engine's clock, corrected to the store's clock), so tests can freeze it.
* Hot paths (:meth:`Store.materialize_runs`, :meth:`Store.claim_runs`,
  :meth:`Store.heartbeat`, :meth:`Store.complete_runs`) take or return many runs and
  cost one round trip for all of them.
* Worker writes are fenced: they change a run only ``WHERE id = ? AND fence = ?`` and
  while it is still ``running``; a worker whose lease was taken over changes nothing.
* Every read and control verb is scoped to a tenant: another tenant's id is simply
  not found.
* Whenever a store makes runs pending (create, materialise, retry, rescue, replay) it
  notifies ``runs:<pool>`` itself, in the same transaction where the backend allows it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from cronwheel.core.model import (
    JSON,
    ApiKey,
    Attempt,
    AuditEntry,
    Job,
    JobKey,
    JobOrder,
    JobState,
    LastOutcome,
    LastRun,
    NewRun,
    Notification,
    NotificationState,
    Run,
    RunState,
    ShardGuard,
    ShardLease,
    StoredResponse,
    Tenant,
    WorkerInfo,
)
from cronwheel.core.pipelines.model import Pipeline, PipelineRun, PipelineRunStart, PipelineVersion
from cronwheel.core.records import (
    FAILED_OUTCOMES as FAILED_OUTCOMES,
)
from cronwheel.core.records import (
    FULL_RETRY_AFTER as FULL_RETRY_AFTER,
)
from cronwheel.core.records import (
    MAX_HISTORY_BUCKETS as MAX_HISTORY_BUCKETS,
)
from cronwheel.core.records import (
    Activity as Activity,
)
from cronwheel.core.records import (
    AttemptBucket as AttemptBucket,
)
from cronwheel.core.records import (
    Capabilities as Capabilities,
)
from cronwheel.core.records import (
    Claim as Claim,
)
from cronwheel.core.records import (
    Completion as Completion,
)
from cronwheel.core.records import (
    DeadRun as DeadRun,
)
from cronwheel.core.records import (
    GaugeReading as GaugeReading,
)
from cronwheel.core.records import (
    HeartbeatResult as HeartbeatResult,
)
from cronwheel.core.records import (
    JobAdvance as JobAdvance,
)
from cronwheel.core.records import (
    JobSecrets as JobSecrets,
)
from cronwheel.core.records import (
    MaterializeResult as MaterializeResult,
)
from cronwheel.core.records import (
    NotificationResult as NotificationResult,
)
from cronwheel.core.records import (
    PoolStatus as PoolStatus,
)
from cronwheel.core.records import (
    Release as Release,
)
from cronwheel.core.records import (
    ReleaseResult as ReleaseResult,
)
from cronwheel.core.records import (
    Replication as Replication,
)
from cronwheel.core.records import (
    RescueResult as RescueResult,
)
from cronwheel.core.records import (
    RunReport as RunReport,
)
from cronwheel.core.records import (
    Start as Start,
)
from cronwheel.core.records import (
    TokenTake as TokenTake,
)
from cronwheel.core.records import (
    Vacuum as Vacuum,
)
from cronwheel.core.records import (
    bucket_capacity as bucket_capacity,
)
from cronwheel.core.records import (
    max_jobs_refusal as max_jobs_refusal,
)
from cronwheel.errors import Conflict, StaleVersion

JOBS_TOPIC = "jobs"
"""The topic a change of jobs is notified on (:meth:`Store.notify`): schedulers wait on it
to read a new or changed job before their next tick."""

ENQUEUE_CHUNK = 5_000
"""Runs per statement of :meth:`Store.enqueue_runs` where a statement's size matters
(PostgreSQL: one ``unnest`` per chunk, all in one transaction)."""

PRIORITY_AGING_SECONDS = 60.0
"""How long a due run waits for its priority to rise one level in a claim (decision
0028): a ``low`` run under a steady stream of ``high`` ones is ahead of new ones after two
periods. Long enough that priorities still mean something in a backlog of minutes."""


def check_enqueue_target(state: str, version: int, template: NewRun) -> None:
    """What :meth:`Store.enqueue_runs` checks of the job it holds locked: raise if the
    runs must not be written."""
    if state != JobState.ACTIVE.value:
        raise Conflict("state", f"the job is {state}; only an active job takes new runs")
    if version != template.job_version:
        raise StaleVersion(template.job_version, version)


class Setup(Protocol):
    """What every user of a store starts and ends with: the schema, the store's clock,
    closing."""

    capabilities: Capabilities

    @abc.abstractmethod
    async def migrate(self, *, target: int | None = None) -> list[int]:
        """Bring the schema up to ``target`` (default: the latest) and return the
        migration numbers applied now. An empty database at the latest version gets the
        fresh-install schema in one step; otherwise each missing step runs in order."""

    @abc.abstractmethod
    async def schema_version(self) -> int:
        """The highest migration applied (0 for an empty database)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections. The store is unusable afterwards."""


class StoreClock(Protocol):
    """The store's clock: every process measures its own against it, so that a run's
    instant means the same to a scheduler and a worker on different machines."""

    @abc.abstractmethod
    async def now(self) -> datetime:
        """The store's own clock; nodes measure their offset to it."""


class Queue(Protocol):
    """The queue the engine runs on: due jobs become runs (materialise, enqueue),
    workers claim, heartbeat, start and complete them or give them back (release), lost
    ones are rescued, and wake-ups tell the other side that something is ready."""

    @abc.abstractmethod
    async def fetch_due_jobs(
        self,
        until: datetime,
        *,
        limit: int,
        shards: Sequence[int] | None = None,
        shard_count: int = 1,
    ) -> list[Job]:
        """Active jobs with ``next_fire_at <= until``, fair across tenants: each
        tenant's earliest job, then each tenant's second, and so on (earliest first
        within a turn), so one tenant's backlog never fills a batch alone. With
        ``shards``, only jobs whose ``shard_key % shard_count`` is one of them."""

    @abc.abstractmethod
    async def count_due_jobs(
        self,
        until: datetime,
        *,
        limit: int,
        shards: Sequence[int] | None = None,
        shard_count: int = 1,
    ) -> int:
        """How many active jobs have ``next_fire_at <= until`` (with ``shards``, of those
        shards), counting no further than ``limit``: the scheduler asks how big the herd
        ahead is, and past ``limit`` the answer changes nothing."""

    @abc.abstractmethod
    async def materialize_runs(
        self,
        runs: Sequence[NewRun],
        advances: Sequence[JobAdvance],
        *,
        guard: ShardGuard | None = None,
    ) -> MaterializeResult:
        """In one transaction: advance the jobs and insert their runs if absent. The runs
        of a job whose advance does not apply (stale version, ``next_fire_at`` no longer
        the advance's ``expected_next_fire_at``, no longer active) are dropped, and the job
        is reported stale. With ``guard``, so are the runs and advances of jobs whose shard
        (``shard_key % shard_count``) the guard's holder no longer leases under the
        guard's epoch, or whose lease has expired by the store's clock (reported as
        stale); a takeover waits for a guarded write in progress to commit."""

    @abc.abstractmethod
    async def enqueue_runs(
        self,
        template: NewRun,
        payloads: Sequence[str | None],
        keys: Sequence[str | None] | None = None,
    ) -> list[int]:
        """Insert one pending run of ``template``'s job per payload, all or nothing, and
        return their ids in payload order; notify the pool.

        The job is locked while they are written, so a pause or an update waits for them
        or they for it: it must still be active and at ``template.job_version``, else
        :class:`Conflict` (:class:`NotFound` if it does not exist). Each run takes the
        template's columns, is due at ``available_at``, and carries its payload, given as
        JSON text (None: the job's payload). Their ``scheduled_for`` instants are one
        microsecond apart, from ``template.scheduled_for`` or one microsecond after the
        job's latest run, whichever is later: ``(job_id, scheduled_for)`` stays a run's
        key, and every run gets its own idempotency key, however many are enqueued at
        once. ``keys``: each run's concurrency key, rendered from its payload (None: the
        template's), written by the same statements (decision 0031)."""

    @abc.abstractmethod
    async def claim_runs(
        self,
        worker_id: str,
        pools: Sequence[str],
        *,
        limit: int,
        now: datetime,
        prefetch_until: datetime,
        lease_seconds: float,
        tenant_id: str | None = None,
        priority_aging_seconds: float = PRIORITY_AGING_SECONDS,
        started: bool = True,
        urgent: bool = False,
    ) -> Claim:
        """Claim up to ``limit`` pending runs of ``pools`` due by ``prefetch_until`` (of
        one tenant only, with ``tenant_id``: a remote worker acts for its tenant). Each
        claim bumps the run's fence and attempt, and leases it until ``max(available_at,
        now) + lease_seconds``. Two claimers never get the same run.

        ``started``: the claimer starts every run at once, at ``max(available_at, now)``,
        which the claim records as the run's ``started_at`` (a remote worker over HTTP).
        False: the runs are claimed ahead of their start (the in-process worker, which
        prefetches and waits for slots and connections); their ``started_at`` is None until
        :meth:`mark_started` or their completion records it, and a lease that expires
        before then charges nothing (see :meth:`rescue_expired`).

        Fair across tenants (decision 0028): the tenants with pending runs in ``pools``
        share the batch in proportion to their ``claim_weight`` (default 1). Within a
        tenant, runs go by effective priority, then ``available_at``: a run's priority
        rises one level for every ``priority_aging_seconds`` it has been due (never past
        critical), so low priority cannot starve. Across tenants, the batch is taken
        round by round: a tenant's k-th run (in that order) comes in round ``k /
        weight``; within a round, by priority then ``available_at``. The claimed runs
        come back in that order. When the shares leave the batch short, it is topped up
        with each tenant's runs past its share, in priority order, so that the batch is as
        full as an unfair claim's would be.

        A tenant with ``max_running`` takes at most its room (the cap less its runs
        ``running`` anywhere) from a claim; the rest stay pending. Two claimers at once
        never both fill the same room.

        A run with a concurrency key (decision 0031) is claimed only while fewer of its
        tenant's runs with the same key are ``running`` anywhere than its limit (the
        smallest of the key's next pending run's and running runs' limits); the rest stay
        pending and are claimed as the key's runs finish. Keyed runs are read key by key,
        so a key at its limit never holds back other keys or unkeyed runs. Two claimers
        at once never both fill the same key's room.

        Runs whose job has an overlap policy other than ``allow`` are claimed only once
        due (``available_at <= now``), one per job at a time (the earliest due), and:
        ``skip`` — a due run whose job is busy becomes ``skipped`` (reason
        ``overlap``) instead; ``queue`` — it waits while its job is busy;
        ``replace`` — it is claimed, and its job's running runs are asked to cancel.
        A job is busy while another of its runs is ``running`` or a pipeline run of the
        job not started by this run is unfinished (:mod:`cronwheel.core.overlap`,
        decision 0044); a ``replace`` run cancels those pipeline runs when it starts its
        own (:meth:`start_pipeline_run`).
        The result's ``overlap_skipped`` counts the runs this claim skipped so.

        A run whose ``attempt`` has reached its ``max_attempts`` is never claimed: no
        claim exceeds a run's attempt budget.

        ``urgent``: a small claim that must not wait behind the claimer's other
        statements (a worker's peek at an enqueue, decision 0028): the same claim, made
        where the store can on a connection of its own. A store without such connections
        makes it as any other."""

    @abc.abstractmethod
    async def heartbeat(
        self,
        worker_id: str,
        leases: Sequence[tuple[int, int]],
        *,
        now: datetime,
        lease_seconds: float,
        reports: Sequence[RunReport] = (),
    ) -> HeartbeatResult:
        """Extend every ``(run_id, fence)`` lease still held to ``now + lease_seconds``
        (never shortening one), in one write. In that same write, each of ``reports``
        (of runs among ``leases``) stores its progress and checkpoint, stamped ``now``,
        under its lease's fence: a run that is lost gets neither."""

    @abc.abstractmethod
    async def mark_started(self, worker_id: str, starts: Sequence[Start]) -> list[int]:
        """Record that runs claimed ahead (``claim_runs(started=False)``) have started, in
        one write: each run still ``running`` under ``worker_id``'s lease with the start's
        fence and no ``started_at`` gets the start's ``started_at``. Return the run ids so
        marked. A stale fence, another owner, a finished run or one already marked
        changes nothing and is not returned (a completion that landed first carries its
        own start)."""

    @abc.abstractmethod
    async def complete_runs(self, completions: Sequence[Completion]) -> list[int]:
        """Apply fenced completions and record their attempts; return the run ids that
        were accepted. A completion whose fence is stale, or whose run is no longer
        running, changes nothing and is not returned. A completion's progress and
        checkpoint, if it carries any, are stored as a heartbeat's would be, stamped
        ``finished_at``; its result is stored with the run. An accepted completion that
        ends a pipeline task moves its pipeline run on in the same transaction: the
        tasks it satisfied start then, once (decision 0025)."""

    @abc.abstractmethod
    async def release_runs(self, releases: Sequence[Release], *, now: datetime) -> ReleaseResult:
        """Give back fenced runs a stopping worker holds, in one write for the batch.

        A run that had not started leaves no trace but its fence (fences only grow): no
        attempt is recorded, its ``attempt`` goes back down by one (the claim counted
        it) and its ``started_at`` back to its previous attempt's, its ``max_attempts``,
        ``available_at`` and ``last_error`` stay as they were; it is ``pending`` again,
        or ``cancelled`` if its cancellation was asked for.

        A run that had started is recorded as a ``cancelled`` attempt (error class
        ``WorkerShutdown``, the ``why`` as its message and the run's ``last_error``),
        then goes: ``cancelled`` if its cancellation was asked for; ``dead`` (with a
        ``reason``) if its job is at-most-once; otherwise ``pending`` again, due at
        ``max(available_at, now)``, its ``max_attempts`` raised by one so the release
        spends none of its budget.

        A stale fence, or a run no longer running, changes nothing and appears in no
        list."""

    @abc.abstractmethod
    async def rescue_expired(self, *, now: datetime, limit: int = 1000) -> RescueResult:
        """Runs whose lease expired (``lease_expires_at <= now``): record a ``lost``
        attempt, then make them pending again (due at once), dead when that was their
        last attempt or their job is at-most-once (a run whose worker vanished may have
        started: it is never started twice), or cancelled when their cancellation had
        been asked for. A run made dead says why in its ``reason``.

        A run whose start was not stored (``started_at`` is None: claimed ahead, neither
        marked started nor completed) is charged nothing (:func:`lifecycle.rescue`). If
        its job is at-most-once it never began (its start is stored before it begins): it
        is unclaimed, as a release before the start is (:meth:`release_runs`): no attempt
        recorded, its ``attempt`` back down by one, ``pending`` again or ``cancelled`` if
        that was asked for, listed in ``unstarted``. Any other may have begun (its start
        is stored beside its action, and a worker that lagged past its lease still runs
        it): a ``lost`` attempt without a start is recorded, its ``max_attempts`` raised by
        one, no event, and it is ``pending`` again at its ``available_at`` (listed in
        ``retried``) or ``cancelled``: an attempt number is never claimed twice."""

    @abc.abstractmethod
    async def rescue_runs_of_dead_owner(
        self, owners: Sequence[str], *, now: datetime, limit: int = 1000
    ) -> RescueResult:
        """Runs still ``running`` under a lease of one of ``owners``, which the caller has
        proved dead (e.g. ``cronwheel dev`` holding the lock its dead predecessor held),
        rescued at once as :meth:`rescue_expired` would once their leases expired: a
        ``lost`` attempt (``WorkerGone``), then pending, dead or cancelled; a run whose
        start was not stored is charged nothing, as there. Never call it on a lease rule
        alone: an owner that is only slow would run its runs twice."""

    @abc.abstractmethod
    async def notify(self, topic: str) -> None:
        """Wake whoever waits on ``topic`` (e.g. ``runs:<pool>``). Only speeds things up:
        polling stays correct without it."""

    @abc.abstractmethod
    async def wait(self, topics: Sequence[str], timeout: float) -> bool:
        """Wait until one of ``topics`` is notified or ``timeout`` passes; True if woken."""

    def notified_tenants(self, topics: Sequence[str]) -> frozenset[str] | None:
        """The tenants that the notifications of ``topics`` received since the last call
        were about, and forget them; None when any did not say whose runs it announced
        (or none came, or too many tenants did). A worker's peek then claims for these
        tenants alone (decision 0037). A store whose notifications carry no tenant
        answers None: the peek then claims for every tenant."""
        return None


class Leases(Protocol):
    """Shard leases (which scheduler owns which jobs) and pool rate limits (decision
    0033): what processes share by lease or by token."""

    @abc.abstractmethod
    async def acquire_shards(
        self, holder: str, shards: Sequence[int], *, now: datetime, ttl_seconds: float
    ) -> list[ShardLease]:
        """Lease each of ``shards`` that is free, expired (``expires_at <= now``) or
        already ``holder``'s, until ``now + ttl_seconds``; a change of holder bumps the
        epoch. Returns the leases ``holder`` has among ``shards`` afterwards."""

    @abc.abstractmethod
    async def release_shards(self, holder: str, shards: Sequence[int]) -> None:
        """Give up ``holder``'s leases on ``shards`` at once (a clean stop, a rebalance)."""

    @abc.abstractmethod
    async def list_shard_leases(self) -> list[ShardLease]:
        """Every shard lease row, by shard."""

    @abc.abstractmethod
    async def set_pool_rate(self, pool: str, per_second: float | None, *, now: datetime) -> None:
        """Limit ``pool`` to ``per_second`` run starts a second across the cluster (its
        bucket starts full); None removes the limit."""

    @abc.abstractmethod
    async def pool_rates(self) -> dict[str, float]:
        """Every limited pool and its rate (runs a second)."""

    @abc.abstractmethod
    async def take_pool_tokens(self, pool: str, want: int, *, now: datetime) -> int | None:
        """Take up to ``want`` whole tokens from ``pool``'s bucket (refilled at its rate
        since it was last refilled, holding one second's worth, at least one), in one
        statement; return how many were taken. A negative ``want`` gives tokens back (a
        claim that found fewer runs than it took). None: the pool has no limit."""


class Registry(Protocol):
    """The worker registry: who is alive and which pools they serve."""

    @abc.abstractmethod
    async def register_worker(self, worker: WorkerInfo) -> None:
        """Insert or refresh a worker's record (every heartbeat)."""

    @abc.abstractmethod
    async def list_workers(self, tenant_id: str, *, seen_since: datetime) -> list[WorkerInfo]:
        """Workers of the tenant whose last heartbeat is at or after ``seen_since``."""

    @abc.abstractmethod
    async def remove_worker(self, worker_id: str) -> None:
        """Forget a worker (it stopped cleanly)."""

    @abc.abstractmethod
    async def served_pools(self, tenant_id: str, *, seen_since: datetime) -> set[str]:
        """The pools that some worker heard from at or after ``seen_since`` serves for the
        tenant: a remote worker serves its own tenant (its id is ``<tenant>/<id>``), any
        other worker (``cronwheel worker``, ``cronwheel dev``) claims for every tenant.
        One query, whatever the number of workers."""

    @abc.abstractmethod
    async def list_live_workers(self, *, seen_since: datetime) -> list[WorkerInfo]:
        """Every process registered and heard from at or after ``seen_since``, of every
        tenant (the reserved ``@shared`` and ``@scheduler`` ones included), by id."""


class Outbox(Protocol):
    """The notification outbox. The hot paths write its rows themselves, in the statement
    or transaction that changes a run's state: a completion (succeeded; pending again =
    failed; dead), a rescue (failed, dead), a release (dead), a planning or claiming
    statement that records a skipped run (skipped). A row per event and per target of the
    run's job whose ``on`` lists the event; nothing for a job without targets. The
    notifier claims and finishes them, at least once."""

    @abc.abstractmethod
    async def claim_notifications(
        self, *, now: datetime, limit: int, lease_seconds: float
    ) -> list[Notification]:
        """Claim up to ``limit`` pending notifications due by ``now`` (earliest first),
        of every tenant: each one's ``tries`` grows by one and it is held until ``now +
        lease_seconds`` (its ``next_at``), when it is due again if its notifier has not
        reported. Two claimers never get the same row."""

    @abc.abstractmethod
    async def finish_notifications(
        self, results: Sequence[NotificationResult], *, now: datetime
    ) -> list[int]:
        """Record deliveries, in one write: each notification still pending at the
        result's ``tries`` becomes delivered (``finished_at = now``), due again at
        ``retry_at`` (with ``last_error``), or dead. Returns the ids that were changed; a
        result whose claim was overtaken (``tries`` moved) changes nothing."""

    @abc.abstractmethod
    async def replay_notifications(
        self, tenant_id: str, ids: Sequence[int], *, now: datetime
    ) -> list[int]:
        """Dead notifications of the tenant back to pending, due now, with a fresh count
        of tries (same event id); returns the ids replayed (others were not dead)."""

    @abc.abstractmethod
    async def delete_notifications(self, *, before: datetime, limit: int = 10_000) -> int:
        """Delete delivered and dead notifications that finished before ``before``."""


class Housekeeping(Protocol):
    """What maintenance does besides rescuing runs: history's archive and retention,
    vacuum, old idempotency answers."""

    @abc.abstractmethod
    async def delete_history(self, *, before: datetime, limit: int = 10_000) -> int:
        """Delete finished runs (and their attempts) that finished before ``before``, at
        most ``limit``, and as many finished pipeline runs (with their task rows); return
        how many runs. SQLite deletes in small batches, each its own write, so the
        worker's writes go between them. PostgreSQL drops the history partitions whose
        every run finished before ``before`` (granular to the partition width, see
        :meth:`archive_runs`; the rows of a dropped partition are not counted: a count
        would read them), then deletes what is left in ``runs`` and in the default
        partitions by rows."""

    @abc.abstractmethod
    async def archive_runs(
        self,
        *,
        now: datetime,
        settle_seconds: float = 10.0,
        partition_seconds: float = 86_400.0,
        partitions_ahead: int = 3,
        limit: int = 5_000,
    ) -> int:
        """Maintenance: move one batch (at most ``limit``) of runs that finished more
        than ``settle_seconds`` before ``now``, with their attempts, out of the live
        tables into history; return how many moved. Every read that may concern a
        finished run reads both, so nothing a caller sees changes (decision 0032).
        A task run waits for its pipeline run to finish. Two passes at once never move
        the same run.

        PostgreSQL: history is partitioned by the run's finish time, a partition every
        ``partition_seconds``; the partitions of the current period and the
        ``partitions_ahead`` next ones are created first, and retention drops whole
        partitions. SQLite does nothing and returns 0: one writer, no dead tuples to
        vacuum, and its retention already deletes in small batches; a second table would
        only add a copy per run."""

    @abc.abstractmethod
    async def vacuum_live_tables(
        self, *, min_dead_tuples: int = 10_000, dead_fraction: float = 0.2
    ) -> list[Vacuum]:
        """Maintenance: vacuum ``runs`` and ``attempts`` when their dead tuples pass
        ``max(min_dead_tuples, dead_fraction * live tuples)``, for servers where
        autovacuum is off or too slow to keep them small (decision 0032). Returns the
        tables found past the threshold, each vacuumed or skipped with the reason; an
        empty list when none was past it, or another process holds the vacuum lock.

        PostgreSQL: one read of ``pg_stat_user_tables``; then, per table past the
        threshold and with no vacuum of it in progress, a plain ``VACUUM (ANALYZE)``
        outside any transaction (its lock, SHARE UPDATE EXCLUSIVE, does not conflict with
        the hot path's reads and writes), skipping a table whose lock is busy instead of
        waiting. One process at a time (a non-blocking advisory lock). SQLite does
        nothing and returns an empty list: it reuses the pages that deletes free, and
        has no dead tuples to clear."""

    @abc.abstractmethod
    async def delete_responses(self, *, before: datetime) -> int:
        """Forget responses kept before ``before``."""


class Tenants(Protocol):
    """Tenants, their API keys, their quotas and the API's stored answers for
    idempotency keys."""

    @abc.abstractmethod
    async def ensure_tenant(self, tenant_id: str, name: str, *, now: datetime) -> None:
        """Create the tenant if it does not exist (the ``default`` tenant always does)."""

    @abc.abstractmethod
    async def create_tenant(self, tenant: Tenant, *, actor: str | None = None) -> None:
        """Insert a tenant; Conflict naming ``id`` if it exists. With ``actor``, audited
        (``tenant`` ``created``) in the same transaction."""

    @abc.abstractmethod
    async def get_tenant(self, tenant_id: str) -> Tenant | None: ...

    @abc.abstractmethod
    async def list_tenants(self) -> list[Tenant]: ...

    @abc.abstractmethod
    async def update_tenant(
        self, tenant: Tenant, *, actor: str | None = None, now: datetime | None = None
    ) -> Tenant:
        """Replace a tenant's name and quotas; NotFound if it does not exist. With
        ``actor`` and ``now``, audited (``tenant`` ``updated``, the new values)."""

    @abc.abstractmethod
    async def count_live_jobs(self, tenant_id: str, *, limit: int | None = None) -> int:
        """Jobs of the tenant that are neither cancelled nor completed (the quota), or
        ``limit`` if there are at least that many: a quota check counts no further than
        the quota, so its cost is bounded by the quota, not by the jobs in the store."""

    @abc.abstractmethod
    async def take_create_tokens(self, tenant_id: str, count: int, *, now: datetime) -> TokenTake:
        """Take ``count`` tokens from the tenant's create bucket, atomically, in one
        statement, for every process on the store at once (decision 0027).

        The bucket refills at ``max_creates_per_second`` from its stored time to ``now``
        (never backwards: a caller whose clock is behind refills nothing) and holds
        :func:`bucket_capacity` tokens. It grants when it holds ``min(count, capacity)``
        tokens and then takes all ``count``: a batch larger than a second's worth is let
        through a full bucket and leaves it in debt, so the average rate holds. A refusal
        takes nothing. A tenant without the limit, or unknown, is always granted."""

    @abc.abstractmethod
    async def create_api_key(self, key: ApiKey, *, actor: str | None = None) -> None:
        """Insert a key record; the tenant must exist (NotFound naming ``tenant``). With
        ``actor``, audited (``key`` ``created``, its role and name; never its hash)."""

    @abc.abstractmethod
    async def find_api_key(self, key_hash: str) -> ApiKey | None:
        """The key with this hash, revoked or not (the caller checks ``revoked_at``)."""

    @abc.abstractmethod
    async def list_api_keys(self, tenant_id: str) -> list[ApiKey]: ...

    @abc.abstractmethod
    async def revoke_api_key(
        self, tenant_id: str, key_id: str, *, now: datetime, actor: str | None = None
    ) -> ApiKey:
        """Mark a key revoked (idempotent); NotFound if not this tenant's. With
        ``actor``, the first revocation is audited (``key`` ``revoked``)."""

    @abc.abstractmethod
    async def save_response(self, response: StoredResponse) -> StoredResponse:
        """Keep a response under its key unless one is kept already; return the one that
        is kept (the earlier one wins, so a retried request replays the first answer)."""

    @abc.abstractmethod
    async def get_response(self, tenant_id: str, key: str) -> StoredResponse | None: ...


class Jobs(Protocol):
    """The jobs of a tenant: created, read one by one, changed, paused and deleted."""

    @abc.abstractmethod
    async def create_jobs(
        self, jobs: Sequence[Job], runs: Sequence[NewRun] = (), *, actor: str = "api"
    ) -> None:
        """Insert jobs (and runs that must exist with them, e.g. an immediate job's run)
        atomically: all or nothing. A name already used by a live job of the same tenant
        raises :class:`~cronwheel.errors.Conflict` naming ``name``. A tenant whose live
        jobs plus these would exceed its ``max_jobs`` raises
        :class:`~cronwheel.errors.OverLimit` naming ``max_jobs``; the check holds across
        concurrent creates in any process (the tenant's row is locked while its live
        jobs are counted and the new ones inserted)."""

    @abc.abstractmethod
    async def get_job(self, tenant_id: str, job_id: str) -> Job | None: ...

    @abc.abstractmethod
    async def update_job(
        self, job: Job, *, expected_version: int, actor: str, replan: bool = False
    ) -> Job:
        """Replace a job's definition if it is still at ``expected_version``; the stored
        job gets ``expected_version + 1``. With ``replan`` (its schedule changed), its
        pending runs of older versions that never started are cancelled (reason
        ``replanned``): the new schedule plans from the job's new ``next_fire_at``.
        Raises NotFound or StaleVersion."""

    @abc.abstractmethod
    async def set_job_state(
        self,
        tenant_id: str,
        job_id: str,
        state: JobState,
        *,
        next_fire_at: datetime | None,
        now: datetime,
        actor: str,
        runs: Sequence[NewRun] = (),
    ) -> Job:
        """Pause, resume, complete or cancel a job (version bump, audited), inserting
        ``runs`` (e.g. the occurrences a pause skipped) in the same transaction.
        Cancelling also cancels its pending runs. A job already in ``state`` is returned
        as it is: no version bump, no audit row. A cancelled job cannot change state
        again: Conflict. Raises NotFound."""

    @abc.abstractmethod
    async def replace_job_actions(
        self,
        tenant_id: str,
        changes: Sequence[JobSecrets],
        *,
        actor: str,
        now: datetime,
    ) -> int:
        """Store each job's new ``action`` and ``notify`` targets, if the job is still at
        ``version`` (a job changed meanwhile is left, to be read again). No version bump:
        what the job does is unchanged (its secrets sealed again with a new key,
        cronwheel.security.sealing). One audit entry for the tenant (``tenant``
        ``secrets_resealed``, with the count) if any changed. Returns how many changed."""


class Pipelines(Protocol):
    """Pipeline definitions and their versions (decision 0025)."""

    @abc.abstractmethod
    async def create_pipeline(self, pipeline: Pipeline, *, actor: str) -> None:
        """Insert a pipeline and its first version (``pipeline.version``, its definition
        and fingerprint), audited, in one transaction. A name already used by a live
        pipeline of the tenant raises :class:`~cronwheel.errors.Conflict` naming
        ``name``; an unknown tenant raises NotFound."""

    @abc.abstractmethod
    async def get_pipeline(
        self, tenant_id: str, pipeline_id: str, *, version: int | None = None
    ) -> Pipeline | None:
        """The pipeline at ``version`` (None: its latest), deleted or not; None if the
        tenant has no such pipeline or the pipeline no such version."""

    @abc.abstractmethod
    async def update_pipeline(
        self,
        tenant_id: str,
        pipeline_id: str,
        *,
        definition: Mapping[str, JSON],
        fingerprint: str,
        expected_version: int,
        now: datetime,
        actor: str,
    ) -> Pipeline:
        """Store ``definition`` as the pipeline's next version if its latest is still
        ``expected_version`` (else StaleVersion), audited. A definition whose
        ``fingerprint`` is the latest version's changes nothing: the pipeline comes
        back as it is, same version. A deleted pipeline cannot change: Conflict.
        Raises NotFound."""

    @abc.abstractmethod
    async def delete_pipeline(
        self, tenant_id: str, pipeline_id: str, *, now: datetime, actor: str
    ) -> Pipeline:
        """Soft delete: the pipeline leaves the list and frees its name; its versions
        stay. Deleting a deleted pipeline returns it unchanged. Raises NotFound."""

    @abc.abstractmethod
    async def reseal_pipelines(
        self, reseal: Callable[[str, Mapping[str, Any]], Mapping[str, Any] | None]
    ) -> tuple[int, int]:
        """Key rotation for pipelines (cronwheel.security.sealing): ``reseal(tenant_id, action)``
        gives a webhook action sealed with the new key, or None if it is already. Every
        stored version's task actions and notification targets' URLs
        (:func:`cronwheel.core.pipelines.tasks.resealed_definition`), and the task actions
        carried by task runs not finished yet, are written again, in one transaction.
        Returns (versions, runs) changed. (Versions are immutable in content; only their
        ciphertext changes.)"""


class RunControl(Protocol):
    """A user's hand on runs: cancel and replay, and pipeline runs started, read,
    cancelled, retried and advanced."""

    @abc.abstractmethod
    async def cancel_run(self, tenant_id: str, run_id: int, *, now: datetime, actor: str) -> Run:
        """Cancel a pending run at once; ask a running one to stop (its worker sees it at
        the next heartbeat). A finished run, or a running one already asked to stop, is
        left as it is, without an audit row: cancelling is idempotent. Raises NotFound."""

    @abc.abstractmethod
    async def replay_runs(
        self,
        tenant_id: str,
        run_ids: Sequence[int],
        *,
        extra_attempts: int,
        now: datetime,
        actor: str,
    ) -> list[int]:
        """Dead runs back to pending with a fresh budget of ``extra_attempts``, due now;
        same run, same idempotency key. Returns the ids replayed (others were not dead)."""

    @abc.abstractmethod
    async def start_pipeline_run(self, start: PipelineRunStart) -> PipelineRun:
        """Start a pipeline run and, in the same transaction, its root tasks' runs. For
        a ``trigger_run_id`` that already started one, that pipeline run: a retried
        trigger starts nothing new. A trigger run under ``overlap: replace`` cancels,
        in the same transaction, its job's other unfinished pipeline runs, as
        :meth:`cancel_pipeline_run` would (decision 0044)."""

    @abc.abstractmethod
    async def get_pipeline_run(self, tenant_id: str, pipeline_run_id: str) -> PipelineRun | None:
        """A pipeline run with every task row (dependency order, then instance)."""

    @abc.abstractmethod
    async def cancel_pipeline_run(
        self, tenant_id: str, pipeline_run_id: str, *, now: datetime, actor: str
    ) -> PipelineRun:
        """Cancel: pending task runs end ``cancelled``, running ones are asked to stop,
        no task starts again; the run ends ``cancelled`` once its running tasks have
        ended. Idempotent; a finished run comes back as it is. Raises NotFound."""

    @abc.abstractmethod
    async def retry_pipeline_task(
        self, tenant_id: str, pipeline_run_id: str, task: str, *, now: datetime, actor: str
    ) -> PipelineRun:
        """Replay a dead task's runs; the tasks that were skipped because of it wait for
        it again. Raises NotFound (naming ``pipeline_run`` or ``task``) or Conflict
        naming ``task`` when it is not dead."""

    @abc.abstractmethod
    async def advance_pipelines(self, *, now: datetime, limit: int = 100) -> int:
        """Move on the pipeline runs whose task runs ended by a path other than a
        worker's completion (a lease rescue, a release, a cancel); return how many.
        Maintenance calls it; a worker's completion advances in its own transaction."""


class History(Protocol):
    """Lists and history: the reads that may come from a read replica within a bounded
    staleness (decision 0030, :mod:`cronwheel.store.replica` routes exactly these)."""

    @abc.abstractmethod
    async def list_jobs(
        self,
        tenant_id: str,
        *,
        state: JobState | None = None,
        pool: str | None = None,
        name_prefix: str | None = None,
        name: str | None = None,
        id_prefix: str | None = None,
        schedule_kind: str | None = None,
        last_outcome: LastOutcome | None = None,
        order: JobOrder = JobOrder.CREATED,
        after: JobKey | None = None,
        limit: int = 100,
    ) -> list[Job]:
        """Jobs in ``order`` (creation by default), starting after the position
        ``after`` (``order.key(last job of the previous page)``): a keyset cursor that
        stays stable while jobs are inserted, and InvalidInput naming ``after`` if it
        is not a position in ``order`` (see :class:`~cronwheel.core.model.JobOrder`). Every
        order is a walk of one index of the tenant's jobs (creation: ``(tenant_id,
        id)``; name: ``(tenant_id, name, id)``; next fire: ``(tenant_id, next_fire_at
        with none last, id)``), either way, so a page costs the same at any depth and
        never sorts the tenant's jobs.

        ``name`` matches exactly (cancelled jobs may share a live job's name);
        ``id_prefix`` matches the ids that start with it (see
        :func:`~cronwheel.core.model.id_prefix_range`): what naming a job by a short id or
        its name needs.

        ``schedule_kind`` keeps the jobs whose schedule has that ``kind`` (``cron``,
        ``interval``…). ``last_outcome`` keeps those whose :class:`~cronwheel.core.model.LastRun`
        ended in that state, or (``LastOutcome.NONE``) those with no
        finished run: checked as the jobs index is walked, one probe of the index of
        finished runs by job per job examined (as :meth:`last_runs`), never a scan of
        the runs; a rare outcome costs a walk over the tenant's jobs until a page fills."""

    @abc.abstractmethod
    async def last_runs(self, tenant_id: str, job_ids: Sequence[str]) -> dict[str, LastRun]:
        """Each job's newest finished run (by ``finished_at``, then id), for the jobs that
        have one: one query for all of them, one index probe per job."""

    @abc.abstractmethod
    async def list_runs(
        self,
        tenant_id: str,
        *,
        job_id: str | None = None,
        state: RunState | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[Run]:
        """Runs, newest ``scheduled_for`` first for one job, else newest id first."""

    @abc.abstractmethod
    async def list_dead(
        self,
        tenant_id: str,
        *,
        pool: str | None = None,
        job_id: str | None = None,
        died_since: datetime | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[DeadRun]:
        """The dead-letter queue, newest id first, after the cursor ``before_id``:
        optionally of one pool, of one job, or of runs that died (``finished_at``) at or
        after ``died_since``; each with its job's name and its last attempt's error."""

    @abc.abstractmethod
    async def list_attempts(self, tenant_id: str, run_id: int) -> list[Attempt]: ...

    @abc.abstractmethod
    async def list_activity(
        self,
        *,
        after_attempt: int,
        finished_since: datetime,
        waiting_before: datetime | None = None,
        limit: int = 500,
    ) -> Activity:
        """Recent activity of every tenant (an operator's view, like maintenance): the
        attempts whose id is above ``after_attempt`` and their runs, the running runs,
        the runs closed without an attempt since ``finished_since`` and, with
        ``waiting_before``, the jobs whose runs wait past it. Read through indexes only
        (attempts by id, running runs, finished runs by time), so it can be polled."""

    @abc.abstractmethod
    async def list_audit(self, tenant_id: str, entity_id: str) -> list[AuditEntry]: ...

    @abc.abstractmethod
    async def attempt_history(
        self, tenant_id: str | None, *, since: datetime, now: datetime, bucket_seconds: int
    ) -> list[AttemptBucket]:
        """The attempts that finished after ``since`` up to ``now``, counted per pool and
        per bucket of ``bucket_seconds`` (see :class:`AttemptBucket`): only the buckets
        with any attempt, by pool then bucket. Of one tenant, or of every tenant with
        None. One query through the attempts-by-finish-time index (each attempt's run
        by its key for the pool); at most :data:`MAX_HISTORY_BUCKETS` buckets, else
        ValueError."""

    @abc.abstractmethod
    async def runs_around(
        self, tenant_id: str, job_id: str, instant: datetime
    ) -> tuple[Run | None, Run | None]:
        """The job's run with the latest ``scheduled_for`` at or before ``instant``, and
        its run with the earliest one after it: two probes of the ``(job_id,
        scheduled_for)`` key."""

    @abc.abstractmethod
    async def list_pipelines(
        self,
        tenant_id: str,
        *,
        name: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> list[Pipeline]:
        """The tenant's live pipelines at their latest version, by id (creation order),
        starting after the id ``after``; ``name`` keeps the one of that name. A walk of
        the ``(tenant_id, id)`` index."""

    @abc.abstractmethod
    async def list_pipeline_versions(
        self, tenant_id: str, pipeline_id: str, *, before: int | None = None, limit: int = 100
    ) -> list[PipelineVersion]:
        """A pipeline's versions, newest first, those below ``before`` if given. Raises
        NotFound for a pipeline the tenant does not have."""

    @abc.abstractmethod
    async def list_pipeline_runs(
        self,
        tenant_id: str,
        *,
        pipeline_id: str | None = None,
        state: str | None = None,
        before: str | None = None,
        limit: int = 100,
    ) -> list[PipelineRun]:
        """The tenant's pipeline runs, newest first (ids below ``before``), without
        their task rows."""

    @abc.abstractmethod
    async def list_notifications(
        self,
        tenant_id: str,
        *,
        state: NotificationState | None = None,
        before_id: int | None = None,
        limit: int = 100,
    ) -> list[Notification]:
        """A tenant's notifications, newest id first, after the cursor ``before_id``;
        optionally in one state (``dead``: the dead letter)."""


class Status(Protocol):
    """Live reads: one run, the audit log, and what status pages and metrics count.
    Never from a replica: operations want them as they are now."""

    @abc.abstractmethod
    async def get_run(self, tenant_id: str, run_id: int) -> Run | None: ...

    @abc.abstractmethod
    async def list_audit_entries(
        self,
        *,
        tenant_id: str | None = None,
        actor: str | None = None,
        entity: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        before: int | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """The audit log newest first (by id), every filter optional: one tenant's (None:
        every tenant's), one actor's, one kind of entity, ``since <= at < until``, ids
        below ``before`` (the keyset cursor). One tenant's entries are read through
        ``(tenant_id, id)``, all tenants' through the primary key."""

    @abc.abstractmethod
    async def key_running(self, tenant_id: str, key: str) -> tuple[int, int | None]:
        """How many of the tenant's runs with concurrency key ``key`` are running, and
        the smallest limit among them (None: none running): one probe of the running
        keyed runs' index (decision 0031)."""

    @abc.abstractmethod
    async def pool_status(
        self, tenant_id: str | None, *, now: datetime, since: datetime
    ) -> list[PoolStatus]:
        """Per pool with any due, running or dead run, or any attempt that finished after
        ``since`` (up to ``now``): the numbers of :class:`PoolStatus`, by pool name. Of
        one tenant, or of every tenant with None. Read through indexes only (pending
        runs by pool, running runs, dead runs, attempts by finish time), never a scan
        of the runs table."""

    @abc.abstractmethod
    async def replication(self) -> Replication:
        """How the server replicates its commits (:class:`Replication`): read from its
        settings and its streaming standbys, for ``cronwheel status``."""

    @abc.abstractmethod
    async def count_jobs_by_state(self, tenant_id: str) -> dict[JobState, int]:
        """The tenant's jobs per state (states without a job are left out): one query
        through the jobs-by-tenant index, bounded by the tenant's job quota."""

    @abc.abstractmethod
    async def read_gauges(self, *, now: datetime, workers_seen_since: datetime) -> GaugeReading:
        """The store-derived metrics in one read-only statement: runs due and the oldest
        due per pool, running per pool, dead per tenant, live workers per pool (schedulers
        excluded). Each part walks a partial index of the rows it counts (pending, running,
        dead), so its cost follows the backlog, not the history."""


class Catalogue(Tenants, Jobs, Pipelines, Protocol):
    """What the API and the Python API manage: tenants, keys, jobs and pipelines."""


class Store(
    Setup,
    StoreClock,
    Queue,
    Leases,
    Registry,
    Outbox,
    Housekeeping,
    Catalogue,
    RunControl,
    History,
    Status,
    abc.ABC,
):
    """The lifecycle of jobs and runs, persisted: every seam at once, as each backend
    implements it. See the module docstring for the rules; a user that needs only part of
    it names the protocol it needs (the engine's loops do)."""
