"""Every user action on pipeline definitions, validated, on top of the store.

The HTTP API (and through it the SDK and the CLI) goes through :class:`PipelineService`:
a definition is checked by :func:`~cronwheel.pipelines.definition.parse_definition`
before anything is stored, and stored as a new version only when its content changed.
Running pipelines is later work (decision 0025).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cronwheel.clock import Clock, SystemClock
from cronwheel.errors import InvalidInput, NotFound
from cronwheel.jobspec import WebhookSpec
from cronwheel.model import DEFAULT_TENANT, new_id
from cronwheel.pipelines.definition import Definition, parse_definition
from cronwheel.pipelines.model import Pipeline, PipelineVersion
from cronwheel.sealing import Sealer, refuse_sealed, seal_action
from cronwheel.store.base import Store

if TYPE_CHECKING:  # the policy's module imports httpcore
    from cronwheel.actions.egress import EgressPolicy

MAX_NAME = 200
"""The longest pipeline name, as a job's."""


def check_name(name: str) -> str:
    """A pipeline's name, or InvalidInput naming ``name``."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("name", "a pipeline needs a name (1 to 200 characters)")
    if len(name) > MAX_NAME:
        raise InvalidInput("name", f"is {len(name)} characters long; at most {MAX_NAME}")
    if "\x00" in name:
        raise InvalidInput("name", "may not contain the NUL character")
    return name


class PipelineService:
    """Create, read, list, change and delete pipeline definitions. ``actor`` names who
    acts, for the audit log and each version's author."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        actor: str = "python",
        egress: EgressPolicy | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.actor = actor
        self.egress = egress
        """Webhook URLs refused at creation (the HTTP API passes its policy); None: no
        check here."""
        self.sealer = sealer if sealer is not None else Sealer.from_env()
        """Seals the tasks' secret webhook headers (cronwheel.sealing), as for jobs."""

    def _stored(self, parsed: Definition, tenant_id: str) -> dict[str, Any]:
        """The definition as stored: each task's secret headers sealed. (The
        fingerprint is of the plain definition: sealing is randomised.)"""
        stored = parsed.to_dict()
        for name, task in stored.get("tasks", {}).items():
            if isinstance(task, dict) and isinstance(task.get("action"), dict):
                field = f"tasks.{name}.action"
                refuse_sealed(task["action"], field)
                task["action"] = dict(seal_action(task["action"], tenant_id, self.sealer, field))
        return stored

    def _parse(self, definition: Mapping[str, Any]) -> Definition:
        """The validated definition, or InvalidInput naming the field (``tasks.c``,
        ``edges.2.to``, ``edges`` for a cycle, ``tasks.x.action.url`` for a webhook
        target the egress policy refuses)."""
        parsed = parse_definition(definition)
        if self.egress is not None:
            for name, task in parsed.spec.tasks.items():
                if isinstance(task.action, WebhookSpec):
                    why = self.egress.url_refusal(task.action.url)
                    if why is not None:
                        raise InvalidInput(f"tasks.{name}.action.url", why)
        return parsed

    async def create(
        self, name: str, definition: Mapping[str, Any], *, tenant_id: str = DEFAULT_TENANT
    ) -> Pipeline:
        """A new pipeline at version 1. Conflict naming ``name`` if a live pipeline of
        the tenant has it."""
        parsed = self._parse(definition)
        now = self.clock.now()
        pipeline = Pipeline(
            id=new_id(),
            tenant_id=tenant_id,
            name=check_name(name),
            version=1,
            definition=self._stored(parsed, tenant_id),
            fingerprint=parsed.fingerprint(),
            created_at=now,
            updated_at=now,
            latest_version=1,
        )
        await self.store.create_pipeline(pipeline, actor=self.actor)
        return pipeline

    async def get(
        self, pipeline_id: str, *, version: int | None = None, tenant_id: str = DEFAULT_TENANT
    ) -> Pipeline:
        """The pipeline at ``version`` (None: its latest); NotFound otherwise."""
        found = await self.store.get_pipeline(tenant_id, pipeline_id, version=version)
        if found is None:
            if version is not None and await self.store.get_pipeline(tenant_id, pipeline_id):
                raise NotFound("version", f"{version} of pipeline {pipeline_id}")
            raise NotFound("pipeline", pipeline_id)
        return found

    async def list_pipelines(
        self,
        *,
        tenant_id: str = DEFAULT_TENANT,
        name: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> list[Pipeline]:
        """The tenant's live pipelines in creation order, after the id ``after``."""
        return await self.store.list_pipelines(tenant_id, name=name, after=after, limit=limit)

    async def update(
        self,
        pipeline_id: str,
        definition: Mapping[str, Any],
        *,
        expected_version: int | None = None,
        tenant_id: str = DEFAULT_TENANT,
    ) -> Pipeline:
        """Store ``definition`` as the pipeline's next version, if the pipeline is still
        at ``expected_version`` (None: whatever its latest is); StaleVersion otherwise. A
        definition with the same content changes nothing: same version."""
        parsed = self._parse(definition)
        if expected_version is None:
            expected_version = (await self.get(pipeline_id, tenant_id=tenant_id)).latest_version
        return await self.store.update_pipeline(
            tenant_id,
            pipeline_id,
            definition=self._stored(parsed, tenant_id),
            fingerprint=parsed.fingerprint(),
            expected_version=expected_version,
            now=self.clock.now(),
            actor=self.actor,
        )

    async def delete(self, pipeline_id: str, *, tenant_id: str = DEFAULT_TENANT) -> Pipeline:
        """Soft delete (idempotent): the pipeline frees its name, its versions stay."""
        return await self.store.delete_pipeline(
            tenant_id, pipeline_id, now=self.clock.now(), actor=self.actor
        )

    async def versions(
        self,
        pipeline_id: str,
        *,
        tenant_id: str = DEFAULT_TENANT,
        before: int | None = None,
        limit: int = 100,
    ) -> list[PipelineVersion]:
        """The pipeline's versions, newest first, below ``before`` if given."""
        return await self.store.list_pipeline_versions(
            tenant_id, pipeline_id, before=before, limit=limit
        )
