"""Every API call described once — method, path, body, and how to read the answer — so
the sync and async clients only differ in how they send."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from cronwheel.observability import tracing
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


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def _page(model: type[Any]) -> Callable[[Any], Page[Any]]:
    return lambda body: Page[model].model_validate(body)  # type: ignore[valid-type]


def _none(body: Any) -> None:
    return None


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def create_job(spec: dict[str, Any], idempotency_key: str | None) -> Call[JobInfo]:
    # The caller's span, if any: the job's attempts link to it (docs/observability.md).
    headers = tracing.current_headers()
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    return Call("POST", "/v1/jobs", JobInfo.model_validate, json=spec, headers=headers)


def create_jobs(specs: list[dict[str, Any]]) -> Call[list[JobInfo]]:
    return Call(
        "POST",
        "/v1/jobs/batch",
        lambda b: [JobInfo.model_validate(j) for j in b["items"]],
        json={"jobs": specs},
        headers=tracing.current_headers(),
    )


def list_jobs(**filters: Any) -> Call[Page[JobInfo]]:
    return Call("GET", "/v1/jobs", _page(JobInfo), params=_params(**filters))


def get_job(job_id: str) -> Call[JobInfo]:
    return Call("GET", f"/v1/jobs/{job_id}", JobInfo.model_validate)


def update_job(job_id: str, version: int, changes: dict[str, Any]) -> Call[JobInfo]:
    return Call(
        "PATCH",
        f"/v1/jobs/{job_id}",
        JobInfo.model_validate,
        json=changes,
        headers={"If-Match": str(version)},
    )


def job_action(job_id: str, action: str, body: dict[str, Any] | None = None) -> Call[JobInfo]:
    return Call("POST", f"/v1/jobs/{job_id}/{action}", JobInfo.model_validate, json=body)


def cancel_job(job_id: str) -> Call[JobInfo]:
    return Call("DELETE", f"/v1/jobs/{job_id}", JobInfo.model_validate)


def trigger(job_id: str) -> Call[RunInfo]:
    return Call("POST", f"/v1/jobs/{job_id}/trigger", RunInfo.model_validate)


def backfill(
    job_id: str, start: datetime, end: datetime, priority: str | None
) -> Call[BackfillInfo]:
    body: dict[str, Any] = {"start": start.isoformat(), "end": end.isoformat()}
    if priority is not None:
        body["priority"] = priority
    return Call("POST", f"/v1/jobs/{job_id}/backfill", BackfillInfo.model_validate, json=body)


def enqueue(job_id: str, payloads: Sequence[Any], idempotency_key: str | None) -> Call[list[int]]:
    # One payload passed bare would be split into runs (a string by character, a dict
    # by key) or sent as one, silently: either way not what was meant.
    if isinstance(payloads, str | bytes | Mapping):
        raise TypeError(
            f"payloads must be a list with one payload per run, not a {type(payloads).__name__}"
            ": enqueue(job_id, [payload])"
        )
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    return Call(
        "POST",
        f"/v1/jobs/{job_id}/runs",
        lambda b: list(b["run_ids"]),
        json={"payloads": list(payloads)},
        headers=headers,
    )


def job_runs(job_id: str, **filters: Any) -> Call[Page[RunInfo]]:
    return Call("GET", f"/v1/jobs/{job_id}/runs", _page(RunInfo), params=_params(**filters))


def get_run(run_id: int) -> Call[RunInfo]:
    return Call("GET", f"/v1/runs/{run_id}", RunInfo.model_validate)


def run_action(run_id: int, action: str) -> Call[RunInfo]:
    return Call("POST", f"/v1/runs/{run_id}/{action}", RunInfo.model_validate)


def dead_letter(**filters: Any) -> Call[Page[RunInfo]]:
    return Call("GET", "/v1/dead-letter", _page(RunInfo), params=_params(**filters))


def replay_dead(run_ids: list[int] | None, job_id: str | None) -> Call[list[int]]:
    body: dict[str, Any] = (
        {"run_ids": run_ids} if run_ids is not None else {"job_id": job_id, "all": True}
    )
    return Call("POST", "/v1/dead-letter/replay", lambda b: list(b["replayed"]), json=body)


def notifications(**filters: Any) -> Call[Page[NotificationInfo]]:
    return Call("GET", "/v1/notifications", _page(NotificationInfo), params=_params(**filters))


def replay_notifications(ids: list[int]) -> Call[list[int]]:
    body = {"ids": ids}
    return Call("POST", "/v1/notifications/replay", lambda b: list(b["replayed"]), json=body)


def create_tenant(tenant_id: str, name: str, **quotas: Any) -> Call[TenantInfo]:
    body = {"id": tenant_id, "name": name, **_params(**quotas)}
    return Call("POST", "/v1/tenants", TenantInfo.model_validate, json=body)


def update_tenant(tenant_id: str, changes: dict[str, Any]) -> Call[TenantInfo]:
    # Sent as given: None is JSON null, which removes a limit.
    return Call("PATCH", f"/v1/tenants/{tenant_id}", TenantInfo.model_validate, json=changes)


def _rates(body: Any) -> dict[str, float]:
    return {str(r["pool"]): float(r["per_second"]) for r in body["items"]}


def pool_rates() -> Call[dict[str, float]]:
    return Call("GET", "/v1/pool-rates", _rates)


def set_pool_rate(pool: str, per_second: float | None) -> Call[dict[str, float]]:
    return Call(
        "PUT", f"/v1/pool-rates/{quote(pool, safe='')}", _rates, json={"per_second": per_second}
    )


def list_tenants() -> Call[list[TenantInfo]]:
    return Call("GET", "/v1/tenants", lambda b: [TenantInfo.model_validate(t) for t in b["items"]])


def create_key(role: str, name: str | None, tenant_id: str | None) -> Call[KeyInfo]:
    body = {"role": role, **_params(name=name, tenant_id=tenant_id)}
    return Call("POST", "/v1/keys", KeyInfo.model_validate, json=body)


def list_keys(tenant_id: str | None) -> Call[list[KeyInfo]]:
    parse = lambda b: [KeyInfo.model_validate(k) for k in b["items"]]  # noqa: E731
    return Call("GET", "/v1/keys", parse, params=_params(tenant_id=tenant_id))


def audit(**filters: Any) -> Call[Page[AuditInfo]]:
    params = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in filters.items()}
    return Call("GET", "/v1/audit", _page(AuditInfo), params=_params(**params))


def revoke_key(key_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/keys/{key_id}", _none)


def _object(body: Any) -> dict[str, Any]:
    return dict(body)


def status(window: int | None) -> Call[dict[str, Any]]:
    return Call("GET", "/v1/status", _object, params=_params(window=window))


def why(job_id: str, at: str | None) -> Call[dict[str, Any]]:
    params = {} if at is None else {"at": at}
    return Call("GET", f"/v1/jobs/{job_id}/why", _object, params=params)


def preview_schedule(schedule: dict[str, Any], count: int) -> Call[dict[str, Any]]:
    return Call(
        "POST",
        "/v1/schedules/preview",
        _object,
        json={"schedule": schedule, "count": count},
    )


def create_pipeline(
    name: str, definition: Mapping[str, Any], idempotency_key: str | None
) -> Call[PipelineInfo]:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    body = {**definition, "name": name}
    return Call("POST", "/v1/pipelines", PipelineInfo.model_validate, json=body, headers=headers)


def list_pipelines(**filters: Any) -> Call[Page[PipelineInfo]]:
    return Call("GET", "/v1/pipelines", _page(PipelineInfo), params=_params(**filters))


def get_pipeline(pipeline_id: str, version: int | None) -> Call[PipelineInfo]:
    return Call(
        "GET",
        f"/v1/pipelines/{pipeline_id}",
        PipelineInfo.model_validate,
        params=_params(version=version),
    )


def update_pipeline(
    pipeline_id: str, version: int, definition: Mapping[str, Any]
) -> Call[PipelineInfo]:
    return Call(
        "PUT",
        f"/v1/pipelines/{pipeline_id}",
        PipelineInfo.model_validate,
        json=dict(definition),
        headers={"If-Match": str(version)},
    )


def delete_pipeline(pipeline_id: str) -> Call[PipelineInfo]:
    return Call("DELETE", f"/v1/pipelines/{pipeline_id}", PipelineInfo.model_validate)


def pipeline_versions(pipeline_id: str, **filters: Any) -> Call[Page[PipelineVersionInfo]]:
    return Call(
        "GET",
        f"/v1/pipelines/{pipeline_id}/versions",
        _page(PipelineVersionInfo),
        params=_params(**filters),
    )


def start_pipeline(pipeline_id: str, idempotency_key: str | None) -> Call[PipelineRunInfo]:
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    return Call(
        "POST", f"/v1/pipelines/{pipeline_id}/runs", PipelineRunInfo.model_validate, headers=headers
    )


def list_pipeline_runs(pipeline_id: str | None, **filters: Any) -> Call[Page[PipelineRunInfo]]:
    return Call(
        "GET",
        "/v1/pipeline-runs",
        _page(PipelineRunInfo),
        params=_params(pipeline_id=pipeline_id, **filters),
    )


def get_pipeline_run(pipeline_run_id: str) -> Call[PipelineRunInfo]:
    return Call("GET", f"/v1/pipeline-runs/{pipeline_run_id}", PipelineRunInfo.model_validate)


def cancel_pipeline_run(pipeline_run_id: str) -> Call[PipelineRunInfo]:
    return Call(
        "POST", f"/v1/pipeline-runs/{pipeline_run_id}/cancel", PipelineRunInfo.model_validate
    )


def retry_pipeline_task(pipeline_run_id: str, task: str) -> Call[PipelineRunInfo]:
    return Call(
        "POST",
        f"/v1/pipeline-runs/{pipeline_run_id}/tasks/{quote(task, safe='')}/retry",
        PipelineRunInfo.model_validate,
    )
