"""What a user writes to create or change a job, validated before it reaches the store.

One pydantic model serves the Python API, the HTTP API and the CLI, so a bad field gets
the same message everywhere: :class:`~cronwheel.errors.InvalidInput` naming the field
(``retry.max_attempts``, ``schedule.cron``…) and the reason.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cronwheel.errors import InvalidInput
from cronwheel.model import (
    DEFAULT_POOL,
    JSON,
    Backoff,
    Delivery,
    Job,
    JobState,
    MisfireMode,
    MisfirePolicy,
    Overlap,
    Priority,
    RetryPolicy,
    new_id,
)
from cronwheel.schedule import (
    ImmediateSchedule,
    OnceSchedule,
    first_fire,
    resolve,
    schedule_from_dict,
    schedule_to_dict,
)

MAX_PAYLOAD_BYTES = 256 * 1024
PAST_TOLERANCE = timedelta(seconds=60)
"""A one-time job may be due this far in the past (clock skew, a slow client); older is
refused as a mistake rather than silently fired late."""

_STRICT = ConfigDict(extra="forbid", frozen=True)
Name = Annotated[str, Field(min_length=1, max_length=200)]
PoolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]


class RetrySpec(BaseModel):
    model_config = _STRICT
    max_attempts: int = Field(3, ge=1, le=1000)
    backoff: Backoff = Backoff.EXPONENTIAL_JITTER
    initial_delay: float = Field(1.0, ge=0, le=86_400)
    max_delay: float = Field(300.0, ge=0, le=7 * 86_400)
    budget_seconds: float | None = Field(None, gt=0)

    def policy(self) -> RetryPolicy:
        return RetryPolicy(**self.model_dump())


class MisfireSpec(BaseModel):
    model_config = _STRICT
    mode: MisfireMode = MisfireMode.FIRE_ONCE
    limit: int = Field(100, ge=1, le=100_000)

    def policy(self) -> MisfirePolicy:
        return MisfirePolicy(self.mode, self.limit)


class WebhookSpec(BaseModel):
    model_config = _STRICT
    type: Literal["webhook"]
    url: Annotated[str, Field(max_length=2048)]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    body: JSON = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an absolute http:// or https:// URL")
        return url


class HandlerSpec(BaseModel):
    model_config = _STRICT
    type: Literal["handler"]
    name: Name


class JobSpec(BaseModel):
    """A job as a user describes it. Defaults are the documented policy defaults."""

    model_config = _STRICT
    name: Name
    schedule: dict[str, Any]
    action: Annotated[WebhookSpec | HandlerSpec, Field(discriminator="type")]
    pool: PoolName = DEFAULT_POOL
    payload: JSON = None
    priority: Literal["critical", "high", "normal", "low"] = "normal"
    retry: RetrySpec = Field(default_factory=RetrySpec)  # type: ignore[arg-type]
    timeout_seconds: float = Field(300.0, gt=0, le=7 * 86_400)
    misfire: MisfireSpec = Field(default_factory=MisfireSpec)  # type: ignore[arg-type]
    overlap: Overlap = Overlap.ALLOW
    jitter_seconds: float = Field(0.0, ge=0, le=86_400)
    catchup_seconds: float = Field(60.0, ge=0, le=365 * 86_400)
    delivery: Delivery = Delivery.AT_LEAST_ONCE

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
        size = len(json.dumps(payload).encode())
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

    def to_job(self, *, tenant_id: str, now: datetime, job_id: str | None = None) -> Job:
        """A new job at version 1, its schedule pinned (delays, interval anchors) at ``now``."""
        schedule = resolve(schedule_from_dict(self.schedule), now)
        if isinstance(schedule, OnceSchedule) and schedule.at < now - PAST_TOLERANCE:
            raise InvalidInput("schedule.at", f"{schedule.at.isoformat()} is in the past")
        immediate = isinstance(schedule, ImmediateSchedule)
        return Job(
            id=job_id or new_id(),
            tenant_id=tenant_id,
            name=self.name,
            schedule=schedule_to_dict(schedule),
            action=self.action.model_dump(),
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
            state=JobState.COMPLETED if immediate else JobState.ACTIVE,
            next_fire_at=None if immediate else first_fire(schedule, now),
            last_fire_at=now if immediate else None,
        )


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
    }


def invalid_input(exc: ValidationError) -> InvalidInput:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    message = str(first["msg"]).removeprefix("Value error, ")
    if where == "schedule":  # "cron: minute: 61 is out of range" names a key of the schedule
        key, sep, rest = message.partition(": ")
        if sep and key.replace("_", "").isalnum():
            where, message = f"schedule.{key}", rest
    return InvalidInput(where, message)
