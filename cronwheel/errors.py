"""The exception tree. Every error a user can cause names the field and the reason.

CronwheelError
├── InvalidInput            bad input: a field and why (HTTP 4xx, CLI exit 2)
├── NotFound                no such job or run for this tenant (HTTP 404)
├── Conflict                a uniqueness or state rule refuses the change (HTTP 409)
│   └── StaleVersion        the caller edited an old version of a job or pipeline (HTTP 412)
├── OverLimit               a tenant's limit refuses it for now (HTTP 429, Retry-After)
└── StoreUnavailable        the store cannot be reached right now (retry later)
"""

from __future__ import annotations


class CronwheelError(Exception):
    """Base of every error cronwheel raises on purpose."""


class InvalidInput(CronwheelError, ValueError):
    """Input that cronwheel refuses; ``field`` names what is wrong."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class InvalidItems(InvalidInput):
    """Several items of one batch refused at once: ``items`` holds (index, field, reason)
    for each problem, in order; ``field`` and ``reason`` are the first one's, so a caller
    that handles :class:`InvalidInput` alone still says what is wrong first."""

    def __init__(self, items: list[tuple[int, str, str]]) -> None:
        index, field, reason = items[0]
        super().__init__(field, reason)
        self.items = items
        if len(items) > 1:
            self.args = (f"{field}: {reason} (item {index}, and {len(items) - 1} more)",)


class NotFound(CronwheelError, LookupError):
    def __init__(self, what: str, ident: object) -> None:
        super().__init__(f"{what} {ident} not found")
        self.what = what
        self.ident = ident


class Conflict(CronwheelError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class StaleVersion(Conflict):
    def __init__(self, expected: int, actual: int, *, what: str = "job") -> None:
        super().__init__(
            "version", f"the {what} is at version {actual}, not {expected}: reload it and retry"
        )
        self.expected = expected
        self.actual = actual


class OverLimit(CronwheelError):
    """A tenant's limit (``max_jobs``, ``max_creates_per_second``) refuses the request,
    and nothing of it was written; it may succeed after ``retry_after`` seconds."""

    def __init__(self, limit: str, reason: str, retry_after: int) -> None:
        super().__init__(f"{limit}: {reason}")
        self.limit = limit
        self.reason = reason
        self.retry_after = max(int(retry_after), 1)


class StoreUnavailable(CronwheelError):
    """The store did not answer; the operation may be retried."""
