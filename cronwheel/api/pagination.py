"""Opaque cursors: the position after which the next page starts.

A cursor is base64url of ``<kind>:<last id>``; the kind keeps a cursor of one list from
being replayed against another. Clients must treat it as opaque: its content may change.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Annotated, TypeVar

from fastapi import Query

from cronwheel.api.inputs import INT64
from cronwheel.api.problems import invalid

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
T = TypeVar("T")

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page.")]
Cursor = Annotated[
    str | None,
    Query(max_length=200, description="The `next_cursor` of the previous page."),
]


def encode(kind: str, last: str | int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{last}".encode()).decode().rstrip("=")


def _decode(kind: str, cursor: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid("cursor", "is not a cursor this API gave out") from None
    found_kind, _, value = raw.partition(":")
    if found_kind != kind or not value:
        raise invalid("cursor", "is not a cursor of this list")
    return value


def after_job(cursor: str | None) -> str | None:
    """The job id a job-list cursor points after."""
    if cursor is None:
        return None
    value = _decode("job", cursor)
    if not _UUID.match(value):
        raise invalid("cursor", "is not a cursor this API gave out")
    return value


def before_run(cursor: str | None) -> int | None:
    """The run id a run-list cursor points after (lists of runs go newest first)."""
    if cursor is None:
        return None
    value = _decode("run", cursor)
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
