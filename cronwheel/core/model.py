"""The nouns of cronwheel: jobs, runs, attempts and their policies.

Plain frozen dataclasses, no I/O. Every datetime is timezone-aware and in UTC; the job's
own timezone lives inside its schedule and is applied only by the schedule engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import IntEnum, StrEnum
from typing import Any, TypeVar, dataclass_transform

from cronwheel.errors import InvalidInput

JSON = Any
"""A value that survives ``json.dumps``/``json.loads`` unchanged."""

DEFAULT_TENANT = "default"

# Why a run did not run as planned: the ``reason`` of a skipped or cancelled run. One
# place for both stores and the planner, so the API shows the same words whoever wrote it.
REASON_MISFIRE = "misfire"
REASON_PAUSED = "paused"
REASON_BACKFILL = "backfill"
REASON_OVERLAP_SKIP = "overlap: the previous run was still running"
REASON_REPLANNED = "replanned: the job's schedule changed"
# Why a run is dead when no attempt of it failed: an at-most-once run is never started
# twice, so one whose execution was cut short ends here.
REASON_AT_MOST_ONCE_STOPPED = (
    "at-most-once run interrupted after it started: its worker stopped before it finished"
)
REASON_AT_MOST_ONCE_LOST = (
    "at-most-once run interrupted after it started: its worker's lease expired"
)
REASON_LEASE_LOST_LAST = "its worker's lease expired on its last attempt"

# Why a run is dead: every dead run carries one of these as its ``reason`` (the error
# itself is in ``last_error``), so "why did this stop retrying?" has an answer.
REASON_PERMANENT = "permanent error: the action said retrying cannot help"
REASON_EXHAUSTED = "attempts exhausted: attempt {attempt} of {max_attempts} failed"
REASON_TIMED_OUT = "timed out on its last attempt ({attempt} of {max_attempts})"
REASON_BUDGET = "retry budget spent: the next retry would start after retry.budget_seconds"
REASON_AT_MOST_ONCE = "at-most-once delivery: a failed attempt is never retried"
DEFAULT_POOL = "default"


_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def hot_record(cls: type[_T]) -> type[_T]:
    """A dataclass that the type checker treats as frozen but Python builds as a plain
    slotted one: a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, ten times slower for a run's 21 fields (3.9 µs against 0.4 µs,
    measured), and workers build several of these per run. Instances are still hashable
    and compared by value; nothing in cronwheel assigns to them."""
    return dataclass(slots=True, unsafe_hash=True)(cls)


class JobState(StrEnum):
    """Where a job is in its life. See docs/lifecycle.md for who moves it out of each."""

    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class RunState(StrEnum):
    """Where a run is in its life. See docs/lifecycle.md for who moves it out of each."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"

    @property
    def finished(self) -> bool:
        return self in _FINISHED_RUN_STATES


_FINISHED_RUN_STATES = frozenset(
    {RunState.SUCCEEDED, RunState.DEAD, RunState.CANCELLED, RunState.SKIPPED}
)


class NotifyEvent(StrEnum):
    """What a job's notification targets may ask to hear about (``notify[].on``): one event
    per change of a run's state, written to the outbox with that change."""

    SUCCEEDED = "succeeded"
    """The run succeeded."""
    FAILED = "failed"
    """An attempt failed (or its worker was lost) and a retry is scheduled."""
    DEAD = "dead"
    """The run is dead: attempts exhausted, a permanent error, or an at-most-once run
    that cannot be started again."""
    SKIPPED = "skipped"
    """The run was recorded as skipped (misfire, overlap, a pause): it will not run."""
    PIPELINE_SUCCEEDED = "pipeline_succeeded"
    """A pipeline run succeeded (a pipeline's own targets: its ``notify``)."""
    PIPELINE_FAILED = "pipeline_failed"
    """A pipeline run failed: a task failed and nothing handled it."""
    PIPELINE_CANCELLED = "pipeline_cancelled"
    """A pipeline run was cancelled and its running tasks have ended."""


RUN_EVENTS = frozenset(
    {NotifyEvent.SUCCEEDED, NotifyEvent.FAILED, NotifyEvent.DEAD, NotifyEvent.SKIPPED}
)
"""The events of a job's runs, which a job's targets may ask for; the others are a
pipeline's (decision 0025)."""


class NotificationState(StrEnum):
    """Where a notification (one event for one target) is in its delivery."""

    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"
    """It failed too many times: the notifications' own dead letter, replayable."""


MAX_NOTIFY_TARGETS = 5
"""The most notification targets a job may name."""


@dataclass(frozen=True, slots=True)
class Notification:
    """One event of a run for one of its job's notification targets (an outbox row).

    ``event_id`` is the same for every target of the event and for every delivery of
    it: the receiver deduplicates on it."""

    id: int
    tenant_id: str
    event_id: str
    event: NotifyEvent
    job_id: str
    job_name: str
    run_id: int
    scheduled_for: datetime
    attempt: int
    error: str | None
    occurred_at: datetime
    target: int
    """The index of the target in the job's ``notify`` list when the event happened."""
    url: str
    state: NotificationState
    tries: int
    """Deliveries tried so far (the claim counts one): also the claim's fence."""
    next_at: datetime
    """When it is due (pending), or until when the notifier that claimed it holds it."""
    last_error: str | None = None
    finished_at: datetime | None = None
    pipeline_run_id: str | None = None
    """A pipeline event's pipeline run; ``run_id`` is then its last task's run."""

    def envelope(self) -> dict[str, JSON]:
        """The JSON body delivered to a target and given to in-process hooks."""
        if self.pipeline_run_id is not None:
            return {
                "id": self.event_id,
                "type": self.event.value,
                "tenant_id": self.tenant_id,
                "job": {"id": self.job_id, "name": self.job_name},
                "pipeline_run": {
                    "id": self.pipeline_run_id,
                    "state": self.event.value.removeprefix("pipeline_"),
                    "created_at": self.scheduled_for.isoformat(),
                },
                "error": self.error,
                "at": self.occurred_at.isoformat(),
            }
        return {
            "id": self.event_id,
            "type": self.event.value,
            "tenant_id": self.tenant_id,
            "job": {"id": self.job_id, "name": self.job_name},
            "run": {
                "id": self.run_id,
                "scheduled_for": self.scheduled_for.isoformat(),
                "state": NOTIFY_RUN_STATES[self.event].value,
                "attempt": self.attempt,
            },
            "error": self.error,
            "at": self.occurred_at.isoformat(),
        }


NOTIFY_RUN_STATES = {
    NotifyEvent.SUCCEEDED: RunState.SUCCEEDED,
    NotifyEvent.FAILED: RunState.PENDING,
    NotifyEvent.DEAD: RunState.DEAD,
    NotifyEvent.SKIPPED: RunState.SKIPPED,
}
"""The state a run is in after each event (a failed attempt leaves it pending)."""

MAX_NOTIFY_ERROR = 500
"""The characters of a run's error a notification carries (an excerpt)."""


def notify_event_id(run_id: int, event: str, attempt: int) -> str:
    """The stable id of a run's event: the same for each target and each delivery."""
    return f"run-{run_id}-{event}-{attempt}"


class LastOutcome(StrEnum):
    """How a job's newest finished run ended (its :class:`LastRun`'s state), or
    ``none``: none has finished yet. What a list of jobs is filtered by."""

    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    NONE = "none"


class Priority(IntEnum):
    """Lower sorts first: a worker claims critical runs before low ones."""

    CRITICAL = 0
    HIGH = 1
    NORMAL = 2
    LOW = 3


class AttemptOutcome(StrEnum):
    """How one execution try ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    LOST = "lost"
    """The worker's lease expired before it reported: it crashed, froze or lost the store."""
    PERMANENT = "permanent"
    """A failure that retrying cannot fix: a PermanentError, a webhook's 4xx."""


class Backoff(StrEnum):
    FIXED = "fixed"
    EXPONENTIAL = "exponential"
    EXPONENTIAL_JITTER = "exponential_jitter"


class MisfireMode(StrEnum):
    FIRE_ONCE = "fire_once"
    SKIP = "skip"
    BACKFILL = "backfill"
    FIRE_LAST = "fire_last"


# A concurrency key's placeholders: ``{payload.a.b}``, a path into the run's payload.
CONCURRENCY_PLACEHOLDER = re.compile(r"\{payload((?:\.[A-Za-z0-9_-]+)+)\}")
MAX_CONCURRENCY_KEY = 200
"""A rendered key is at most this many characters; a longer one is shortened to a prefix
and a digest of the whole (decision 0031), so distinct keys stay distinct."""
MAX_CONCURRENCY_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class Concurrency:
    """A job's concurrency key template and limit (decision 0031): at most ``limit`` of its
    tenant's runs whose keys render the same run at once, across the cluster."""

    key: str
    limit: int

    def to_dict(self) -> dict[str, JSON]:
        return {"key": self.key, "limit": self.limit}

    @classmethod
    def from_dict(cls, d: Mapping[str, JSON]) -> Concurrency:
        limit = d["limit"]
        assert isinstance(limit, int)
        return cls(key=str(d["key"]), limit=limit)

    def render(self, payload: JSON) -> str:
        """The key of a run with ``payload``: each ``{payload.a.b}`` is replaced by that
        field (a string as is, other JSON as compact JSON text); a field that is missing,
        or null, renders as the empty string."""

        def field_of(match: re.Match[str]) -> str:
            value: JSON = payload
            for part in match.group(1)[1:].split("."):
                if not isinstance(value, dict) or part not in value:
                    return ""
                value = value[part]
            if value is None:
                return ""
            if isinstance(value, str):
                return value
            return json.dumps(value, separators=(",", ":"), sort_keys=True)

        key = CONCURRENCY_PLACEHOLDER.sub(field_of, self.key)
        if len(key) <= MAX_CONCURRENCY_KEY:
            return key
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        return f"{key[: MAX_CONCURRENCY_KEY - 33]}~{digest}"


class Overlap(StrEnum):
    ALLOW = "allow"
    SKIP = "skip"
    QUEUE = "queue"
    REPLACE = "replace"


class Delivery(StrEnum):
    AT_LEAST_ONCE = "at_least_once"
    AT_MOST_ONCE = "at_most_once"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed run is tried again. ``max_attempts`` counts the first try."""

    max_attempts: int = 3
    backoff: Backoff = Backoff.EXPONENTIAL_JITTER
    initial_delay: float = 1.0
    max_delay: float = 300.0
    budget_seconds: float | None = None

    def to_dict(self) -> dict[str, JSON]:
        return {
            "max_attempts": self.max_attempts,
            "backoff": self.backoff.value,
            "initial_delay": self.initial_delay,
            "max_delay": self.max_delay,
            "budget_seconds": self.budget_seconds,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, JSON]) -> RetryPolicy:
        return cls(
            max_attempts=int(d.get("max_attempts", 3)),
            backoff=Backoff(d.get("backoff", Backoff.EXPONENTIAL_JITTER)),
            initial_delay=float(d.get("initial_delay", 1.0)),
            max_delay=float(d.get("max_delay", 300.0)),
            budget_seconds=None if d.get("budget_seconds") is None else float(d["budget_seconds"]),
        )


MAX_MISFIRE_LIMIT = 1000
"""The most missed occurrences ``backfill`` and ``fire_last`` fire: counting a backlog's
tail costs a schedule step per occurrence kept, so the limit bounds a scheduler tick's
work (a job stored with a larger one, before this bound, is planned with this one)."""


@dataclass(frozen=True, slots=True)
class MisfirePolicy:
    """What to do with occurrences older than the job's catch-up window.

    ``limit`` caps ``backfill`` and is the N of ``fire_last``.
    """

    mode: MisfireMode = MisfireMode.FIRE_ONCE
    limit: int = 100

    def to_dict(self) -> dict[str, JSON]:
        return {"mode": self.mode.value, "limit": self.limit}

    @classmethod
    def from_dict(cls, d: Mapping[str, JSON]) -> MisfirePolicy:
        return cls(
            mode=MisfireMode(d.get("mode", MisfireMode.FIRE_ONCE)), limit=int(d.get("limit", 100))
        )


@hot_record
class Job:
    """A job definition: what to run, when, and under which policies.

    ``schedule`` and ``action`` are kept in their JSON form (see
    :mod:`cronwheel.schedule` for the schedule kinds); ``version`` bumps on every change.
    """

    id: str
    tenant_id: str
    name: str
    schedule: Mapping[str, JSON]
    action: Mapping[str, JSON]
    created_at: datetime
    updated_at: datetime
    pool: str = DEFAULT_POOL
    payload: JSON = None
    priority: Priority = Priority.NORMAL
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_seconds: float = 300.0
    misfire: MisfirePolicy = field(default_factory=MisfirePolicy)
    overlap: Overlap = Overlap.ALLOW
    jitter_seconds: float = 0.0
    catchup_seconds: float = 60.0
    delivery: Delivery = Delivery.AT_LEAST_ONCE
    state: JobState = JobState.ACTIVE
    version: int = 1
    next_fire_at: datetime | None = None
    last_fire_at: datetime | None = None
    last_run: LastRun | None = None
    """The job's newest finished run, where the reader asked for it (the service's get
    and list); None when none has finished yet, or when it was not looked up."""
    traceparent: str | None = None
    """The W3C traceparent of the request that created the job: each attempt's span links
    to it (docs/observability.md#traces). Written once at creation; not read back with
    the job."""
    notify: tuple[Mapping[str, JSON], ...] = ()
    """Its notification targets, each ``{"on": [events…], "url": …}`` (see
    :class:`NotifyEvent`); empty: none."""
    concurrency: Concurrency | None = None
    """Its concurrency key and limit (decision 0031); None: its runs are not limited."""

    @property
    def shard_key(self) -> int:
        return shard_key(self.id)


class JobOrder(StrEnum):
    """How a list of jobs is sorted: by creation (the time-ordered id), by name (code
    point order, the same on both stores) or by next fire time, ascending, or
    descending with a leading ``-``. Ties are broken by id in the same direction, so
    the order is total and a :class:`JobKey` cursor stays stable while jobs are
    inserted. Jobs that will not fire (not active: paused, completed, cancelled; or
    active without a next fire time: manual jobs) come after all the others in
    ``next_fire`` order, and so first in ``-next_fire``; a paused job keeps the
    ``next_fire_at`` a resume starts from, but sorts with them."""

    CREATED = "created"
    CREATED_DESC = "-created"
    NAME = "name"
    NAME_DESC = "-name"
    NEXT_FIRE = "next_fire"
    NEXT_FIRE_DESC = "-next_fire"

    @property
    def descending(self) -> bool:
        return self.value.startswith("-")

    @property
    def sort_key(self) -> str:
        """What it sorts by: ``created``, ``name`` or ``next_fire``."""
        return self.value.removeprefix("-")

    def key(self, job: Job) -> JobKey:
        """The cursor that starts the next page after ``job`` in this order."""
        if self.sort_key == "name":
            return JobKey(job.id, job.name)
        if self.sort_key == "next_fire":
            fires = job.state is JobState.ACTIVE
            return JobKey(job.id, job.next_fire_at if fires else None)
        return JobKey(job.id)

    def check(self, after: JobKey) -> None:
        """Raise InvalidInput naming ``after`` unless ``after`` is a position in this
        order (a name for ``name``, an instant or None for ``next_fire``, nothing but
        the id for ``created``)."""
        kind = self.sort_key
        value = after.value
        fits = (
            isinstance(value, str)
            if kind == "name"
            else (value is None or isinstance(value, datetime))
            if kind == "next_fire"
            else value is None
        )
        if not fits:
            raise InvalidInput("after", f"{value!r} is not a position in the {kind} order")


@dataclass(frozen=True, slots=True)
class JobKey:
    """A position in a list of jobs sorted by a :class:`JobOrder`: the last job's id
    and the value it sorted by (its name, or its ``next_fire_at``, None when it will
    not fire; nothing in creation order). The next page holds the jobs after it."""

    id: str
    value: str | datetime | None = None


@dataclass(frozen=True, slots=True)
class LastRun:
    """How a job's newest finished run (by ``finished_at``) ended: what a user asks of a
    job first. Derived from the runs table on read, so it lives as long as its run
    (retention deletes old history)."""

    id: int
    state: RunState
    scheduled_for: datetime
    finished_at: datetime
    attempt: int
    reason: str | None
    last_error: str | None


@hot_record
class NewRun:
    """A run to insert if absent: ``(job_id, scheduled_for)`` is unique."""

    tenant_id: str
    job_id: str
    scheduled_for: datetime
    available_at: datetime
    pool: str
    priority: Priority
    max_attempts: int
    job_version: int
    state: RunState = RunState.PENDING
    reason: str | None = None
    """Why a run was born ``skipped`` (overlap, misfire, paused) or was triggered by hand."""
    overlap: Overlap = Overlap.ALLOW
    """The job's overlap policy, copied so that a claim can apply it without a join."""
    concurrency_key: str | None = None
    """The run's rendered concurrency key (decision 0031), scoped to its tenant; None: none."""
    concurrency_limit: int | None = None


def run_key(job: Job, payload: JSON) -> tuple[str | None, int | None]:
    """The concurrency key and limit of a run of ``job`` whose payload is ``payload`` (an
    enqueued run's own, else the job's); (None, None) for a job without concurrency."""
    if job.concurrency is None:
        return None, None
    return job.concurrency.render(payload), job.concurrency.limit


@hot_record
class Run:
    """One occurrence of a job. It carries the lease and the fence."""

    id: int
    tenant_id: str
    job_id: str
    scheduled_for: datetime
    available_at: datetime
    state: RunState
    pool: str
    priority: Priority
    attempt: int
    """How many attempts have started, ever; never reset, so attempt numbers stay unique."""
    max_attempts: int
    """The attempt number after which a failure is final; a replay raises it."""
    fence: int
    job_version: int
    created_at: datetime
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    cancel_requested: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    reason: str | None = None
    last_error: str | None = None
    overlap: Overlap = Overlap.ALLOW
    payload: JSON = None
    """The run's own payload (given when it was enqueued); None: its job's payload."""
    progress: float | None = None
    """The last progress an attempt reported (0.0 to 1.0); None if none did."""
    progress_message: str | None = None
    progress_at: datetime | None = None
    """When that progress was stored (the heartbeat or completion that carried it)."""
    checkpoint: JSON = None
    """The last checkpoint an attempt stored (``ctx.checkpoint``): the next attempt gets it
    as ``ctx.checkpoint_state``. Kept across retries, rescues and replays."""
    checkpoint_at: datetime | None = None
    """When that checkpoint was stored; None: the run has none (``checkpoint`` is then
    None too, but a stored checkpoint may itself be JSON ``null``)."""
    pipeline_run_id: str | None = None
    """The pipeline run this run is a task of (decision 0025); None: not a task."""
    task: str | None = None
    """Its task's name in that pipeline run."""
    task_spec: Mapping[str, JSON] | None = None
    """A task's own action, retry policy and timeout, which stand in for its job's."""
    inputs: JSON = None
    """A task's upstream tasks' results, by task name (``ctx.inputs``)."""
    result: JSON = None
    """What the handler of its successful attempt returned (JSON); None: nothing."""
    concurrency_key: str | None = None
    """Its rendered concurrency key (decision 0031); None: not limited by a key."""
    concurrency_limit: int | None = None

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.job_id, self.scheduled_for)


@hot_record
class ClaimedRun:
    """A run a worker holds under lease, with what it needs from its job to execute it."""

    run: Run
    job_name: str
    action: Mapping[str, JSON]
    payload: JSON
    retry: RetryPolicy
    timeout_seconds: float
    delivery: Delivery
    traceparent: str | None = None
    """Its job's :attr:`Job.traceparent`: what the attempt's span links to."""


@hot_record
class Attempt:
    """One execution try of a run: the unit of history."""

    id: int
    tenant_id: str
    run_id: int
    job_id: str
    attempt: int
    worker_id: str | None
    fence: int
    started_at: datetime | None
    finished_at: datetime
    outcome: AttemptOutcome
    lag_seconds: float | None = None
    """How late the attempt started behind the instant it was due (``available_at``)."""
    error_class: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    """The HTTP status a webhook target answered; None for handlers and for requests
    that got no answer (timeout, connection refused)."""
    output: str | None = None
    """A command's exit code and the tails of its stdout and stderr, as JSON text
    (``{"exit_code": 0, "stdout": "...", "stderr": "..."}``); None for other actions."""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    tenant_id: str
    entity: str
    entity_id: str
    action: str
    actor: str
    at: datetime
    details: Mapping[str, JSON] | None = None


MAX_CHECKPOINT_BYTES = 64 * 1024
"""The largest checkpoint a run may store: its JSON text, UTF-8 encoded. A checkpoint is
where to resume (an offset, a cursor, the ids done), not the work's data: keep that in
your own storage and checkpoint its key."""

MAX_PROGRESS_MESSAGE = 200
"""The longest progress message (characters); a longer one is cut, ending with "…"."""


def checkpoint_text(state: JSON, *, field: str = "checkpoint") -> str:
    """``state`` as the compact JSON text a store keeps, or :class:`InvalidInput` (naming
    ``field``) if it is not JSON or is over :data:`MAX_CHECKPOINT_BYTES`."""
    try:
        text = json.dumps(state, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(
            field, f"must be JSON (dicts, lists, str, numbers, bool, None): {exc}"
        ) from None
    size = len(text.encode())
    if size > MAX_CHECKPOINT_BYTES:
        raise InvalidInput(
            field,
            f"is {size} bytes of JSON, over the limit of {MAX_CHECKPOINT_BYTES}: checkpoint"
            " where to resume (an offset, a cursor), and keep the data itself elsewhere",
        )
    return text


def progress_report(fraction: float, message: str | None) -> tuple[float, str | None]:
    """A progress report checked: ``fraction`` a finite number in [0, 1] (else
    :class:`InvalidInput` naming ``progress``), ``message`` cut to
    :data:`MAX_PROGRESS_MESSAGE` characters."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise InvalidInput("progress", f"must be a number from 0 to 1, not {fraction!r}")
    if not 0.0 <= fraction <= 1.0:  # NaN fails this too
        raise InvalidInput("progress", f"must be from 0 to 1 (a fraction), not {fraction!r}")
    if message is not None:
        message = str(message)
        if len(message) > MAX_PROGRESS_MESSAGE:
            message = message[: MAX_PROGRESS_MESSAGE - 1] + "…"
    return float(fraction), message


def idempotency_key(job_id: str, scheduled_for: datetime) -> str:
    """The key a target uses to absorb a duplicate: stable across attempts and replays."""
    return f"{job_id}:{scheduled_for.isoformat()}"


def shard_key(job_id: str) -> int:
    """A stable hash of a job id; a scheduler owns a job when ``shard_key % S`` is its shard."""
    return zlib.crc32(job_id.encode()) & 0x7FFFFFFF


def new_id() -> str:
    """A UUIDv7 string: unguessable, and time-ordered so that a cursor over ids is a
    stable cursor over creation order. Within one millisecond a 12-bit counter keeps ids
    from one process strictly increasing (RFC 9562, method 1)."""
    return new_ids(1)[0]


def new_ids(count: int) -> list[str]:
    """``count`` ids as :func:`new_id` makes them, strictly increasing, for the price of
    one lock and one read of the OS's randomness: a bulk create needs thousands at once."""
    global _last_seq
    # The millisecond and the counter read as one number (ms << 12 | counter), so that the
    # counter's overflow carries into the next millisecond by itself.
    with _id_lock:
        seq = max(time.time_ns() // 1_000_000 << 12, _last_seq + 1)
        _last_seq = seq + count - 1
    randomness = os.urandom(8 * count).hex()
    ids = []
    prefix_ms, prefix = -1, ""
    for i in range(count):
        ms, counter = divmod(seq + i, 1 << 12)
        if ms != prefix_ms:
            stamp = f"{ms & _MS_MASK:012x}"
            prefix_ms, prefix = ms, f"{stamp[:8]}-{stamp[8:]}-7"
        rand = randomness[16 * i : 16 * i + 16]
        # The variant (0b10) takes the top two bits of the 62 random ones' first digit.
        ids.append(f"{prefix}{counter:03x}-{_VARIANT[rand[0]]}{rand[1:4]}-{rand[4:]}")
    return ids


ID_PREFIX_PATTERN = r"^-*(?:[0-9A-Fa-f]-*){1,32}$"
"""What :func:`id_prefix_range` takes, for the OpenAPI document: 1 to 32 hex digits in
any case, dashes anywhere."""


def id_prefix_range(prefix: str) -> tuple[str, str]:
    """The smallest and largest ids that start with ``prefix`` (hex digits, dashes
    optional, any case): a prefix lookup becomes a range scan of the id index, on both
    stores. Raises InvalidInput naming ``id_prefix`` for anything that is not one."""
    digits = prefix.replace("-", "").lower()
    if not 0 < len(digits) <= 32 or any(c not in "0123456789abcdef" for c in digits):
        raise InvalidInput("id_prefix", f"{prefix!r} is not the start of a job id (hex digits)")

    def shaped(hex32: str) -> str:
        return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"

    return shaped(digits.ljust(32, "0")), shaped(digits.ljust(32, "f"))


_id_lock = threading.Lock()
_last_seq = 0
_MS_MASK = (1 << 48) - 1
_VARIANT = {digit: "89ab"[int(digit, 16) & 0b11] for digit in "0123456789abcdef"}


class Role(StrEnum):
    """What an API key may do; see docs/api.md for the matrix."""

    ADMIN = "admin"
    WRITE = "write"
    READ = "read"
    WORKER = "worker"


MAX_CLAIM_WEIGHT = 1000.0
"""The largest claim weight a tenant may have (the schema checks it too): a share of at
most a thousand to one keeps every tenant's share of a batch at least a run."""


@dataclass(frozen=True, slots=True)
class Tenant:
    id: str
    name: str
    created_at: datetime
    max_jobs: int | None = None
    """Live jobs (not cancelled, not completed) the tenant may have; None: no limit."""
    max_creates_per_second: float | None = None
    claim_weight: float = 1.0
    """The tenant's share of every claim, relative to the other tenants waiting in the
    same pools (decision 0028): 2 takes twice the runs of a tenant of weight 1."""
    max_running: int | None = None
    """Runs of the tenant in flight at once across the cluster; None: no cap. Runs above
    it wait, pending (decision 0028)."""


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A bearer token's record. Only the SHA-256 of the token is ever stored."""

    id: str
    tenant_id: str
    key_hash: str
    role: Role
    created_at: datetime
    name: str | None = None
    revoked_at: datetime | None = None


MAINTENANCE_LEASE = -1
"""The shard-lease row whose holder is the one process doing maintenance."""

SEEN_WINDOW = timedelta(seconds=60)
"""A worker process heard from within this window is live: the API's worker list, ``status``
and the dashboard count it (its heartbeat comes every few seconds)."""


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """A worker process as it announces itself with every heartbeat."""

    id: str
    tenant_id: str
    host: str
    pools: tuple[str, ...]
    capacity: int
    in_flight: int
    started_at: datetime
    last_seen_at: datetime
    brokers: Mapping[str, str] = field(default_factory=dict)
    """The brokers the worker's operator named: name → kind (``{"events": "nats"}``),
    never their URLs. The API refuses a publish job naming a broker no live worker of
    its pool names (decision 0049)."""
    commands: tuple[str, ...] = ()
    """The patterns of the executables its operator allows it to run (``--allow-command``):
    the API refuses a command job that no live worker of its pool would run."""

    def serves(self, tenant_id: str, pool: str) -> bool:
        """Whether runs of ``tenant_id`` in ``pool`` can reach this worker: an in-process
        worker serves every tenant's pools, a remote one only its own tenant's."""
        return pool in self.pools and self.tenant_id in (SHARED_WORKERS, tenant_id)


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """An API response kept under its Idempotency-Key."""

    tenant_id: str
    key: str
    request_hash: str
    status: int
    body: JSON
    created_at: datetime


SCHEDULER_TENANT = "@scheduler"
"""Schedulers announce themselves in the process registry under this reserved tenant,
so that each can count the live ones and take its share of the shards."""

SHARED_WORKERS = "@shared"
"""In-process workers (``cronwheel worker``, ``cronwheel dev``) serve every tenant's
pools: they announce themselves under this reserved tenant, and every tenant sees them
(without host or load) beside its own remote workers."""


@dataclass(frozen=True, slots=True)
class ShardLease:
    """One scheduler's hold on a slice of the job space. ``epoch`` grows with every
    change of holder and guards every write the holder makes for the shard."""

    shard: int
    holder: str | None
    epoch: int
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class ShardGuard:
    """What a scheduler believes it owns: writes for other shards, or under an older
    epoch, or past the lease's expiry, are refused."""

    holder: str
    epochs: Mapping[int, int]
    shard_count: int
