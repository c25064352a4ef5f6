"""Opaque cursors: the position after which the next page starts.

A cursor is base64url of ``<kind>:<last id>``; the kind keeps a cursor of one list from
being replayed against another. A cursor of the jobs list also carries its order and the
last job's value in it: ``job:<order>:<id>:<value>`` (see :func:`job_cursor`). Clients
must treat a cursor as opaque: its content may change.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypeVar

from fastapi import Query

from cronwheel.core.ids import INT64, is_uuid
from cronwheel.core.model import Job, JobKey, JobOrder
from cronwheel.web.problems import ApiProblem, invalid

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
T = TypeVar("T")

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page.")]
MAX_CURSOR = 2048
"""A jobs cursor in name order carries the name (up to 200 characters of up to 4 bytes
each), in base64: about 1,150 characters at most."""
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"
"""A cursor's alphabet: base64url without padding. Only a cursor the API gave out is
accepted; another string of this form is 422 (decision 0045)."""
_CURSOR = re.compile(CURSOR_PATTERN)
Cursor = Annotated[
    str | None,
    Query(
        max_length=MAX_CURSOR,
        json_schema_extra={"pattern": CURSOR_PATTERN},
        description="The `next_cursor` of the previous page, as it was given: opaque.",
    ),
]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def encode(kind: str, last: str | int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{last}".encode()).decode().rstrip("=")


def _decode(kind: str, cursor: str) -> str:
    if _CURSOR.fullmatch(cursor) is None:  # b64decode would skip what is not base64
        raise invalid("cursor", "is not a cursor this API gave out")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid("cursor", "is not a cursor this API gave out") from None
    found_kind, _, value = raw.partition(":")
    if found_kind != kind or not value:
        raise invalid("cursor", "is not a cursor of this list")
    return value


def job_cursor(order: JobOrder, job: Job) -> str:
    """The cursor of the page after ``job`` in ``order``: the order, the id and the
    value the order sorts by (a next fire time in microseconds since the epoch, empty
    for none), so the next page starts exactly after it, and a cursor of one order is
    refused by another."""
    key = order.key(job)
    value = key.value
    if isinstance(value, datetime):
        value = str((value - _EPOCH) // _MICROSECOND)
    return encode("job", f"{order.value}:{key.id}:{value or ''}")


def after_job(cursor: str | None, order: JobOrder) -> JobKey | None:
    """The position a job-list cursor points after, in ``order``: a 422 naming
    ``cursor`` for anything :func:`job_cursor` did not make for this order."""
    if cursor is None:
        return None
    value = _decode("job", cursor)
    if is_uuid(value):
        # A cursor of an older version (``job:<id>``): a position in creation order.
        if order.sort_key != "created":
            raise _other_order("created", order)
        return JobKey(value)
    made_for, _, rest = value.partition(":")
    job_id, _, raw = rest.partition(":")
    if made_for not in {o.value for o in JobOrder} or not is_uuid(job_id):
        raise invalid("cursor", "is not a cursor this API gave out")
    if made_for != order.value:
        raise _other_order(made_for, order)
    if order.sort_key == "created":
        return JobKey(job_id)
    if order.sort_key == "name":
        if "\x00" in raw:  # no name holds one (PostgreSQL text cannot)
            raise invalid("cursor", "is not a cursor this API gave out")
        return JobKey(job_id, raw)
    if raw == "":
        return JobKey(job_id, None)
    try:
        return JobKey(job_id, _EPOCH + int(raw) * _MICROSECOND)
    except (ValueError, OverflowError):
        raise invalid("cursor", "is not a cursor this API gave out") from None


def _other_order(made_for: str, order: JobOrder) -> ApiProblem:
    return invalid(
        "cursor",
        f"continues the list in the order {made_for!r}, not {order.value!r}: ask for the"
        " order the cursor came with, or start again from the first page without a cursor",
    )


def before_run(cursor: str | None) -> int | None:
    """The run id a run-list cursor points after (lists of runs go newest first)."""
    if cursor is None:
        return None
    value = _decode("run", cursor)
    if not value.isdigit() or not 0 < int(value) <= INT64:
        raise invalid("cursor", "is not a cursor this API gave out")
    return int(value)


def before_id(kind: str, cursor: str | None) -> int | None:
    """The id a cursor of a newest-first list of ``kind`` points after."""
    if cursor is None:
        return None
    value = _decode(kind, cursor)
    if not value.isdigit() or not 0 < int(value) <= INT64:
        raise invalid("cursor", "is not a cursor this API gave out")
    return int(value)


def page(items: Sequence[T], limit: int, kind: str, key: str) -> tuple[list[T], str | None]:
    """Cut a fetch of ``limit + 1`` items to a page and its next cursor (None: the end)."""
    kept = list(items[:limit])
    if len(items) <= limit or not kept:
        return kept, None
    last = getattr(kept[-1], key)
    return kept, encode(kind, last)


def after_pipeline(cursor: str | None) -> str | None:
    """The pipeline id a pipeline-list cursor points after (creation order)."""
    if cursor is None:
        return None
    value = _decode("pipeline", cursor)
    if not is_uuid(value):
        raise invalid("cursor", "is not a cursor this API gave out")
    return value


def before_version(cursor: str | None) -> int | None:
    """The version a pipeline-versions cursor points after (newest first)."""
    if cursor is None:
        return None
    value = _decode("pipeline-version", cursor)
    if not value.isdigit() or not 0 < int(value) < 2**31:
        raise invalid("cursor", "is not a cursor this API gave out")
    return int(value)
