"""``cronwheel.Client`` (sync) and ``cronwheel.AsyncClient`` over the HTTP API.

    with cronwheel.Client("http://127.0.0.1:8080", token) as cw:
        job = cw.create_job({"name": "ping", "schedule": {"kind": "immediate"},
                             "action": {"type": "webhook", "url": "https://example.com"}})

Errors are :mod:`cronwheel.sdk.errors` exceptions carrying the problem details.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx

from cronwheel.sdk import _calls as calls
from cronwheel.sdk.errors import error_for
from cronwheel.sdk.models import (
    AuditInfo,
    BackfillInfo,
    JobInfo,
    KeyInfo,
    NotificationInfo,
    Page,
    PipelineInfo,
    PipelineRunInfo,
    PipelineVersionInfo,
    RunInfo,
    TenantInfo,
)

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8080"


TENANT_HEADER = "Cronwheel-Tenant"


def _settings(url: str | None, token: str | None, tenant: str | None) -> tuple[str, dict[str, str]]:
    url = url or os.environ.get("CRONWHEEL_URL") or DEFAULT_URL
    token = token or os.environ.get("CRONWHEEL_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if tenant:
        headers[TENANT_HEADER] = tenant
    return url.rstrip("/"), headers


def _read(call: calls.Call[T], response: httpx.Response) -> T:
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = {"detail": response.text}
        retry = response.headers.get("Retry-After")
        raise error_for(response.status_code, problem, float(retry) if retry else None)
    return call.parse(response.json() if response.content else None)


class Client:
    """The API, synchronously. ``url``/``token`` default to CRONWHEEL_URL/CRONWHEEL_TOKEN.
    ``tenant``: a system admin's token acts for that tenant (the ``Cronwheel-Tenant``
    header); any other token may only name its own."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        tenant: str | None = None,
    ) -> None:
        base, headers = _settings(url, token, tenant)
        self._http = httpx.Client(
            base_url=base, headers=headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: calls.Call[T]) -> T:
        response = self._http.request(
            call.method, call.path, json=call.json, params=call.params, headers=call.headers
        )
        return _read(call, response)

    def create_job(self, spec: dict[str, Any], *, idempotency_key: str | None = None) -> JobInfo:
        return self._send(calls.create_job(spec, idempotency_key))

    def create_jobs(self, specs: list[dict[str, Any]]) -> list[JobInfo]:
        return self._send(calls.create_jobs(specs))

    def list_jobs(self, *, order: str | None = None, **filters: Any) -> Page[JobInfo]:
        """A page of jobs. ``filters`` are ``GET /v1/jobs``'s: ``state``, ``pool``,
        ``name_prefix``, ``name``, ``id_prefix``, ``kind``, ``last_outcome``, ``cursor``
        (the previous page's ``next_cursor``) and ``limit``. ``order``: ``created``
        (the default), ``name`` or ``next_fire``, or one of them with a leading ``-``
        for the other way round; ask for the next page in the same order (a cursor of
        another order is a :class:`~cronwheel.sdk.errors.ValidationFailed` naming
        ``cursor``)."""
        return self._send(calls.list_jobs(order=order, **filters))

    def get_job(self, job_id: str) -> JobInfo:
        return self._send(calls.get_job(job_id))

    def update_job(self, job_id: str, version: int, **changes: Any) -> JobInfo:
        return self._send(calls.update_job(job_id, version, changes))

    def pause_job(self, job_id: str) -> JobInfo:
        return self._send(calls.job_action(job_id, "pause"))

    def resume_job(self, job_id: str, *, catch_up: bool = False) -> JobInfo:
        return self._send(calls.job_action(job_id, "resume", {"catch_up": catch_up}))

    def cancel_job(self, job_id: str) -> JobInfo:
        return self._send(calls.cancel_job(job_id))

    def trigger_job(self, job_id: str) -> RunInfo:
        return self._send(calls.trigger(job_id))

    def backfill(
        self, job_id: str, start: datetime, end: datetime, *, priority: str | None = None
    ) -> BackfillInfo:
        """Give a run to every past occurrence of the job's schedule in ``[start, end)``
        that has none (a second backfill of the range creates nothing); low priority
        unless ``priority`` says otherwise. Up to 10,000 occurrences; ``end`` not in the
        future."""
        return self._send(calls.backfill(job_id, start, end, priority))

    def enqueue(
        self, job_id: str, payloads: Sequence[Any], *, idempotency_key: str | None = None
    ) -> list[int]:
        """Enqueue one run of a manual job per payload (None: the job's payload), all or
        nothing; their ids, in the order of the payloads. Up to 10,000 payloads."""
        return self._send(calls.enqueue(job_id, payloads, idempotency_key))

    def job_runs(self, job_id: str, **filters: Any) -> Page[RunInfo]:
        return self._send(calls.job_runs(job_id, **filters))

    def get_run(self, run_id: int) -> RunInfo:
        return self._send(calls.get_run(run_id))

    def cancel_run(self, run_id: int) -> RunInfo:
        return self._send(calls.run_action(run_id, "cancel"))

    def replay_run(self, run_id: int) -> RunInfo:
        return self._send(calls.run_action(run_id, "replay"))

    def dead_letter(self, **filters: Any) -> Page[RunInfo]:
        return self._send(calls.dead_letter(**filters))

    def replay_dead(
        self, run_ids: list[int] | None = None, *, job_id: str | None = None
    ) -> list[int]:
        return self._send(calls.replay_dead(run_ids, job_id))

    def notifications(self, **filters: Any) -> Page[NotificationInfo]:
        """Notifications, newest first: ``state="dead"`` for their dead letter."""
        return self._send(calls.notifications(**filters))

    def replay_notifications(self, ids: list[int]) -> list[int]:
        """Dead notifications delivered again; returns the ids replayed."""
        return self._send(calls.replay_notifications(ids))

    def create_tenant(self, tenant_id: str, name: str, **quotas: Any) -> TenantInfo:
        return self._send(calls.create_tenant(tenant_id, name, **quotas))

    def list_tenants(self) -> list[TenantInfo]:
        return self._send(calls.list_tenants())

    def update_tenant(self, tenant_id: str, **changes: Any) -> TenantInfo:
        """Change a tenant's name or limits (system admins); a limit given as None is
        removed, one not given is kept."""
        return self._send(calls.update_tenant(tenant_id, changes))

    def pool_rates(self) -> dict[str, float]:
        """The rate-limited pools: run starts a second, across the cluster."""
        return self._send(calls.pool_rates())

    def set_pool_rate(self, pool: str, per_second: float | None) -> dict[str, float]:
        """Limit a pool's run starts a second (system admins); None removes the limit.
        Returns every limit."""
        return self._send(calls.set_pool_rate(pool, per_second))

    def create_key(
        self, role: str, *, name: str | None = None, tenant_id: str | None = None
    ) -> KeyInfo:
        return self._send(calls.create_key(role, name, tenant_id))

    def list_keys(self, *, tenant_id: str | None = None) -> list[KeyInfo]:
        return self._send(calls.list_keys(tenant_id))

    def audit(self, **filters: Any) -> Page[AuditInfo]:
        """A page of the audit log, newest first (admins). ``filters``: ``tenant``,
        ``actor``, ``entity`` (job, run, pipeline, tenant, key), ``since`` and ``until``
        (datetimes or ISO 8601), ``cursor`` (the previous page's ``next_cursor``) and
        ``limit``."""
        return self._send(calls.audit(**filters))

    def status(self, *, window: int | None = None) -> dict[str, Any]:
        """Is it healthy? ``GET /v1/status`` as JSON (see docs/api.md); ``window``:
        minutes of finished attempts that lag, throughput and failures cover."""
        return self._send(calls.status(window))

    def why(self, job_id: str, at: str | None = None) -> dict[str, Any]:
        """Why didn't the job run at ``at`` (``HH:MM`` today in its zone, or ISO 8601;
        None: its latest occurrence at or before now)? ``GET /v1/jobs/{id}/why`` as JSON."""
        return self._send(calls.why(job_id, at))

    def preview_schedule(self, schedule: dict[str, Any], *, count: int = 10) -> dict[str, Any]:
        """What ``schedule`` (as a job takes it) will do: ``POST /v1/schedules/preview``
        as JSON, ``{"fires": [{"at", "local", "offset", "dst", "offset_changed"}],
        "description", "timezone"}``; a bad schedule raises what a create would."""
        return self._send(calls.preview_schedule(schedule, count))

    def revoke_key(self, key_id: str) -> None:
        self._send(calls.revoke_key(key_id))

    # -- pipelines (decision 0025) ------------------------------------------------------
    def create_pipeline(
        self, name: str, definition: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> PipelineInfo:
        """A new pipeline at version 1 from ``definition`` (``tasks``, ``edges``,
        ``failure_policy``). A bad definition is a
        :class:`~cronwheel.sdk.errors.ValidationFailed` naming the field (``edges.2.to``;
        ``edges`` for a cycle); a name a live pipeline has, a ConflictError."""
        return self._send(calls.create_pipeline(name, definition, idempotency_key))

    def list_pipelines(self, **filters: Any) -> Page[PipelineInfo]:
        """A page of live pipelines, oldest first. ``filters``: ``name``, ``cursor``,
        ``limit``."""
        return self._send(calls.list_pipelines(**filters))

    def get_pipeline(self, pipeline_id: str, *, version: int | None = None) -> PipelineInfo:
        """The pipeline at its latest version, or at ``version``."""
        return self._send(calls.get_pipeline(pipeline_id, version))

    def update_pipeline(
        self, pipeline_id: str, version: int, definition: Mapping[str, Any]
    ) -> PipelineInfo:
        """Store ``definition`` as the next version of a pipeline still at ``version``
        (else :class:`~cronwheel.sdk.errors.StaleVersionError`); the same content keeps the
        version."""
        return self._send(calls.update_pipeline(pipeline_id, version, definition))

    def delete_pipeline(self, pipeline_id: str) -> PipelineInfo:
        return self._send(calls.delete_pipeline(pipeline_id))

    def pipeline_versions(self, pipeline_id: str, **filters: Any) -> Page[PipelineVersionInfo]:
        """A page of the pipeline's versions, newest first (``cursor``, ``limit``)."""
        return self._send(calls.pipeline_versions(pipeline_id, **filters))

    # -- pipeline runs -------------------------------------------------------------------
    def start_pipeline(
        self, pipeline_id: str, *, idempotency_key: str | None = None
    ) -> PipelineRunInfo:
        """Start a run of the pipeline's latest version (its root tasks' runs are created
        with it). With ``idempotency_key``, a repeated call answers the first one's run.
        A deleted pipeline is a ConflictError."""
        return self._send(calls.start_pipeline(pipeline_id, idempotency_key))

    def list_pipeline_runs(
        self, pipeline_id: str | None = None, *, state: str | None = None, **filters: Any
    ) -> Page[PipelineRunInfo]:
        """A page of pipeline runs, newest first, without their tasks: of one pipeline,
        in one ``state`` (``running``, ``succeeded``, ``failed``, ``cancelled``).
        ``filters``: ``cursor``, ``limit``."""
        return self._send(calls.list_pipeline_runs(pipeline_id, state=state, **filters))

    def get_pipeline_run(self, pipeline_run_id: str) -> PipelineRunInfo:
        """A pipeline run with every task row (a task without one still waits)."""
        return self._send(calls.get_pipeline_run(pipeline_run_id))

    def cancel_pipeline_run(self, pipeline_run_id: str) -> PipelineRunInfo:
        """Cancel a pipeline run (idempotent): pending tasks are cancelled, running ones
        asked to stop, nothing new starts."""
        return self._send(calls.cancel_pipeline_run(pipeline_run_id))

    def retry_pipeline_task(self, pipeline_run_id: str, task: str) -> PipelineRunInfo:
        """Run a dead task again; the tasks skipped because it failed wait for it again.
        A task that is not dead is a ConflictError naming ``task``."""
        return self._send(calls.retry_pipeline_task(pipeline_run_id, task))


class AsyncClient:
    """The same API, for asyncio code."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        tenant: str | None = None,
    ) -> None:
        base, headers = _settings(url, token, tenant)
        self._http = httpx.AsyncClient(
            base_url=base, headers=headers, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, call: calls.Call[T]) -> T:
        response = await self._http.request(
            call.method, call.path, json=call.json, params=call.params, headers=call.headers
        )
        return _read(call, response)

    async def create_job(
        self, spec: dict[str, Any], *, idempotency_key: str | None = None
    ) -> JobInfo:
        return await self._send(calls.create_job(spec, idempotency_key))

    async def create_jobs(self, specs: list[dict[str, Any]]) -> list[JobInfo]:
        return await self._send(calls.create_jobs(specs))

    async def list_jobs(self, *, order: str | None = None, **filters: Any) -> Page[JobInfo]:
        """A page of jobs. ``filters`` are ``GET /v1/jobs``'s: ``state``, ``pool``,
        ``name_prefix``, ``name``, ``id_prefix``, ``kind``, ``last_outcome``, ``cursor``
        (the previous page's ``next_cursor``) and ``limit``. ``order``: ``created``
        (the default), ``name`` or ``next_fire``, or one of them with a leading ``-``
        for the other way round; ask for the next page in the same order (a cursor of
        another order is a :class:`~cronwheel.sdk.errors.ValidationFailed` naming
        ``cursor``)."""
        return await self._send(calls.list_jobs(order=order, **filters))

    async def get_job(self, job_id: str) -> JobInfo:
        return await self._send(calls.get_job(job_id))

    async def update_job(self, job_id: str, version: int, **changes: Any) -> JobInfo:
        return await self._send(calls.update_job(job_id, version, changes))

    async def pause_job(self, job_id: str) -> JobInfo:
        return await self._send(calls.job_action(job_id, "pause"))

    async def resume_job(self, job_id: str, *, catch_up: bool = False) -> JobInfo:
        return await self._send(calls.job_action(job_id, "resume", {"catch_up": catch_up}))

    async def cancel_job(self, job_id: str) -> JobInfo:
        return await self._send(calls.cancel_job(job_id))

    async def trigger_job(self, job_id: str) -> RunInfo:
        return await self._send(calls.trigger(job_id))

    async def backfill(
        self, job_id: str, start: datetime, end: datetime, *, priority: str | None = None
    ) -> BackfillInfo:
        """Give a run to every past occurrence of the job's schedule in ``[start, end)``
        that has none (a second backfill of the range creates nothing); low priority
        unless ``priority`` says otherwise. Up to 10,000 occurrences; ``end`` not in the
        future."""
        return await self._send(calls.backfill(job_id, start, end, priority))

    async def enqueue(
        self, job_id: str, payloads: Sequence[Any], *, idempotency_key: str | None = None
    ) -> list[int]:
        """Enqueue one run of a manual job per payload (None: the job's payload), all or
        nothing; their ids, in the order of the payloads. Up to 10,000 payloads."""
        return await self._send(calls.enqueue(job_id, payloads, idempotency_key))

    async def job_runs(self, job_id: str, **filters: Any) -> Page[RunInfo]:
        return await self._send(calls.job_runs(job_id, **filters))

    async def get_run(self, run_id: int) -> RunInfo:
        return await self._send(calls.get_run(run_id))

    async def cancel_run(self, run_id: int) -> RunInfo:
        return await self._send(calls.run_action(run_id, "cancel"))

    async def replay_run(self, run_id: int) -> RunInfo:
        return await self._send(calls.run_action(run_id, "replay"))

    async def dead_letter(self, **filters: Any) -> Page[RunInfo]:
        return await self._send(calls.dead_letter(**filters))

    async def replay_dead(
        self, run_ids: list[int] | None = None, *, job_id: str | None = None
    ) -> list[int]:
        return await self._send(calls.replay_dead(run_ids, job_id))

    async def notifications(self, **filters: Any) -> Page[NotificationInfo]:
        """Notifications, newest first: ``state="dead"`` for their dead letter."""
        return await self._send(calls.notifications(**filters))

    async def replay_notifications(self, ids: list[int]) -> list[int]:
        """Dead notifications delivered again; returns the ids replayed."""
        return await self._send(calls.replay_notifications(ids))

    async def create_tenant(self, tenant_id: str, name: str, **quotas: Any) -> TenantInfo:
        return await self._send(calls.create_tenant(tenant_id, name, **quotas))

    async def list_tenants(self) -> list[TenantInfo]:
        return await self._send(calls.list_tenants())

    async def update_tenant(self, tenant_id: str, **changes: Any) -> TenantInfo:
        """Change a tenant's name or limits (system admins); a limit given as None is
        removed, one not given is kept."""
        return await self._send(calls.update_tenant(tenant_id, changes))

    async def pool_rates(self) -> dict[str, float]:
        """The rate-limited pools: run starts a second, across the cluster."""
        return await self._send(calls.pool_rates())

    async def set_pool_rate(self, pool: str, per_second: float | None) -> dict[str, float]:
        """Limit a pool's run starts a second (system admins); None removes the limit.
        Returns every limit."""
        return await self._send(calls.set_pool_rate(pool, per_second))

    async def create_key(
        self, role: str, *, name: str | None = None, tenant_id: str | None = None
    ) -> KeyInfo:
        return await self._send(calls.create_key(role, name, tenant_id))

    async def list_keys(self, *, tenant_id: str | None = None) -> list[KeyInfo]:
        return await self._send(calls.list_keys(tenant_id))

    async def audit(self, **filters: Any) -> Page[AuditInfo]:
        """See :meth:`Client.audit`."""
        return await self._send(calls.audit(**filters))

    async def status(self, *, window: int | None = None) -> dict[str, Any]:
        """See :meth:`Client.status`."""
        return await self._send(calls.status(window))

    async def why(self, job_id: str, at: str | None = None) -> dict[str, Any]:
        """See :meth:`Client.why`."""
        return await self._send(calls.why(job_id, at))

    async def preview_schedule(
        self, schedule: dict[str, Any], *, count: int = 10
    ) -> dict[str, Any]:
        """See :meth:`Client.preview_schedule`."""
        return await self._send(calls.preview_schedule(schedule, count))

    async def revoke_key(self, key_id: str) -> None:
        await self._send(calls.revoke_key(key_id))

    # -- pipelines (decision 0025) ------------------------------------------------------
    async def create_pipeline(
        self, name: str, definition: Mapping[str, Any], *, idempotency_key: str | None = None
    ) -> PipelineInfo:
        """A new pipeline at version 1 from ``definition`` (``tasks``, ``edges``,
        ``failure_policy``). A bad definition is a
        :class:`~cronwheel.sdk.errors.ValidationFailed` naming the field (``edges.2.to``;
        ``edges`` for a cycle); a name a live pipeline has, a ConflictError."""
        return await self._send(calls.create_pipeline(name, definition, idempotency_key))

    async def list_pipelines(self, **filters: Any) -> Page[PipelineInfo]:
        """A page of live pipelines, oldest first. ``filters``: ``name``, ``cursor``,
        ``limit``."""
        return await self._send(calls.list_pipelines(**filters))

    async def get_pipeline(self, pipeline_id: str, *, version: int | None = None) -> PipelineInfo:
        """The pipeline at its latest version, or at ``version``."""
        return await self._send(calls.get_pipeline(pipeline_id, version))

    async def update_pipeline(
        self, pipeline_id: str, version: int, definition: Mapping[str, Any]
    ) -> PipelineInfo:
        """Store ``definition`` as the next version of a pipeline still at ``version``
        (else :class:`~cronwheel.sdk.errors.StaleVersionError`); the same content keeps the
        version."""
        return await self._send(calls.update_pipeline(pipeline_id, version, definition))

    async def delete_pipeline(self, pipeline_id: str) -> PipelineInfo:
        return await self._send(calls.delete_pipeline(pipeline_id))

    async def pipeline_versions(
        self, pipeline_id: str, **filters: Any
    ) -> Page[PipelineVersionInfo]:
        """A page of the pipeline's versions, newest first (``cursor``, ``limit``)."""
        return await self._send(calls.pipeline_versions(pipeline_id, **filters))

    # -- pipeline runs -------------------------------------------------------------------
    async def start_pipeline(
        self, pipeline_id: str, *, idempotency_key: str | None = None
    ) -> PipelineRunInfo:
        """See :meth:`Client.start_pipeline`."""
        return await self._send(calls.start_pipeline(pipeline_id, idempotency_key))

    async def list_pipeline_runs(
        self, pipeline_id: str | None = None, *, state: str | None = None, **filters: Any
    ) -> Page[PipelineRunInfo]:
        """See :meth:`Client.list_pipeline_runs`."""
        return await self._send(calls.list_pipeline_runs(pipeline_id, state=state, **filters))

    async def get_pipeline_run(self, pipeline_run_id: str) -> PipelineRunInfo:
        """See :meth:`Client.get_pipeline_run`."""
        return await self._send(calls.get_pipeline_run(pipeline_run_id))

    async def cancel_pipeline_run(self, pipeline_run_id: str) -> PipelineRunInfo:
        """See :meth:`Client.cancel_pipeline_run`."""
        return await self._send(calls.cancel_pipeline_run(pipeline_run_id))

    async def retry_pipeline_task(self, pipeline_run_id: str, task: str) -> PipelineRunInfo:
        """See :meth:`Client.retry_pipeline_task`."""
        return await self._send(calls.retry_pipeline_task(pipeline_run_id, task))
