"""The values the store takes and hands back: completions, claims, reports, readings.

Plain dataclasses with no I/O, shared by the stores (:mod:`cronwheel.store`) and the code
above and below them: the lifecycle decides a :class:`Completion`, the metrics read a
:class:`GaugeReading`, the sealing builds :class:`JobSecrets`. They live in the domain so
that none of those has to import a store to name what it passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cronwheel.core.model import (
    JSON,
    Attempt,
    AttemptOutcome,
    ClaimedRun,
    JobState,
    Run,
    RunState,
    hot_record,
)
from cronwheel.errors import OverLimit


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can do, so the engine asks for a capability and never for a name."""

    cross_process_wakeups: bool
    """A :meth:`Store.notify` reaches waiters in other processes (LISTEN/NOTIFY)."""
    skip_locked: bool
    """Concurrent claimers skip each other's rows instead of queueing behind a write lock."""


FULL_RETRY_AFTER = 60
"""Retry-After (seconds) of a create refused by ``max_jobs``: jobs end on their own
schedule, so a client is told to come back in a while rather than hammer."""


def bucket_capacity(rate: float) -> float:
    """Tokens a tenant's create bucket holds when full: one second of creates (at least
    one, so a rate under 1/s still lets a single create through now and then)."""
    return max(rate, 1.0)


def max_jobs_refusal(live: int, adding: int, limit: int) -> OverLimit:
    """What a store raises when ``adding`` jobs would take a tenant past ``max_jobs``."""
    what = "a job" if adding == 1 else f"{adding} jobs"
    return OverLimit(
        "max_jobs",
        f"the tenant has {live} live jobs and may have {limit}: {what} more would be over"
        " (cancel jobs it no longer needs, or ask an admin to raise max_jobs)",
        FULL_RETRY_AFTER,
    )


@dataclass(frozen=True, slots=True)
class TokenTake:
    """The answer of :meth:`Store.take_create_tokens`."""

    granted: bool
    rate: float | None
    """The tenant's ``max_creates_per_second``; None: no limit (always granted)."""
    retry_after: float = 0.0
    """When refused: seconds until the bucket holds what was asked for."""

    @classmethod
    def of(cls, rate: float | None, tokens: float | None, granted: bool, count: int) -> TokenTake:
        """From what a store read: the rate, the bucket's content before the take (when
        refused) and whether it took."""
        if rate is None or granted:
            return cls(True, rate)
        needed = min(float(count), bucket_capacity(rate))
        # A concurrent take may have emptied the bucket after ``tokens`` was read (the
        # PostgreSQL store reads it from the statement's snapshot): the deficit is then
        # unknown, and the caller's Retry-After floor (a second) stands in for it.
        return cls(False, rate, max(needed - (tokens or 0.0), 0.0) / rate)


@dataclass(frozen=True, slots=True)
class JobAdvance:
    """Move a due job's ``next_fire_at`` after its runs were planned.

    Applied only if the job is still at ``version``, ``active`` and at
    ``expected_next_fire_at`` (the ``next_fire_at`` its runs were planned from): a job
    edited, paused or cancelled since it was read is left alone, and so is one another
    scheduler advanced meanwhile (an advance does not change the version); either way
    its runs are not inserted and it is reported stale.
    """

    job_id: str
    version: int
    next_fire_at: datetime | None
    last_fire_at: datetime | None
    state: JobState = JobState.ACTIVE
    expected_next_fire_at: datetime | None = field(kw_only=True)
    """The job's ``next_fire_at`` as read (compare-and-set): a scheduler that read the
    job before another advanced it must not write the occurrences again, which the
    unique index on ``runs`` no longer catches once they are archived (decision 0032)."""


@dataclass(frozen=True, slots=True)
class MaterializeResult:
    inserted: int
    """Runs inserted; runs that already existed (another scheduler won) are not counted."""
    advanced: int
    """Jobs whose ``next_fire_at`` moved."""
    stale_jobs: list[str] = field(default_factory=list)
    """Jobs that changed (edited, paused, advanced by another scheduler...) since they
    were read: nothing was written for them; the next read plans them afresh."""


@hot_record
class Completion:
    """What a worker reports about one attempt; one store call turns it into history.

    ``state`` is where the run goes: ``succeeded``, ``pending`` (a retry at
    ``available_at``), ``dead`` or ``cancelled``.
    """

    run_id: int
    fence: int
    worker_id: str
    state: RunState
    outcome: AttemptOutcome
    started_at: datetime | None
    finished_at: datetime
    lag_seconds: float | None = None
    error_class: str | None = None
    error_message: str | None = None
    available_at: datetime | None = None
    reason: str | None = None
    """Why the run ends this way (every ``dead`` completion has one); None keeps the
    run's reason as it was."""
    http_status: int | None = None
    """What a webhook target answered, kept on the attempt."""
    output: str | None = None
    """A command's exit code and output tails (JSON text), kept on the attempt."""
    progress: float | None = None
    """A progress report the heartbeats had not carried yet (with ``progress_message``):
    stored with the completion, so a handler's last report is never lost. None: none."""
    progress_message: str | None = None
    checkpoint: str | None = None
    """A checkpoint (JSON text) the heartbeats had not carried yet; None: none."""
    result: str | None = None
    """What the handler returned (JSON text), stored with the run; None: nothing."""
    pipeline_run_id: str | None = None
    """The pipeline run whose task this run is: the store starts the tasks that waited
    for it in the same transaction (decision 0025)."""


@hot_record
class RunReport:
    """What a handler reported about a run since the last heartbeat: a new progress (with
    its message) and/or a new checkpoint. :meth:`Store.heartbeat` stores it with the
    lease extension, under the same fence; the store stamps it with the heartbeat's
    ``now``."""

    run_id: int
    progress: float | None = None
    """0.0 to 1.0 (checked by :func:`cronwheel.core.model.progress_report`); None: no new
    progress (``progress_message`` is then ignored)."""
    progress_message: str | None = None
    checkpoint: str | None = None
    """JSON text (checked by :func:`cronwheel.core.model.checkpoint_text`); None: no new
    checkpoint."""


class Claim(list[ClaimedRun]):
    """What :meth:`Store.claim_runs` returns: the claimed runs, in claim order, and
    ``overlap_skipped``, how many due runs the same statement recorded as ``skipped``
    (reason ``overlap``) because their job was still running. A list, so callers that
    only want the runs use it as one; the count feeds ``cronwheel_runs_skipped_total``
    without a query of its own."""

    __slots__ = ("overlap_skipped",)

    def __init__(self, runs: Iterable[ClaimedRun] = (), *, overlap_skipped: int = 0) -> None:
        super().__init__(runs)
        self.overlap_skipped = overlap_skipped


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    extended: list[int]
    """Runs whose lease now runs to the new expiry."""
    lost: list[int]
    """Runs this worker no longer owns (fence moved, or finished by someone else): stop them."""
    cancel_requested: list[int]
    """Runs still owned whose cancellation was asked for: stop them and report ``cancelled``."""


@dataclass(frozen=True, slots=True)
class Release:
    """A run a stopping worker gives back without an outcome.

    ``started`` says whether its action had begun. A release that never started
    leaves no attempt in the run's history and spends nothing: the claim is undone. One
    that started is an attempt (``cancelled``, ``WorkerShutdown``) that spends no budget
    either for an at-least-once job (a stop is not the run's failure), but an
    at-most-once run that started is never started again: it becomes ``dead``.
    """

    run_id: int
    fence: int
    worker_id: str
    started: bool
    why: str
    """For a run that had started: its attempt's error message and its ``last_error``."""


@hot_record  # one per run claimed ahead
class Start:
    """A run claimed ahead whose action has begun (:meth:`Store.mark_started`)."""

    run_id: int
    fence: int
    started_at: datetime


@dataclass(frozen=True, slots=True)
class ReleaseResult:
    retried: list[int]
    """Runs that are claimable again."""
    dead: list[int]
    """At-most-once runs that had started: they will not be started again."""
    cancelled: list[int]
    """Runs whose cancellation had been asked for."""


@dataclass(frozen=True, slots=True)
class RescueResult:
    retried: list[int]
    """Runs whose lease expired and that are claimable again."""
    dead: list[int]
    """Runs whose lease expired on their last allowed attempt: poison runs."""
    cancelled: list[int] = field(default_factory=list)
    """Runs whose lease expired after their cancellation was asked for."""
    unstarted: list[int] = field(default_factory=list)
    """At-most-once runs claimed ahead whose lease expired before they started (no
    ``started_at``; their start is stored before they begin): claimable again, charged
    nothing, with no attempt recorded (or cancelled, if that was asked for: they are in
    ``cancelled`` then, not here). Other runs without a stored start may have begun: they
    are in ``retried``, after an uncharged ``lost`` attempt."""


@dataclass(frozen=True, slots=True)
class Vacuum:
    """One live table found past its dead-tuple threshold by :meth:`Store.vacuum_live_tables`."""

    table: str
    dead_tuples: int
    """Dead tuples the statistics counted before the vacuum."""
    live_tuples: int
    seconds: float = 0.0
    """How long the vacuum took (0 when skipped)."""
    skipped: str | None = None
    """Why it was not vacuumed this time (a vacuum of it already running, its lock busy,
    or the server's warning); None: vacuumed."""
    busy: bool = False
    """Skipped because another vacuum, or a lock holder, was at it: the next pass tries
    again, nothing for an operator to do."""


@dataclass(frozen=True, slots=True)
class Activity:
    """What happened to runs lately, for a live view (the ``cronwheel dev`` console).
    Every list is bounded by the call's ``limit``."""

    attempts: list[Attempt]
    """Attempts recorded after the cursor, in id order (the order they were written)."""
    runs_of_attempts: dict[int, Run]
    """The current state of the runs those attempts belong to, by run id."""
    running: list[Run]
    """Runs held by a worker now (claimed: started once ``started_at`` has come)."""
    closed: list[Run]
    """Runs that finished at or after ``finished_since`` without an attempt ending them
    (cancelled while pending, skipped, replanned), by ``finished_at``."""
    waiting: list[Run]
    """With ``waiting_before``: for each job with pending runs due by then, its earliest."""
    latest_attempt: int = 0
    """The highest attempt id there is: a cursor that starts now skips older history."""


@dataclass(frozen=True, slots=True)
class JobSecrets:
    """A job's action and notification targets, to store again at the version they were
    read (:meth:`Store.replace_job_actions`)."""

    job_id: str
    version: int
    action: Mapping[str, JSON]
    notify: Sequence[Mapping[str, JSON]] = ()


SYNC_OFF = frozenset({"off", "local"})
"""``synchronous_commit`` values with which no commit waits for a standby."""


@dataclass(frozen=True, slots=True)
class Replication:
    """How the store's server replicates what it commits, as ``cronwheel status`` shows
    it (decision 0050). ``mode``: ``synchronous`` (a commit returns once a standby has
    it: a promoted standby has every acknowledged write), ``asynchronous`` (standbys
    stream, a commit does not wait: a failover loses the last moments), ``none`` (no
    standby streams), or ``waiting`` (synchronous replication is configured and no
    synchronous standby is connected: every commit waits until one is)."""

    mode: str
    standbys: int = 0
    """Standbys streaming from this server."""
    synchronous_standby_names: str | None = None
    synchronous_commit: str | None = None

    @classmethod
    def of(cls, names: str, commit: str, sync_states: Sequence[str | None]) -> Replication:
        """The mode the settings and ``pg_stat_replication``'s ``sync_state`` column (one
        value per streaming standby) make."""
        waits = bool(names.strip()) and commit not in SYNC_OFF
        if waits and any(s in ("sync", "quorum") for s in sync_states):
            mode = "synchronous"
        elif waits:
            mode = "waiting"
        elif sync_states:
            mode = "asynchronous"
        else:
            mode = "none"
        return cls(mode, len(sync_states), names, commit)


@dataclass(frozen=True, slots=True)
class PoolStatus:
    """How one pool is doing, for ``cronwheel status``: counts now, and what the attempts
    that finished in the window (``since`` to ``now``) say."""

    pool: str
    due: int = 0
    """Pending runs whose ``available_at`` has come: due and not started."""
    oldest_due_at: datetime | None = None
    """The ``available_at`` of the longest-waiting due run that no limit holds back."""
    held_by_key: int = 0
    """Of the due runs, those waiting for their concurrency key, which is full (as many of
    its runs are running as its limit): the limit working, not lateness (decision 0042)."""
    held_by_overlap: int = 0
    """Of the due runs, those of an ``overlap: queue`` job waiting for its running run, or
    for the pipeline run it started to end (and not already counted in ``held_by_key``)."""
    running: int = 0
    dead: int = 0
    """Dead runs (the dead-letter queue), whenever they died."""
    finished: int = 0
    """Attempts that finished in the window, whatever their outcome."""
    failures: int = 0
    """Of those, the ones that failed: ``failed``, ``permanent``, ``timed_out``, ``lost``."""
    lag_p50: float | None = None
    """Median start lag (seconds) of the window's attempts: nearest-rank, None without any."""
    lag_p99: float | None = None


@dataclass(frozen=True, slots=True)
class DeadRun:
    """A run of the dead-letter queue as a listing shows it: with its job's name and the
    error of its last attempt, read with it (one query for a whole page)."""

    run: Run
    job_name: str | None
    """None when the job row is gone (retention keeps runs longer than nothing)."""
    error_class: str | None = None
    """Of the run's last attempt (highest attempt number); None if it had none."""
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class NotificationResult:
    """How one delivery of a claimed notification went (:meth:`Store.finish_notifications`).

    ``delivered``: the target took it. Otherwise it is tried again at ``retry_at``, or,
    without one, it is dead (the notifications' dead letter), ``error`` saying why."""

    id: int
    tries: int
    """The notification's ``tries`` as claimed: the fence of this delivery."""
    delivered: bool
    error: str | None = None
    retry_at: datetime | None = None


FAILED_OUTCOMES = ("failed", "permanent", "timed_out", "lost")
"""The attempt outcomes :class:`PoolStatus` counts as failures (a cancel is not one)."""

MAX_HISTORY_BUCKETS = 1440
"""The most buckets :meth:`Store.attempt_history` answers (a day of minutes): its answer
has at most this many rows per pool."""


@dataclass(frozen=True, slots=True)
class AttemptBucket:
    """The attempts of one pool that finished in one bucket of
    :meth:`Store.attempt_history`: bucket ``k`` covers ``(since + k * bucket_seconds,
    since + (k + 1) * bucket_seconds]``."""

    pool: str
    bucket: int
    finished: int
    """Attempts that finished in the bucket, whatever their outcome."""
    failures: int
    """Of those, the ones whose outcome is one of :data:`FAILED_OUTCOMES`."""


@dataclass(frozen=True, slots=True)
class GaugeReading:
    """What a metrics scrape reads of the store (:meth:`Store.read_gauges`): counts
    only, each bounded by an index of the few rows it counts, never the whole runs table."""

    read_at: datetime
    """The ``now`` it was read at: ages are measured from it."""
    due: dict[tuple[str, int], int]
    """(pool, priority) → runs pending with ``available_at <= now``."""
    oldest_due: dict[str, datetime]
    """pool → the ``available_at`` of its oldest due run that no limit holds back (a full
    concurrency key, an ``overlap: queue`` job's running run: decision 0042)."""
    running: dict[str, int]
    """pool → runs held by a worker (``running``)."""
    dead: dict[str, int]
    """tenant → runs in the dead-letter queue."""
    workers: dict[str, int]
    """pool → workers that serve it and were seen since ``workers_seen_since``."""
    held: dict[tuple[str, str], int] = field(default_factory=dict)
    """(pool, reason) → due runs a limit holds back: ``concurrency_key`` (their key is
    full), ``overlap_queue`` (their ``overlap: queue`` job has a run running)."""
