"""What the API accepts: request bodies, validated before anything reaches the store.

Job specs are :class:`cronwheel.core.jobspec.JobSpec`, with one change: a payload over
256 KiB is a ``too_large`` error (413) rather than an invalid field (422).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from cronwheel.core import jobspec
from cronwheel.core.brokers import BROKER_NAME
from cronwheel.core.ids import INT64
from cronwheel.core.jobspec import (
    MAX_PAYLOAD_BYTES,
    MIN_TIMEOUT_SECONDS,
    CommandSpec,
    ConcurrencySpec,
    HandlerSpec,
    Integer,
    MisfireSpec,
    Name,
    PipelineActionSpec,
    PoolName,
    PublishSpec,
    RetrySpec,
    WebhookSpec,
    payload_size,
    whole_number,
)
from cronwheel.core.lifecycle import OutcomeKind
from cronwheel.core.model import (
    JSON,
    MAX_CHECKPOINT_BYTES,
    MAX_CLAIM_WEIGHT,
    MAX_PROGRESS_MESSAGE,
    Delivery,
    Overlap,
    Role,
    checkpoint_text,
)
from cronwheel.core.pipelines.definition import PipelineSpec
from cronwheel.errors import InvalidInput
from cronwheel.schedule import schedule_from_dict, schedule_to_dict
from cronwheel.security.commands import pattern_problem

MAX_BATCH = 10_000
INT32 = 2**31 - 1
_STRICT = ConfigDict(extra="forbid", frozen=True)

# A whole number in bounds: the bounds inside, so that the document shows them (pydantic
# shows bounds applied around a validator as raw "ge"/"le").
RunId = Annotated[int, Field(ge=1, le=INT64, strict=True), BeforeValidator(whole_number)]
Fence = Annotated[int, Field(ge=0, le=INT32, strict=True), BeforeValidator(whole_number)]
JobCount = Annotated[int, Field(ge=0, le=INT32, strict=True), BeforeValidator(whole_number)]
RunCount = Annotated[int, Field(ge=1, le=INT32, strict=True), BeforeValidator(whole_number)]
Capacity = Annotated[int, Field(ge=1, le=1000, strict=True), BeforeValidator(whole_number)]
HttpStatus = Annotated[int, Field(ge=100, le=599, strict=True), BeforeValidator(whole_number)]
LeaseSeconds = Annotated[float, Field(ge=1, le=3600, strict=True)]
TenantId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
WorkerId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:@-]{1,128}$")]
Text = Annotated[str, Field(max_length=4000)]


def check_payload(payload: JSON) -> JSON:
    """A payload over the limit is refused as too large (413), not as invalid."""
    size = payload_size(payload)
    if size > MAX_PAYLOAD_BYTES:
        raise PydanticCustomError(
            "too_large",
            "is {size} bytes; the limit is {limit} (256 KiB)",
            {"size": size, "limit": MAX_PAYLOAD_BYTES},
        )
    return payload


def check_schedule(schedule: dict[str, Any]) -> dict[str, Any]:
    """A schedule in its normal form; a date out of the calendar's range (year 9999 in a
    timezone west of UTC…) is invalid, not a crash."""
    try:
        return schedule_to_dict(schedule_from_dict(schedule))
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    except OverflowError:
        raise ValueError("a date is out of range") from None


class JobSpec(jobspec.JobSpec):
    """A job as a client describes it (see docs/api.md)."""

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, schedule: dict[str, Any]) -> dict[str, Any]:
        return check_schedule(schedule)

    @field_validator("payload")
    @classmethod
    def _small_payload(cls, payload: JSON) -> JSON:
        return check_payload(payload)


class PreviewIn(BaseModel):
    """A schedule to preview: the same object a job takes, checked the same way."""

    model_config = _STRICT
    schedule: dict[str, Any]
    count: Integer = Field(
        10, ge=1, le=100, description="How many fire times (1-100).", strict=True
    )

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, schedule: dict[str, Any]) -> dict[str, Any]:
        return check_schedule(schedule)


class JobPatch(BaseModel):
    """The fields to change; each replaces the job's value whole (``retry`` included)."""

    model_config = _STRICT
    name: Name | None = None
    schedule: dict[str, Any] | None = None
    action: (
        Annotated[
            WebhookSpec | HandlerSpec | PublishSpec | PipelineActionSpec | CommandSpec,
            Field(discriminator="type"),
        ]
        | None
    ) = None
    pool: PoolName | None = None
    payload: JSON = None
    priority: Literal["critical", "high", "normal", "low"] | None = None
    retry: RetrySpec | None = None
    timeout_seconds: float | None = Field(None, ge=MIN_TIMEOUT_SECONDS, le=7 * 86_400, strict=True)
    misfire: MisfireSpec | None = None
    overlap: Overlap | None = None
    jitter_seconds: float | None = Field(None, ge=0, le=86_400, strict=True)
    catchup_seconds: float | None = Field(None, ge=0, le=365 * 86_400, strict=True)
    delivery: Delivery | None = None
    concurrency: ConcurrencySpec | None = Field(
        None, description="A concurrency key and limit; null removes it (decision 0031)."
    )

    @field_validator("payload")
    @classmethod
    def _small_payload(cls, payload: JSON) -> JSON:
        return check_payload(payload)

    @field_validator("schedule")
    @classmethod
    def _valid_schedule(cls, schedule: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if schedule is None else check_schedule(schedule)

    def changes(self) -> dict[str, Any]:
        """Only what the client sent, as JSON values (a ``null`` payload included)."""
        return self.model_dump(mode="json", exclude_unset=True)


class BatchIn(BaseModel):
    model_config = _STRICT
    jobs: list[JobSpec] = Field(min_length=1, max_length=MAX_BATCH)


RunPayload = Annotated[JSON, AfterValidator(check_payload)]


class EnqueueIn(BaseModel):
    """Runs to enqueue to a manual job: one per payload, in order (``null``: the job's
    payload)."""

    model_config = _STRICT
    payloads: list[RunPayload] = Field(min_length=1, max_length=MAX_BATCH)


class BackfillIn(BaseModel):
    """A range of past occurrences to give runs: ``start`` included, ``end`` excluded."""

    model_config = _STRICT
    start: AwareDatetime = Field(description="The first instant of the range (1970 or later).")
    end: AwareDatetime = Field(description="The end of the range, excluded; not in the future.")
    priority: Literal["critical", "high", "normal", "low"] = Field(
        "low", description="The runs' priority: low unless told, so live work goes first."
    )


class ResumeIn(BaseModel):
    model_config = _STRICT
    catch_up: bool = Field(False, strict=True)


def _dead_replay_forms(schema: dict[str, Any]) -> None:
    schema["oneOf"] = [
        {
            "title": "By id",
            "required": ["run_ids"],
            "properties": {
                "run_ids": {"type": "array"},
                "job_id": {"type": "null"},
                "all": {"const": False},
            },
        },
        {
            "title": "Every dead run of a job",
            "required": ["job_id", "all"],
            "properties": {
                "run_ids": {"type": "null"},
                "job_id": {"type": "string"},
                "all": {"const": True},
            },
        },
    ]


class DeadReplayIn(BaseModel):
    """Either ``run_ids``, or ``job_id`` with ``all: true``."""

    # The two forms are the route's rule; the document says it too (decision 0045).
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_dead_replay_forms)
    run_ids: list[RunId] | None = Field(None, max_length=MAX_BATCH)
    job_id: str | None = Field(None, max_length=64)
    all: bool = Field(False, strict=True)


class NotificationReplayIn(BaseModel):
    """Dead notifications to deliver again, by id."""

    model_config = _STRICT
    ids: list[RunId] = Field(min_length=1, max_length=MAX_BATCH)


def check_pattern(pattern: str) -> str:
    """An allow-command pattern, as ``cronwheel worker --allow-command`` takes it."""
    why = pattern_problem(pattern)
    if why is not None:
        raise ValueError(why)
    return pattern


CommandPattern = Annotated[
    str,
    # What check_pattern refuses, said in the document too: an absolute path, or a name
    # without "/" that is not blank.
    Field(max_length=1024, pattern=r"^(?:/[^\x00]*|[^/\x00]*[^\s/\x00][^/\x00]*)$"),
    AfterValidator(check_pattern),
]
Commands = Annotated[
    list[CommandPattern] | None,
    Field(
        max_length=100,
        description="The executables this worker runs for command actions, as patterns"
        " (``pg_dump``, ``/opt/jobs/*``, ``*``: docs/actions.md#command-actions). The API"
        " takes a command job only if a live worker of its pool allows its ``argv[0]``;"
        " left out, a claim announces none and a heartbeat keeps the last claim's.",
    ),
]
BrokerNameIn = Annotated[str, Field(pattern=BROKER_NAME.pattern)]
BrokerKindIn = Literal["nats", "rabbitmq", "redis"]
"""The kinds of :data:`cronwheel.core.brokers.KINDS` (tests/api/test_remote_actions.py
checks they agree)."""
BrokerMap = Annotated[
    dict[BrokerNameIn, BrokerKindIn],
    Field(max_length=100),
    # pydantic says patternProperties, which leaves other names open: the document says
    # what the server does (decision 0045).
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": 100,
            "propertyNames": {"pattern": BROKER_NAME.pattern},
            "additionalProperties": {"type": "string", "enum": list(get_args(BrokerKindIn))},
        }
    ),
]
Brokers = Annotated[
    BrokerMap | None,
    Field(
        description="The brokers this worker publishes to, by the name jobs use and"
        ' their kind (``{"events": "nats"}``), never their URLs. The API takes a'
        " publish job only if a live worker of its pool names its broker; left out, a"
        " claim announces none and a heartbeat keeps the last claim's.",
    ),
]


class ClaimIn(BaseModel):
    model_config = _STRICT
    worker_id: WorkerId
    pools: list[PoolName] = Field(min_length=1, max_length=100)
    capacity: Integer = Field(1, ge=1, le=1000, strict=True)
    lease_seconds: LeaseSeconds = 30.0
    host: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    in_flight: Integer = Field(0, ge=0, le=100_000, strict=True)
    """Runs the worker holds already, for the registry (``GET /v1/workers``)."""
    commands: Commands = None
    brokers: Brokers = None


def check_checkpoint(state: JSON) -> JSON:
    """A checkpoint state a store can keep: JSON of at most ``MAX_CHECKPOINT_BYTES``."""
    try:
        checkpoint_text(state)
    except InvalidInput as exc:
        raise ValueError(exc.reason) from None
    return state


class ProgressIn(BaseModel):
    """How far the run is: a fraction, and a short note."""

    model_config = _STRICT
    fraction: float = Field(
        ge=0, le=1, description="From 0.0 (started) to 1.0 (done).", strict=True
    )
    message: Annotated[str, Field(max_length=MAX_PROGRESS_MESSAGE)] | None = None


class CheckpointIn(BaseModel):
    """Where to resume: the next attempt of the run is claimed with this ``state``."""

    model_config = _STRICT
    state: Annotated[JSON, AfterValidator(check_checkpoint)] = Field(
        description=f"Any JSON value, at most {MAX_CHECKPOINT_BYTES} bytes encoded."
    )


class LeaseIn(BaseModel):
    model_config = _STRICT
    run_id: RunId
    fence: Fence
    progress: ProgressIn | None = Field(
        None, description="A new progress report, stored with the lease (fenced)."
    )
    checkpoint: CheckpointIn | None = Field(
        None, description="A new checkpoint, stored with the lease (fenced)."
    )


class HeartbeatIn(BaseModel):
    model_config = _STRICT
    worker_id: WorkerId
    leases: list[LeaseIn] = Field(max_length=100_000)
    lease_seconds: LeaseSeconds = 30.0
    host: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    pools: list[PoolName] | None = Field(None, max_length=100)
    capacity: Capacity | None = None
    commands: Commands = None
    brokers: Brokers = None


ExitCode = Annotated[int, Field(ge=0, le=2**32 - 1, strict=True), BeforeValidator(whole_number)]


class CommandOutputIn(BaseModel):
    """How a command a remote worker ran ended, and what it wrote: kept with the attempt
    and shown as a cronwheel worker's are (docs/actions.md#command-actions). Each stream
    is redacted of the command's secrets, then cut to its last 64 KiB."""

    model_config = _STRICT
    exit_code: ExitCode | None = Field(
        None,
        description="The exit status (0 to 255 on POSIX, up to 4294967295 on Windows); null or"
        " left out when a signal ended the command.",
    )
    signal: Annotated[str, Field(pattern=r"^[A-Za-z0-9 +_-]{1,32}$")] | None = Field(
        None,
        description="The signal that ended the command (SIGKILL), if one did; not with"
        " an exit_code.",
    )
    stdout: str = Field("", description="The end of its stdout (more than 64 KiB is cut).")
    stderr: str = Field("", description="The end of its stderr (more than 64 KiB is cut).")

    @field_validator("signal")
    @classmethod
    def _one_ending(cls, signal: str | None, info: ValidationInfo) -> str | None:
        if signal is not None and info.data.get("exit_code") is not None:
            raise ValueError(
                "a command ended either with an exit code or by a signal: send exit_code"
                " null (or leave it out) with a signal"
            )
        return signal


class CompleteIn(BaseModel):
    model_config = _STRICT
    worker_id: WorkerId
    fence: Fence
    outcome: OutcomeKind
    error_class: Annotated[str, Field(max_length=200)] | None = None
    error_message: Text | None = None
    retry_after: float | None = Field(None, ge=0, le=7 * 86_400, strict=True)
    http_status: HttpStatus | None = Field(
        None, description="What a webhook target answered, if it was one."
    )
    progress: ProgressIn | None = Field(
        None, description="The attempt's last progress, if no heartbeat carried it."
    )
    checkpoint: CheckpointIn | None = Field(
        None, description="The attempt's last checkpoint, if no heartbeat carried it."
    )
    output: CommandOutputIn | None = Field(
        None,
        description="A command run's exit and output (only a command run has one: 422 otherwise).",
    )


class TenantIn(BaseModel):
    model_config = _STRICT
    id: TenantId
    name: Name
    max_jobs: JobCount | None = None
    max_creates_per_second: float | None = Field(None, gt=0, le=1_000_000, strict=True)
    claim_weight: float = Field(1.0, gt=0, le=MAX_CLAIM_WEIGHT, strict=True)
    max_running: RunCount | None = None


def _kept(*names: str) -> Callable[[dict[str, Any]], None]:
    """A json_schema_extra: these optional fields may be left out but not sent as null
    (their validators refuse it; the document says so)."""

    def drop_null(schema: dict[str, Any]) -> None:
        for name in names:
            field = schema["properties"][name]
            options = [o for o in field.pop("anyOf") if o.get("type") != "null"]
            field.update(options[0])
            field.pop("default", None)

    return drop_null


class TenantPatch(BaseModel):
    """The fields to change; ``null`` removes a quota."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, json_schema_extra=_kept("name", "claim_weight")
    )
    name: Name | None = None
    max_jobs: JobCount | None = None
    max_creates_per_second: float | None = Field(None, gt=0, le=1_000_000, strict=True)
    claim_weight: float | None = Field(None, gt=0, le=MAX_CLAIM_WEIGHT, strict=True)
    max_running: RunCount | None = None

    @field_validator("name")
    @classmethod
    def _named(cls, name: str | None) -> str:
        if name is None:
            raise ValueError("a tenant keeps a name: it cannot be null")
        return name

    @field_validator("claim_weight")
    @classmethod
    def _weighted(cls, weight: float | None) -> float:
        if weight is None:
            raise ValueError("a tenant keeps a claim weight (1 is everyone's default)")
        return weight

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)


class KeyIn(BaseModel):
    model_config = _STRICT
    role: Role
    name: Name | None = None
    tenant_id: TenantId | None = None


class PipelineIn(PipelineSpec):
    """A new pipeline: its name and its definition (decision 0025)."""

    name: Name
