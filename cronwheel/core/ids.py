"""Ids as the stores write them, and the one check that a string can name one.

Every id cronwheel hands out (jobs, runs, pipelines, pipeline runs, API keys) is a
lowercase UUID. A string of any other shape names nothing: the API answers 404 for it
without asking the store, and the CLI knows it must be a name or a prefix instead.
"""

from __future__ import annotations

import re
from typing import Final

from cronwheel.errors import NotFound

UUID: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
"""A lowercase UUID, the shape of every id the stores write."""

INT64 = 2**63 - 1
"""The largest integer a store column holds (run ids, counters): every number a user
sends is checked against it."""


RUN_ID: Final = re.compile(r"0|[1-9][0-9]*")
"""A run id as text: ASCII digits, no sign, space, point or leading zero. ``int()`` reads
more (``+1``, `` 1``, ``1_0``, other scripts' digits), and pydantic more still (``1.0``):
a URL that reads as run 1 in another spelling is not run 1's address."""


def run_id_text(value: object) -> object:
    """A run id from a URL (a pydantic before-validator): text must be :data:`RUN_ID`'s
    shape (ValueError otherwise: the API's 422 naming ``run_id``, as for ``abc``)."""
    if isinstance(value, str) and RUN_ID.fullmatch(value) is None:
        raise ValueError("a run id is a whole number in ASCII digits (no sign, space or point)")
    return value


def is_run_id(text: str) -> bool:
    """Whether ``text`` spells a run id (a positive number within a store column)."""
    return RUN_ID.fullmatch(text) is not None and 0 < int(text) <= INT64


def is_uuid(value: str) -> bool:
    """Whether ``value`` has the shape of an id cronwheel writes."""
    return UUID.match(value) is not None


def _checked(kind: str, value: str) -> str:
    if not is_uuid(value):
        raise NotFound(kind, value)
    return value


def checked_job_id(job_id: str) -> str:
    """A job id as the store knows them; anything else names no job (404)."""
    return _checked("job", job_id)


def checked_pipeline_id(pipeline_id: str) -> str:
    """A pipeline id as the store knows them; anything else names no pipeline (404)."""
    return _checked("pipeline", pipeline_id)


def checked_pipeline_run_id(pipeline_run_id: str) -> str:
    """A pipeline run id as the store knows them; anything else names none (404)."""
    return _checked("pipeline_run", pipeline_run_id)
