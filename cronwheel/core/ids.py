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
