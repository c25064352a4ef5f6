"""A stored pipeline and its versions (decision 0025): plain frozen dataclasses, no I/O.

A pipeline is the named thing a tenant edits; each change of its definition adds an
immutable :class:`PipelineVersion`, and the pipeline's ``version`` names the one it shows
(its latest, unless a given version was asked for).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from cronwheel.model import JSON


class PipelineState(StrEnum):
    """A pipeline is live until deleted; a deleted one keeps its versions for audit and
    frees its name."""

    ACTIVE = "active"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A pipeline at one of its versions.

    ``definition`` is :meth:`~cronwheel.pipelines.definition.Definition.to_dict` of a
    validated definition, ``fingerprint`` its content hash. ``latest_version`` is the
    version the next update must name; ``updated_at`` is when the latest version (or the
    deletion) was written.
    """

    id: str
    tenant_id: str
    name: str
    version: int
    definition: Mapping[str, JSON]
    fingerprint: str
    created_at: datetime
    updated_at: datetime
    latest_version: int
    state: PipelineState = PipelineState.ACTIVE


@dataclass(frozen=True, slots=True)
class PipelineVersion:
    """One immutable version of a pipeline's definition: who wrote it, and when."""

    pipeline_id: str
    version: int
    definition: Mapping[str, JSON]
    fingerprint: str
    created_at: datetime
    actor: str
