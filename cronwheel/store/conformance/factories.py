"""Small builders for store tests: a job, its runs and their completions with sensible
defaults."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwheel.core.model import (
    DEFAULT_TENANT,
    AttemptOutcome,
    ClaimedRun,
    Job,
    NewRun,
    Priority,
    RunState,
    new_id,
)
from cronwheel.store.base import Completion

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """T0 shifted by some seconds: tests read as a timeline."""
    return T0 + timedelta(seconds=seconds)


def make_job(name: str | None = None, **overrides: Any) -> Job:
    job = Job(
        id=new_id(),
        tenant_id=DEFAULT_TENANT,
        name=name or f"job-{new_id()[-12:]}",
        schedule={"kind": "cron", "cron": "* * * * *", "timezone": "UTC"},
        action={"type": "handler", "name": "noop"},
        created_at=T0,
        updated_at=T0,
        payload={"hello": "world", "n": [1, 2.5, None]},
        next_fire_at=at(60),
    )
    return replace(job, **overrides)


def make_run(job: Job, scheduled_for: datetime, **overrides: Any) -> NewRun:
    run = NewRun(
        tenant_id=job.tenant_id,
        job_id=job.id,
        scheduled_for=scheduled_for,
        available_at=scheduled_for,
        pool=job.pool,
        priority=job.priority,
        max_attempts=job.retry.max_attempts,
        job_version=job.version,
    )
    return replace(run, **overrides)


__all__ = ["T0", "Priority", "RunState", "at", "make_job", "make_run"]


def succeeded(claimed: ClaimedRun, when: datetime, **overrides: Any) -> Completion:
    """Worker ``w``'s completion of a claimed run that succeeded at once at ``when``."""
    done = Completion(
        run_id=claimed.run.id,
        fence=claimed.run.fence,
        worker_id="w",
        state=RunState.SUCCEEDED,
        outcome=AttemptOutcome.SUCCEEDED,
        started_at=when,
        finished_at=when,
    )
    return replace(done, **overrides)
