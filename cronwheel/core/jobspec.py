"""What a user writes to create or change a job, validated before it reaches the store.

One pydantic model serves the Python API, the HTTP API and the CLI, so a bad field gets
the same message everywhere: :class:`~cronwheel.errors.InvalidInput` naming the field
(``retry.max_attempts``, ``schedule.cron``…) and the reason.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError
from pydantic_core.core_schema import SerializerFunctionWrapHandler

from cronwheel.core.brokers import BROKER_NAME, MAX_TARGET
from cronwheel.core.model import (
    CONCURRENCY_PLACEHOLDER,
    DEFAULT_POOL,
    JSON,
    MAX_CONCURRENCY_KEY,
    MAX_CONCURRENCY_LIMIT,
    MAX_MISFIRE_LIMIT,
    MAX_NOTIFY_TARGETS,
    RUN_EVENTS,
    Backoff,
    Concurrency,
    Delivery,
    Job,
    JobState,
    MisfireMode,
    MisfirePolicy,
    NotifyEvent,
    Overlap,
    Priority,
    RetryPolicy,
    new_id,
    new_ids,
)
from cronwheel.core.text import NAME_PATTERN, check_name
from cronwheel.errors import InvalidInput
from cronwheel.schedule import (
    CronSchedule,
    DelaySchedule,
    ImmediateSchedule,
    ManualSchedule,
    OnceSchedule,
    Schedule,
    first_fire,
    resolve,
    schedule_from_dict,
    schedule_to_dict,
)

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_HEADERS = 32
MAX_HEADERS_BYTES = 8 * 1024
"""A webhook's own headers: at most this many, names and values together this big."""
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$")  # RFC 9110 token
_HEADER_VALUE = re.compile(r"^[\x20-\x7e\t]*$")  # printable ASCII: no CR, LF or NUL
# Names a job cannot set, in any case (cronwheel.actions.webhook sends these itself).
_RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "idempotency-key",
    }
)


def header_key(name: str) -> str:
    """A header's name as a receiver may match it: case-folded, ``_`` read as ``-`` (CGI,
    PHP, nginx's ``underscores_in_headers``, many frameworks): ``Cronwheel_Tenant_Id``
    is ``cronwheel-tenant-id`` there."""
    return name.replace("_", "-").casefold()


def is_reserved_header(name: str) -> bool:
    """Whether a job's header named ``name`` would shadow, or sit beside, one cronwheel
    sends (``Cronwheel-*``, ``Idempotency-Key``) or one that frames the request, in any
    case and with ``_`` for ``-``."""
    key = header_key(name)
    return key in _RESERVED_HEADERS or key.startswith("cronwheel-")


PAST_TOLERANCE = timedelta(seconds=60)
"""A one-time job may be due this far in the past (clock skew, a slow client); older is
refused as a mistake rather than silently fired late."""

MIN_TIMEOUT_SECONDS = 0.01
"""The shortest timeout a job may have: a shorter one could only ever time out."""
MAX_BUDGET_SECONDS = 366 * 86_400
"""The longest retry budget: a year from the scheduled instant (every number that reaches
time arithmetic is bounded; timeouts are at most 7 days, delays at most 7 days too)."""

_STRICT = ConfigDict(extra="forbid", frozen=True)
Name = Annotated[
    str,
    # The pattern is the document's; check_name enforces it, naming the character.
    Field(min_length=1, max_length=200, json_schema_extra={"pattern": NAME_PATTERN}),
    AfterValidator(check_name),
]
"""A name a person reads (a job's, a handler's, a pipeline's, a tenant's, a key's): no
control or bidi character (cronwheel.core.text)."""
PoolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]


def whole_number(value: object) -> object:
    """JSON has one kind of number: ``3.0`` is the integer 3, as JSON Schema's
    ``integer`` has it (and as many encoders write a whole float); a fraction, a string
    or a boolean is still no integer (a pydantic before-validator)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Integer = Annotated[int, BeforeValidator(whole_number), Field(strict=True)]
"""An integer field of a request: a JSON number with no fraction, nothing else."""


class RetrySpec(BaseModel):
    model_config = _STRICT
    max_attempts: Integer = Field(3, ge=1, le=1000, strict=True)
    backoff: Backoff = Backoff.EXPONENTIAL_JITTER
    initial_delay: float = Field(1.0, ge=0, le=86_400, strict=True)
    max_delay: float = Field(300.0, ge=0, le=7 * 86_400, strict=True)
    budget_seconds: float | None = Field(None, gt=0, le=MAX_BUDGET_SECONDS, strict=True)

    def policy(self) -> RetryPolicy:
        return RetryPolicy(**self.model_dump())


class MisfireSpec(BaseModel):
    model_config = _STRICT
    mode: MisfireMode = MisfireMode.FIRE_ONCE
    limit: Integer = Field(100, ge=1, le=MAX_MISFIRE_LIMIT, strict=True)

    def policy(self) -> MisfirePolicy:
        return MisfirePolicy(self.mode, self.limit)


class WebhookSpec(BaseModel):
    model_config = _STRICT
    type: Literal["webhook"]
    url: Annotated[str, Field(max_length=2048)]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    body: JSON = None
    secret_headers: list[str] = Field(
        default_factory=list,
        max_length=MAX_HEADERS,
        description="Headers to store encrypted and show as *** besides those whose name"
        " says they are secret (docs/security.md#secrets-at-rest).",
    )

    @field_validator("secret_headers")
    @classmethod
    def _secret_headers_named(cls, names: list[str], info: ValidationInfo) -> list[str]:
        named = {name.lower() for name in info.data.get("headers") or {}}
        for name in names:
            if name.lower() not in named:
                raise ValueError(f"{name!r} is not one of the action's headers")
        return names

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # An action that lists no secret header is stored as it always was.
        dumped: dict[str, Any] = handler(self)
        if not dumped.get("secret_headers"):
            dumped.pop("secret_headers", None)
        return dumped

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        return _check_http_url(url)

    @field_validator("headers")
    @classmethod
    def _valid_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        if len(headers) > MAX_HEADERS:
            raise ValueError(f"has {len(headers)} headers; the limit is {MAX_HEADERS}")
        size = sum(len(k) + len(v) for k, v in headers.items())
        if size > MAX_HEADERS_BYTES:
            raise ValueError(f"are {size} bytes; the limit is {MAX_HEADERS_BYTES} (8 KiB)")
        seen: set[str] = set()
        for name, value in headers.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"{name!r}: a header name is printable ASCII, no spaces")
            folded = header_key(name)
            if is_reserved_header(name):
                raise ValueError(f"{name}: cronwheel sets this header itself; remove it")
            if folded in seen:
                raise ValueError(
                    f"{name}: given twice (header names ignore case, and receivers read _ as -)"
                )
            seen.add(folded)
            if not _HEADER_VALUE.match(value):
                raise ValueError(f"{name}: a header value is printable ASCII, no CR or LF")
        return headers

    @field_validator("body")
    @classmethod
    def _small_body(cls, body: JSON) -> JSON:
        if body is None:
            return body
        size = len(body.encode()) if isinstance(body, str) else payload_size(body)
        if size > MAX_PAYLOAD_BYTES:
            # too_large: the API answers 413, as for a payload (cronwheel.api.inputs)
            raise PydanticCustomError(
                "too_large",
                "is {size} bytes; the limit is {limit} (256 KiB)",
                {"size": size, "limit": MAX_PAYLOAD_BYTES},
            )
        return body


def _check_http_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an absolute http:// or https:// URL")
    return url


MAX_ARGV = 256
MAX_ARGV_BYTES = 64 * 1024
MAX_ENV = 64
MAX_ENV_BYTES = 32 * 1024
"""A command's arguments and environment: at most this many, this big all together."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")
_COMMAND_NAME = re.compile(r"^[^/\x00]{1,255}$")


def refused_env_name(name: str) -> str | None:
    """Why a command's environment may not set ``name`` (None: it may). cronwheel sets
    ``CRONWHEEL_*`` itself; ``PATH`` is the worker's (the operator's allow-list names
    executables found on it); ``LD_*`` and ``DYLD_*`` would load code of the tenant's
    choosing into an allowed executable."""
    upper = name.upper()
    if upper.startswith("CRONWHEEL_"):
        return "cronwheel sets CRONWHEEL_* variables itself; use another name"
    if upper == "PATH":
        return "the worker's operator sets PATH (it decides which executables run)"
    if upper.startswith(("LD_", "DYLD_")):
        return "variables of the dynamic loader are refused (they would load other code)"
    return None


class CommandSpec(BaseModel):
    """A command line a worker runs as a child process (cronwheel.actions.command): no
    shell unless ``argv`` names one. The worker runs it only if its operator allowed the
    executable (``cronwheel worker --allow-command PATTERN``)."""

    model_config = _STRICT
    type: Literal["command"]
    argv: Annotated[list[str], Field(max_length=MAX_ARGV)]
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Annotated[str, Field(max_length=4096)] | None = None
    timeout_seconds: float | None = Field(None, ge=MIN_TIMEOUT_SECONDS, le=7 * 86_400, strict=True)
    permanent_exit_codes: Annotated[
        list[Annotated[int, Field(strict=True)]], Field(max_length=255)
    ] = Field(
        default_factory=list,
        description="Exit codes that retrying cannot fix: the run goes to the dead letter.",
    )
    secret_env: list[str] = Field(
        default_factory=list,
        max_length=MAX_ENV,
        description="Variables to store encrypted and show as *** besides those whose name"
        " says they are secret (docs/actions.md#secrets).",
    )

    @field_validator("argv")
    @classmethod
    def _valid_argv(cls, argv: list[str]) -> list[str]:
        if not argv:
            raise ValueError(
                'is empty: it names the program to run, then its arguments (["pg_dump",'
                ' "-f", "/backups/db.sql"])'
            )
        for i, arg in enumerate(argv):
            if "\x00" in arg:
                raise ValueError(f"argument {i} holds a NUL character")
        size = sum(len(a.encode()) for a in argv)
        if size > MAX_ARGV_BYTES:
            raise ValueError(f"is {size} bytes; the limit is {MAX_ARGV_BYTES} (64 KiB)")
        program = argv[0]
        if program.startswith("/"):
            if posixpath.normpath(program) != program or program.endswith("/"):
                raise ValueError(
                    f"argv[0] {program!r} is not a plain absolute path (no '..', '.', '//'"
                    " or trailing '/'): write the path the operator allowed"
                )
        elif not _COMMAND_NAME.match(program):
            raise ValueError(
                f"argv[0] {program!r} must be a command name found on the worker's PATH"
                " (pg_dump) or an absolute path (/usr/bin/pg_dump), not a relative path"
            )
        return argv

    @field_validator("env")
    @classmethod
    def _valid_env(cls, env: dict[str, str]) -> dict[str, str]:
        if len(env) > MAX_ENV:
            raise ValueError(f"has {len(env)} variables; the limit is {MAX_ENV}")
        size = sum(len(k.encode()) + len(v.encode()) for k, v in env.items())
        if size > MAX_ENV_BYTES:
            raise ValueError(f"is {size} bytes; the limit is {MAX_ENV_BYTES} (32 KiB)")
        for name, value in env.items():
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name!r}: a variable name is letters, digits and '_'")
            why = refused_env_name(name)
            if why is not None:
                raise ValueError(f"{name}: {why}")
            if "\x00" in value:
                raise ValueError(f"{name}: a value may not hold a NUL character")
        return env

    @field_validator("cwd")
    @classmethod
    def _absolute_cwd(cls, cwd: str | None) -> str | None:
        if cwd is not None and (not cwd.startswith("/") or "\x00" in cwd):
            raise ValueError("must be an absolute path on the worker's machine")
        return cwd

    @field_validator("permanent_exit_codes")
    @classmethod
    def _exit_codes(cls, codes: list[int]) -> list[int]:
        for code in codes:
            if not 1 <= code <= 255:
                raise ValueError(f"{code!r} is not an exit code that fails (1 to 255)")
        return codes

    @field_validator("secret_env")
    @classmethod
    def _secret_env_named(cls, names: list[str], info: ValidationInfo) -> list[str]:
        named = set(info.data.get("env") or {})
        for name in names:
            if name not in named:
                raise ValueError(f"{name!r} is not one of the action's env variables")
        return names

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # What the user left out is not stored: a job reads back as it was written.
        dumped: dict[str, Any] = handler(self)
        for key in ("env", "permanent_exit_codes", "secret_env"):
            if not dumped.get(key):
                dumped.pop(key, None)
        for key in ("cwd", "timeout_seconds"):
            if dumped.get(key) is None:
                dumped.pop(key, None)
        return dumped


def with_command_timeout(data: Any) -> Any:
    """A job's (or a task's) fields with its ``timeout_seconds`` taken from its command's
    own when it gives none: a command given an hour is not stopped by the 300 s default."""
    if not isinstance(data, dict) or "timeout_seconds" in data:
        return data
    action = data.get("action")
    if not isinstance(action, dict) or action.get("type") != "command":
        return data
    own = action.get("timeout_seconds")
    if isinstance(own, int | float) and not isinstance(own, bool):
        return {**data, "timeout_seconds": own}
    return data


def check_command_timeout(action: Mapping[str, Any], timeout_seconds: float) -> None:
    """InvalidInput if a command's own timeout is longer than its job's, which would
    stop the run first."""
    own = action.get("timeout_seconds") if action.get("type") == "command" else None
    if own is not None and own > timeout_seconds:
        raise InvalidInput(
            "action.timeout_seconds",
            f"is {own:g} s, longer than the job's timeout_seconds ({timeout_seconds:g} s),"
            " which would stop the run first: give the job that timeout, or leave its"
            " timeout_seconds out (it then takes the command's)",
        )


class ConcurrencySpec(BaseModel):
    """At most ``limit`` runs at once, across the cluster, of the tenant's runs whose
    ``key`` renders the same (decision 0031). ``{payload.a.b}`` in the key is replaced by
    that field of the run's payload when the run is created."""

    model_config = _STRICT
    key: Annotated[str, Field(min_length=1, max_length=MAX_CONCURRENCY_KEY)]
    limit: Integer = Field(1, ge=1, le=MAX_CONCURRENCY_LIMIT, strict=True)

    @field_validator("key")
    @classmethod
    def _placeholders(cls, key: str) -> str:
        rest = CONCURRENCY_PLACEHOLDER.sub("", key)
        if "{" in rest or "}" in rest:
            bad = rest[rest.find("{") if "{" in rest else rest.find("}") :][:40]
            raise ValueError(
                f"has a brace that is not a placeholder (near {bad!r}): the only"
                " placeholders are {payload.field} and {payload.field.subfield}, letters,"
                " digits, '_' and '-' in each name"
            )
        return key

    def policy(self) -> Concurrency:
        return Concurrency(key=self.key, limit=self.limit)


class NotifyTargetSpec(BaseModel):
    """A notification target: which events of the job's runs to POST, and where."""

    model_config = _STRICT
    on: Annotated[list[NotifyEvent], Field(min_length=1, max_length=len(NotifyEvent))]
    url: Annotated[str, Field(max_length=2048)]

    @field_validator("on")
    @classmethod
    def _distinct(cls, events: list[NotifyEvent]) -> list[NotifyEvent]:
        if len(set(events)) != len(events):
            raise ValueError("names an event twice")
        for event in events:
            if event not in RUN_EVENTS:
                raise ValueError(
                    f"{event.value} is a pipeline's event: name it in the pipeline's notify"
                )
        return events

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        return _check_http_url(url)


class HandlerSpec(BaseModel):
    model_config = _STRICT
    type: Literal["handler"]
    name: Name


class PublishSpec(BaseModel):
    """A message on a broker the pool's workers name (``--broker NAME=URL``): ``to`` is
    a subject (NATS), ``exchange/routing key`` (RabbitMQ) or a stream (Redis), checked
    against the broker's kind when a live worker names it (docs/actions.md#publish)."""

    model_config = _STRICT
    type: Literal["publish"]
    broker: Annotated[str, Field(max_length=64)]
    # Shown in logs, errors and terminals as a name is: no control or bidi character.
    to: Annotated[str, Field(min_length=1, max_length=MAX_TARGET), AfterValidator(check_name)]
    body: JSON = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # No body: the message is the run's envelope, and the action is stored without one.
        dumped: dict[str, Any] = handler(self)
        if dumped.get("body") is None:
            dumped.pop("body", None)
        return dumped

    @field_validator("broker")
    @classmethod
    def _broker_name(cls, name: str) -> str:
        if not BROKER_NAME.match(name):
            raise ValueError(
                f"{name!r} is not a broker name: the NAME of a worker's --broker NAME=URL,"
                " 1-64 letters, digits, '_', '.' or '-'"
            )
        return name

    @field_validator("body")
    @classmethod
    def _small_body(cls, body: JSON) -> JSON:
        return WebhookSpec._small_body(body)


class PipelineActionSpec(BaseModel):
    """A job whose runs start a pipeline run each (decision 0025): the job brings the
    schedule, pause, overlap and misfire policies; the pipeline its tasks."""

    model_config = _STRICT
    type: Literal["pipeline"]
    pipeline_id: Annotated[
        str, Field(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    ]


class JobSpec(BaseModel):
    """A job as a user describes it. Defaults are the documented policy defaults."""

    model_config = _STRICT
    name: Name
    schedule: dict[str, Any]
    action: Annotated[
        WebhookSpec | HandlerSpec | PublishSpec | PipelineActionSpec | CommandSpec,
        Field(discriminator="type"),
    ]
    pool: PoolName = DEFAULT_POOL
    payload: JSON = None
    priority: Literal["critical", "high", "normal", "low"] = "normal"
    retry: RetrySpec = Field(default_factory=RetrySpec)  # type: ignore[arg-type]
    timeout_seconds: float = Field(300.0, ge=MIN_TIMEOUT_SECONDS, le=7 * 86_400, strict=True)
    misfire: MisfireSpec = Field(default_factory=MisfireSpec)  # type: ignore[arg-type]
    overlap: Overlap = Overlap.ALLOW
    jitter_seconds: float = Field(0.0, ge=0, le=86_400, strict=True)
    catchup_seconds: float = Field(60.0, ge=0, le=365 * 86_400, strict=True)
    delivery: Delivery = Delivery.AT_LEAST_ONCE
    notify: Annotated[list[NotifyTargetSpec], Field(max_length=MAX_NOTIFY_TARGETS)] = Field(
        default_factory=list
    )
    concurrency: ConcurrencySpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _command_timeout(cls, data: Any) -> Any:
        return with_command_timeout(data)

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, schedule: dict[str, Any]) -> dict[str, Any]:
        try:
            return schedule_to_dict(schedule_from_dict(schedule))
        except InvalidInput as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("payload")
    @classmethod
    def _small_payload(cls, payload: JSON) -> JSON:
        size = payload_size(payload)
        if size > MAX_PAYLOAD_BYTES:
            raise ValueError(f"is {size} bytes; the limit is {MAX_PAYLOAD_BYTES} (256 KiB)")
        return payload

    @classmethod
    def parse(cls, data: dict[str, Any]) -> JobSpec:
        """Validate user input; raise InvalidInput naming the first bad field."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise invalid_input(exc) from None

    def to_job(
        self,
        *,
        tenant_id: str,
        now: datetime,
        job_id: str | None = None,
        must_fire: bool = True,
    ) -> Job:
        """A new job at version 1, its schedule pinned (delays, interval anchors) at ``now``.
        ``must_fire``: a schedule with no occurrence left is refused (see :func:`_plan`);
        a job that is only being edited, its schedule unchanged, passes False."""
        action = self.action.model_dump()
        check_command_timeout(action, self.timeout_seconds)
        parsed = schedule_from_dict(self.schedule)
        schedule, state, next_fire_at, last_fire_at = _plan(parsed, now, must_fire=must_fire)
        return Job(
            id=job_id or new_id(),
            tenant_id=tenant_id,
            name=self.name,
            schedule=schedule,
            action=action,
            created_at=now,
            updated_at=now,
            pool=self.pool,
            payload=self.payload,
            priority=Priority[self.priority.upper()],
            retry=self.retry.policy(),
            timeout_seconds=self.timeout_seconds,
            misfire=self.misfire.policy(),
            overlap=self.overlap,
            jitter_seconds=self.jitter_seconds,
            catchup_seconds=self.catchup_seconds,
            delivery=self.delivery,
            state=state,
            next_fire_at=next_fire_at,
            last_fire_at=last_fire_at,
            notify=tuple(t.model_dump(mode="json") for t in self.notify),
            concurrency=None if self.concurrency is None else self.concurrency.policy(),
        )


_Plan = tuple[Mapping[str, Any], JobState, datetime | None, datetime | None]


def _plan(parsed: Schedule, now: datetime, *, must_fire: bool = True) -> _Plan:
    """A new job's schedule pinned at ``now``, its state, next and last fire times.

    With ``must_fire``, a schedule that has no occurrence left is refused (issue 17,
    defect 7): such a job would stay ``active`` with no next run, forever, counted against
    its tenant's ``max_jobs``. A manual job has no occurrences by design and is exempt."""
    schedule = resolve(parsed, now)
    if isinstance(schedule, OnceSchedule) and schedule.at < now - PAST_TOLERANCE:
        raise InvalidInput("schedule.at", f"{schedule.at.isoformat()} is in the past")
    first = None if isinstance(schedule, ManualSchedule) else first_fire(schedule, now)
    if must_fire and first is None and not isinstance(schedule, ManualSchedule):
        raise never_fires(parsed, schedule, now)
    if isinstance(schedule, ImmediateSchedule):
        return schedule_to_dict(schedule), JobState.COMPLETED, None, now
    return schedule_to_dict(schedule), JobState.ACTIVE, first, None


_NEVER = "the job would never fire"


def never_fires(parsed: Schedule, schedule: Schedule, now: datetime) -> InvalidInput:
    """The 422 for a schedule with no occurrence at or after ``now`` (``parsed`` as the
    client sent it, ``schedule`` as :func:`resolve` pinned it), naming the field to fix."""
    assert not isinstance(schedule, ManualSchedule)
    start = now if schedule.start_at is None else max(now, schedule.start_at)
    end = schedule.end_at
    if end is not None and end < start:
        return InvalidInput("schedule.end_at", f"{end.isoformat()} is in the past: {_NEVER}")
    if isinstance(parsed, DelaySchedule):
        return InvalidInput("schedule.seconds", f"fires after end_at ({_iso(end)}): {_NEVER}")
    if isinstance(schedule, OnceSchedule):
        if schedule.start_at is not None and schedule.at < schedule.start_at:
            reason = f"is before start_at ({schedule.start_at.isoformat()})"
        else:
            reason = f"is after end_at ({_iso(end)})"
        return InvalidInput("schedule.at", f"{schedule.at.isoformat()} {reason}: {_NEVER}")
    if isinstance(schedule, CronSchedule):
        window = "" if end is None else f" before end_at ({_iso(end)})"
        if schedule.start_at is not None and schedule.start_at > now:
            window = f" from start_at ({schedule.start_at.isoformat()}){window and ' on,'}{window}"
        return InvalidInput(
            "schedule.cron",
            f"'{schedule.cron}' matches no date{window} (a day that does not exist, such"
            f" as 31 February?): {_NEVER}",
        )
    return InvalidInput(
        "schedule.end_at", f"{_iso(end)} comes before the first occurrence: {_NEVER}"
    )


def _iso(instant: datetime | None) -> str:
    return "none" if instant is None else instant.isoformat()


def check_can_follow(schedule: Mapping[str, Any], now: datetime) -> None:
    """Refuse a schedule that an existing job cannot take by PATCH: one with no
    occurrence left (the job would stay active with nothing to run), and ``immediate``,
    which a job only has from its creation (its one run is made with it)."""
    parsed = schedule_from_dict(schedule)
    if isinstance(parsed, ImmediateSchedule):
        raise InvalidInput(
            "schedule.kind",
            "an existing job cannot become immediate (its run is made when it is created):"
            " trigger it to run it now, or create an immediate job",
        )
    _plan(parsed, now)


def check_plannable(schedule: Schedule, now: datetime) -> None:
    """Raise what creating a job with ``schedule`` at ``now`` would raise once the
    schedule itself is valid (a one-time job in the past; ``ArithmeticError`` for
    occurrences out of range), so a preview refuses exactly what a create does."""
    _plan(schedule, now)


def build_jobs(specs: Sequence[Any], *, tenant_id: str, now: datetime) -> list[Job]:
    """The jobs ``[JobSpec.parse(s).to_job(tenant_id=…, now=now) for s in specs]`` makes,
    the same errors included, without validating and planning the same thing again and
    again: a batch of 10,000 jobs mostly repeats a few schedules and one action.

    What a spec holds besides its name and schedule is validated once per distinct value
    (by ``JobSpec`` itself: the first spec with it takes the full path), and each distinct
    schedule is validated and planned once. JobSpec's fields are validated independently
    of each other, so a spec whose name, schedule and rest each passed is valid as a
    whole; anything the shortcut does not recognise, or rejects, takes the full path,
    which raises the error the spec deserves. Jobs built from equal values share their
    (read-only) ``schedule`` and ``action`` mappings; ``payload`` is each spec's own.
    """
    batch = _Batch(tenant_id, now)
    return [
        batch.job(spec, job_id) for spec, job_id in zip(specs, new_ids(len(specs)), strict=True)
    ]


class _Uncacheable(Exception):
    """A value the batch cannot key (its repr raised): its spec takes the full path."""


# What a job takes from its spec besides its name, schedule and payload (see _Batch.job).
_Rest = tuple[
    Mapping[str, Any],
    str,
    Priority,
    RetryPolicy,
    float,
    MisfirePolicy,
    Overlap,
    float,
    float,
    Delivery,
    tuple[Mapping[str, Any], ...],
    Concurrency | None,
]
_NOT_REST = ("name", "schedule", "payload")
_MAX_NAME = 200  # as Name says
_Items = list[tuple[str, Any]]
_T = TypeVar("_T")


class _Batch:
    """The caches of one :func:`build_jobs` call. They are sound only there: ``now`` is
    fixed, and no spec can change while the call (which never awaits) reads them.

    A value is looked up by its ``repr`` and then compared (``==``) with the value that
    filled the entry: the text tells apart what equality does not (``1``, ``1.0`` and
    ``True``; ``0.0`` and ``-0.0``), equality what a custom ``__repr__`` could blur. A
    value equal to another in both ways is one that ``JobSpec`` makes the same of; and
    whatever matches takes what ``JobSpec`` made of the value that filled the entry.
    """

    def __init__(self, tenant_id: str, now: datetime) -> None:
        self.tenant_id = tenant_id
        self.now = now
        self.rests: dict[str, tuple[_Items, _Rest]] = {}
        self.plans: dict[str, tuple[object, _Plan]] = {}
        # The previous shortcut's objects (rest items, schedule) and what they made; the
        # tuple holds them, so their ids cannot be reused within the call.
        self.last: tuple[_Items, object, _Rest, _Plan] | None = None

    def job(self, spec: Any, job_id: str) -> Job:
        job = self._shortcut(spec, job_id)
        if job is None:
            job = JobSpec.parse(spec).to_job(tenant_id=self.tenant_id, now=self.now, job_id=job_id)
            self._learn(spec, job)
        return job

    def _shortcut(self, spec: Any, job_id: str) -> Job | None:
        """The job, if every part of ``spec`` was seen valid before (the schedule may be
        new: it is checked here); None sends the spec down the full path."""
        if type(spec) is not dict:
            return None
        name = spec.get("name")
        if type(name) is not str or not 0 < len(name) <= _MAX_NAME:
            return None
        if not name.isascii() and not _utf8(name):
            return None
        if not name.isprintable():  # perhaps a control character: the full path says
            return None
        items = _rest_items(spec)
        schedule = spec.get("schedule")
        last = self.last
        if last is not None and schedule is last[1] and _same_objects(items, last[0]):
            # The very objects of the spec before (a caller's loop sharing one schedule
            # and one action): no key to make.
            rest, plan = last[2], last[3]
        else:
            try:
                found = self._rest(items)
                if found is None:
                    return None
                rest = found
                planned = self._schedule_plan(schedule)
            except Exception:  # the full path names the error, or finds there is none
                return None
            if planned is None:
                return None
            plan = planned
            self.last = (items, schedule, rest, plan)
        payload = spec.get("payload")
        if payload is not None and not _small(payload):
            return None
        schedule, state, next_fire_at, last_fire_at = plan
        (
            action,
            pool,
            priority,
            retry,
            timeout,
            misfire,
            overlap,
            jitter,
            catchup,
            delivery,
            notify,
            concurrency,
        ) = rest
        return Job(
            id=job_id,
            tenant_id=self.tenant_id,
            name=name,
            schedule=schedule,
            action=action,
            created_at=self.now,
            updated_at=self.now,
            pool=pool,
            payload=payload,
            priority=priority,
            retry=retry,
            timeout_seconds=timeout,
            misfire=misfire,
            overlap=overlap,
            jitter_seconds=jitter,
            catchup_seconds=catchup,
            delivery=delivery,
            state=state,
            next_fire_at=next_fire_at,
            last_fire_at=last_fire_at,
            notify=notify,
            concurrency=concurrency,
        )

    def _rest(self, items: _Items) -> _Rest | None:
        """What a spec with the same fields (but name, schedule and payload) made."""
        return _hit(self.rests, _text(items), items)

    def _schedule_plan(self, schedule: object) -> _Plan | None:
        """The plan of a schedule that passes ``JobSpec``'s validator, or None."""
        if type(schedule) is not dict:
            return None
        key = _text(schedule)
        known = _hit(self.plans, key, schedule)
        if known is not None:
            return known
        # As JobSpec._valid_schedule then to_job would, minus reading back the dict the
        # first produces: a schedule's dict form reads back as the same schedule.
        parsed = schedule_from_dict(schedule)
        schedule_to_dict(parsed)
        plan = _plan(parsed, self.now)
        self.plans[key] = (schedule, plan)
        return plan

    def _learn(self, spec: Any, job: Job) -> None:
        """Remember what the full path made of a valid spec, for the specs like it."""
        try:
            items = _rest_items(spec)
            rest_key = _text(items)
            schedule = spec["schedule"]
            schedule_key = _text(schedule)
        except Exception:  # not plain JSON (or not a dict at all): nothing to remember
            return
        rest = (
            job.action,
            job.pool,
            job.priority,
            job.retry,
            job.timeout_seconds,
            job.misfire,
            job.overlap,
            job.jitter_seconds,
            job.catchup_seconds,
            job.delivery,
            job.notify,
            job.concurrency,
        )
        self.rests[rest_key] = (items, rest)
        plan = (job.schedule, job.state, job.next_fire_at, job.last_fire_at)
        self.plans[schedule_key] = (schedule, plan)


def _hit(cache: dict[str, tuple[Any, _T]], key: str, value: object) -> _T | None:
    """What the value that filled ``cache[key]`` made, if ``value`` equals it (see
    _Batch: the key alone does not tell apart what equality does)."""
    found = cache.get(key)
    return found[1] if found is not None and found[0] == value else None


def _same_objects(items: _Items, before: _Items) -> bool:
    """Whether two specs' rest items are the same keys holding the very same objects."""
    if len(items) != len(before):
        return False
    for (key, value), (key_before, value_before) in zip(items, before, strict=True):
        if value is not value_before or key != key_before:
            return False
    return True


def _rest_items(spec: dict[str, Any]) -> _Items:
    return [(k, v) for k, v in spec.items() if k not in _NOT_REST]


def _text(value: object) -> str:
    """Half of a value's cache key (see _Batch): its ``repr``, C-speed for plain JSON."""
    try:
        return repr(value)
    except Exception as exc:  # a user object's __repr__, or nesting too deep
        raise _Uncacheable from exc


_encode_strict = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def encode_payload(field: str, payload: JSON) -> str | None:
    """A run's own payload as the JSON text the store keeps (None stays None: the job's
    payload); InvalidInput naming ``field`` if it is not JSON or is over the limit."""
    if payload is None:
        return None
    try:
        text = _encode_strict(payload)
    except (TypeError, ValueError) as exc:  # an object, NaN, infinity, a cycle
        raise InvalidInput(field, f"is not JSON: {exc}") from None
    size = len(text.encode())
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidInput(field, f"is {size} bytes; the limit is {MAX_PAYLOAD_BYTES} (256 KiB)")
    return text


_encode_compact = json.JSONEncoder(separators=(",", ":")).encode


def payload_size(payload: JSON) -> int:
    """Bytes of compact JSON, as an enqueued payload is measured: the limit is the same
    whichever way a payload comes in."""
    return len(_encode_compact(payload).encode())


def _small(payload: JSON) -> bool:
    """Whether JobSpec._small_payload passes ``payload`` (an error: the full path says)."""
    try:
        return payload_size(payload) <= MAX_PAYLOAD_BYTES
    except Exception:
        return False


def _utf8(text: str) -> bool:
    """Whether pydantic takes ``text`` as a string (a lone surrogate it does not)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def spec_of(job: Job) -> dict[str, Any]:
    """A job's definition in the spec's own shape: edit it and validate it again."""
    return {
        "name": job.name,
        "schedule": dict(job.schedule),
        "action": dict(job.action),
        "pool": job.pool,
        "payload": job.payload,
        "priority": job.priority.name.lower(),
        "retry": job.retry.to_dict(),
        "timeout_seconds": job.timeout_seconds,
        "misfire": job.misfire.to_dict(),
        "overlap": job.overlap.value,
        "jitter_seconds": job.jitter_seconds,
        "catchup_seconds": job.catchup_seconds,
        "delivery": job.delivery.value,
        "notify": [dict(t) for t in job.notify],
        **({} if job.concurrency is None else {"concurrency": job.concurrency.to_dict()}),
    }


_ACTION_TAGS = frozenset({"webhook", "handler", "publish", "command"})


def field_name(loc: Sequence[int | str]) -> str:
    """A pydantic location as the dotted field a user wrote. The action union inserts its
    tag (``action.webhook.url``), which no user writes: it is dropped (``action.url``), so
    the Python API names the same field as the HTTP API."""
    kept = [
        str(part)
        for i, part in enumerate(loc)
        if not (i > 0 and loc[i - 1] == "action" and part in _ACTION_TAGS)
    ]
    return ".".join(kept)


def invalid_input(exc: ValidationError) -> InvalidInput:
    first = exc.errors()[0]
    where = field_name(first["loc"]) or "body"
    message = str(first["msg"]).removeprefix("Value error, ")
    if where == "schedule":  # "cron: minute: 61 is out of range" names a key of the schedule
        key, sep, rest = message.partition(": ")
        if sep and key.replace("_", "").isalnum():
            where, message = f"schedule.{key}", rest
    if where == "action.headers":  # "Host: cronwheel sets this…" names the header
        key, sep, rest = message.partition(": ")
        if sep and _HEADER_NAME.match(key):
            where, message = f"action.headers.{key}", rest
    if where == "action.env":  # "LD_PRELOAD: variables of…" names the variable
        key, sep, rest = message.partition(": ")
        if sep and _ENV_NAME.match(key):
            where, message = f"action.env.{key}", rest
    return InvalidInput(where, message)
