"""Every user action on pipeline definitions, validated, on top of the store.

The HTTP API (and through it the SDK and the CLI) goes through :class:`PipelineService`:
a definition is checked by :func:`~cronwheel.core.pipelines.definition.parse_definition`
before anything is stored, and stored as a new version only when its content changed.
A pipeline run is started here (:meth:`PipelineService.start`) or by a run of the
pipeline's job (a worker starts it, keyed by that run); the stores move it on.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cronwheel.control.brokers import check_brokers
from cronwheel.control.commands import check_commands
from cronwheel.core.clock import Clock, SystemClock
from cronwheel.core.jobspec import WebhookSpec
from cronwheel.core.model import DEFAULT_TENANT, Job, new_id
from cronwheel.core.pipelines.definition import Definition, parse_definition
from cronwheel.core.pipelines.model import (
    Pipeline,
    PipelineRun,
    PipelineRunStart,
    PipelineState,
    PipelineVersion,
)
from cronwheel.errors import Conflict, InvalidInput, NotFound
from cronwheel.security.sealing import (
    Sealer,
    SecretsKeyMissing,
    SecretUnreadable,
    keep_masked,
    keep_masked_notify,
    open_action,
    open_url,
    refuse_sealed,
    seal_action,
    seal_notify,
)
from cronwheel.store.base import Store

if TYPE_CHECKING:  # the policy's module imports httpcore
    from cronwheel.security.egress import EgressPolicy

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


def _refuse_sealed(definition: Mapping[str, Any]) -> None:
    """InvalidInput if a task's header value or URL password, or a notification
    target's URL password, as a user sent it, looks sealed: only cronwheel seals."""
    tasks = definition.get("tasks")
    for name, task in tasks.items() if isinstance(tasks, Mapping) else ():
        if isinstance(task, Mapping) and isinstance(task.get("action"), Mapping):
            refuse_sealed(task["action"], f"tasks.{name}.action")
    notify = definition.get("notify")
    for j, target in enumerate(notify if isinstance(notify, list) else ()):
        if isinstance(target, Mapping):
            refuse_sealed({"url": target.get("url")}, f"notify.{j}")


def _keep_masked(
    definition: Mapping[str, Any], current: Mapping[str, Any]
) -> tuple[Mapping[str, Any], bool]:
    """``definition`` with the values sent as read (a task's secret header as ``***``, a
    task's or target's URL as ``user:***@host``) given ``current``'s stored values, task
    by task name and target by URL; and whether any was."""
    kept = dict(definition)
    tasks, old_tasks = definition.get("tasks"), current.get("tasks") or {}
    if isinstance(tasks, Mapping):
        new_tasks = dict(tasks)
        for name, task in tasks.items():
            old = old_tasks.get(name)
            if (
                isinstance(task, Mapping)
                and isinstance(task.get("action"), Mapping)
                and isinstance(old, Mapping)
                and isinstance(old.get("action"), Mapping)
            ):
                new_tasks[name] = {
                    **task,
                    "action": keep_masked(task["action"], old["action"], f"tasks.{name}.action"),
                }
        kept["tasks"] = new_tasks
    notify = definition.get("notify")
    if isinstance(notify, list) and current.get("notify"):
        targets = [t for t in notify if isinstance(t, Mapping)]
        if len(targets) == len(notify):
            kept["notify"] = keep_masked_notify(targets, current["notify"])
    return kept, kept != dict(definition)


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
        """Seals the tasks' secret webhook headers (cronwheel.security.sealing), as for jobs."""

    def _stored(self, parsed: Definition, tenant_id: str) -> dict[str, Any]:
        """The definition as stored: each task's secret headers and URL password, and
        each notification target's URL password, sealed (values sealed already, kept
        from the stored version by :func:`_keep_masked`, stay as they are)."""
        stored = parsed.to_dict()
        for name, task in stored.get("tasks", {}).items():
            if isinstance(task, dict) and isinstance(task.get("action"), dict):
                field = f"tasks.{name}.action"
                task["action"] = dict(seal_action(task["action"], tenant_id, self.sealer, field))
        if stored.get("notify"):
            stored["notify"] = [
                dict(t) for t in seal_notify(stored["notify"], tenant_id, self.sealer)
            ]
        return stored

    def _fingerprint(self, parsed: Definition, tenant_id: str, kept: bool) -> str:
        """The fingerprint of the plain definition (sealing is randomised). When values
        sent masked were given their stored, sealed, values back (``kept``), they are
        opened for it, so a definition read and sent back unchanged makes no new
        version; one this process cannot open counts as changed (a new version)."""
        if not kept or self.sealer is None:
            return parsed.fingerprint()
        plain = parsed.to_dict()
        try:
            for task in plain["tasks"].values():
                task["action"] = dict(open_action(task["action"], tenant_id, self.sealer))
            for target in plain.get("notify", []):
                target["url"] = open_url(str(target["url"]), tenant_id, self.sealer)
        except (SecretsKeyMissing, SecretUnreadable):
            return parsed.fingerprint()
        return parse_definition(plain).fingerprint()

    async def _check_workers(self, parsed: Definition, tenant_id: str, now: datetime) -> None:
        """InvalidInput naming ``tasks.<name>.action.argv`` for a command task that no
        live worker of its pool would run (cronwheel.control.commands), and
        ``tasks.<name>.action.broker`` (``.to``) for a publish task whose broker no live
        worker of its pool names (cronwheel.control.brokers), as for jobs."""
        uses = [
            (f"tasks.{name}.action", tenant_id, task.pool, task.action.model_dump())
            for name, task in parsed.spec.tasks.items()
        ]
        await check_commands(self.store, now, uses)
        await check_brokers(self.store, now, uses)

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
            for i, target in enumerate(parsed.spec.notify):
                why = self.egress.url_refusal(target.url)
                if why is not None:
                    raise InvalidInput(f"notify.{i}.url", why)
        return parsed

    async def create(
        self, name: str, definition: Mapping[str, Any], *, tenant_id: str = DEFAULT_TENANT
    ) -> Pipeline:
        """A new pipeline at version 1. Conflict naming ``name`` if a live pipeline of
        the tenant has it."""
        _refuse_sealed(definition)
        parsed = self._parse(definition)
        now = self.clock.now()
        await self._check_workers(parsed, tenant_id, now)
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
        definition with the same content changes nothing: same version. A secret header
        sent as ``***``, or a URL as read (``user:***@host``), keeps the latest version's
        value (as a job's PATCH does): a definition read and sent back keeps its
        secrets."""
        _refuse_sealed(definition)
        latest = await self.get(pipeline_id, tenant_id=tenant_id)
        definition, kept = _keep_masked(definition, latest.definition)
        parsed = self._parse(definition)
        await self._check_workers(parsed, tenant_id, self.clock.now())
        if expected_version is None:
            expected_version = latest.latest_version
        return await self.store.update_pipeline(
            tenant_id,
            pipeline_id,
            definition=self._stored(parsed, tenant_id),
            fingerprint=self._fingerprint(parsed, tenant_id, kept),
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

    # -- pipeline runs -------------------------------------------------------------------
    async def start(self, pipeline_id: str, *, tenant_id: str = DEFAULT_TENANT) -> PipelineRun:
        """Start a run of the pipeline's latest version: its root tasks' runs are created
        with it, in one transaction. NotFound, or Conflict naming ``pipeline`` when the
        pipeline was deleted."""
        pipeline = await self.get(pipeline_id, tenant_id=tenant_id)
        if pipeline.state is PipelineState.DELETED:
            raise Conflict("pipeline", f"pipeline {pipeline_id} was deleted: it cannot run")
        job = await self.job_of(pipeline)
        start = PipelineRunStart.of(
            pipeline, job_id=job.id, job_version=job.version, actor=self.actor, now=self.clock.now()
        )
        return await self.store.start_pipeline_run(start)

    async def job_of(self, pipeline: Pipeline) -> Job:
        """The pipeline's own job, created on first use: its runs are the tasks' runs of
        the pipeline runs started here, and a run of it (a trigger, a schedule given to
        it) starts a pipeline run. It shares the pipeline's id and is named
        ``pipeline:<name>``."""
        found = await self.store.get_job(pipeline.tenant_id, pipeline.id)
        if found is not None:
            return found
        now = self.clock.now()
        job = Job(
            id=pipeline.id,
            tenant_id=pipeline.tenant_id,
            name=f"pipeline:{pipeline.name}",
            schedule={"kind": "manual"},
            action={"type": "pipeline", "pipeline_id": pipeline.id},
            created_at=now,
            updated_at=now,
        )
        try:
            await self.store.create_jobs([job], actor=self.actor)
        except Conflict:
            found = await self.store.get_job(pipeline.tenant_id, pipeline.id)
            if found is None:  # the name, not a racing start, is taken
                raise Conflict(
                    "name",
                    f"a job named {job.name!r} exists: the pipeline's own job needs that name;"
                    " rename that job",
                ) from None
            return found
        return job

    async def get_run(
        self, pipeline_run_id: str, *, tenant_id: str = DEFAULT_TENANT
    ) -> PipelineRun:
        found = await self.store.get_pipeline_run(tenant_id, pipeline_run_id)
        if found is None:
            raise NotFound("pipeline_run", pipeline_run_id)
        return found

    async def list_runs(
        self,
        *,
        tenant_id: str = DEFAULT_TENANT,
        pipeline_id: str | None = None,
        state: str | None = None,
        before: str | None = None,
        limit: int = 100,
    ) -> list[PipelineRun]:
        """Pipeline runs, newest first."""
        return await self.store.list_pipeline_runs(
            tenant_id, pipeline_id=pipeline_id, state=state, before=before, limit=limit
        )

    async def cancel_run(
        self, pipeline_run_id: str, *, tenant_id: str = DEFAULT_TENANT
    ) -> PipelineRun:
        """Cancel a pipeline run (idempotent): pending tasks are cancelled, running ones
        asked to stop, and nothing new starts."""
        return await self.store.cancel_pipeline_run(
            tenant_id, pipeline_run_id, now=self.clock.now(), actor=self.actor
        )

    async def retry_task(
        self, pipeline_run_id: str, task: str, *, tenant_id: str = DEFAULT_TENANT
    ) -> PipelineRun:
        """Run a dead task again; the tasks waiting for it resume."""
        return await self.store.retry_pipeline_task(
            tenant_id, pipeline_run_id, task, now=self.clock.now(), actor=self.actor
        )
