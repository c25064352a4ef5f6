"""asyncpg errors → cronwheel errors: what the caller did wrong, or that it may retry."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import asyncpg

from cronwheel.core.model import Job
from cronwheel.errors import Conflict, NotFound, StoreUnavailable
from cronwheel.security.redact import redact

# Errors that mean "the database cannot be reached right now", not "the request is wrong".
UNAVAILABLE: Final = (
    OSError,
    TimeoutError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.TooManyConnectionsError,
    # Every host of a multi-host URL answered, none as the primary: a failover under way.
    asyncpg.exceptions.TargetServerAttributeNotMatched,
)

# Errors of opening a connection that mean "not with these settings": a database that
# does not exist (or was dropped), a user or password the server refuses.
REFUSED: Final = (
    asyncpg.exceptions.InvalidCatalogNameError,
    asyncpg.exceptions.InvalidAuthorizationSpecificationError,
)


def outage(exc: BaseException) -> StoreUnavailable:
    """The StoreUnavailable of a lost or unreachable server (``exc``: one of UNAVAILABLE)."""
    return StoreUnavailable(f"PostgreSQL is unavailable: {redact(str(exc))}")


def lost_under(exc: BaseException) -> BaseException | None:
    """The connection loss under ``exc`` when ``exc`` is asyncpg's complaint about the
    closed connection while the loss was being handled (a transaction's exit after the
    server went mid-statement: its InterfaceError replaces the loss's error), else None."""
    cause = exc.__context__
    if isinstance(exc, asyncpg.InterfaceError) and isinstance(cause, UNAVAILABLE):
        return cause
    return None


def unique_conflict(exc: asyncpg.UniqueViolationError, jobs: Sequence[Job]) -> Conflict:
    """The Conflict a unique violation on ``jobs`` means to the caller."""
    if exc.constraint_name == "jobs_pkey":
        return Conflict("id", "a job with this id already exists")
    if exc.constraint_name != "jobs_tenant_name":
        return Conflict("id", f"a uniqueness rule refused the change ({exc.constraint_name})")
    # The detail reads "Key (tenant_id, name)=(<tenant>, <name>) already exists."
    detail = exc.detail or ""
    for job in jobs:
        if f"=({job.tenant_id}, {job.name})" in detail:
            if sum(1 for j in jobs if (j.tenant_id, j.name) == (job.tenant_id, job.name)) > 1:
                return Conflict("name", f"the name {job.name!r} appears twice in one batch")
            return Conflict("name", f"a live job named {job.name!r} already exists for this tenant")
    return Conflict("name", "a live job with this name already exists for this tenant")


def missing_parent(exc: asyncpg.ForeignKeyViolationError) -> NotFound:
    """A job of an unknown tenant, or a run of an unknown job."""
    # The detail reads "Key (<column>)=(<value>) is not present in table ...".
    found = re.search(r"\)=\((.*)\) is not present", exc.detail or "")
    ident = found.group(1) if found else "?"
    if exc.constraint_name == "jobs_tenant_id_fkey":
        return NotFound("tenant", ident)
    return NotFound("job", ident)
