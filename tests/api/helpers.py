"""Job specs, keys and assertions the API tests share."""

from __future__ import annotations

import itertools
from typing import Any

import httpx

ADMIN_TOKEN = "test-admin-token-0123456789"
SECRETS_KEY = "Zq5tD3cJ0l3sYdQ0m3l7Yx0c4b2Gm5Q2w9d8Kf6hT1E="
"""A fixed Fernet key the API tests seal secret headers with."""
_names = itertools.count()


def spec(name: Any = None, **changes: Any) -> dict[str, Any]:
    """A valid cron job spec (a webhook every five minutes); ``changes`` override it."""
    return {
        "name": f"job-{next(_names)}" if name is None else name,
        "schedule": {"kind": "cron", "cron": "*/5 * * * *", "timezone": "Europe/Paris"},
        "action": {"type": "webhook", "url": "https://example.com/hook"},
        **changes,
    }


def problem(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    """Assert an error answer: its status, problem+json, the field it names."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["type"].startswith("https://cronwheel.dev/problems/")
    if field is not None:
        assert body.get("field") == field, body
    return body


async def new_key(
    client: httpx.AsyncClient, role: str, tenant_id: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"role": role, "name": f"{role} key"}
    if tenant_id is not None:
        body["tenant_id"] = tenant_id
    response = await client.post("/v1/keys", json=body)
    assert response.status_code == 201, response.text
    key: dict[str, Any] = response.json()
    return key


async def new_tenant(client: httpx.AsyncClient, tenant_id: str, **quotas: Any) -> None:
    response = await client.post("/v1/tenants", json={"id": tenant_id, "name": tenant_id, **quotas})
    assert response.status_code == 201, response.text


def pipeline(name: Any = None, **changes: Any) -> dict[str, Any]:
    """A valid pipeline: extract → load → notify; ``changes`` override its fields."""
    return {
        "name": f"pipeline-{next(_names)}" if name is None else name,
        "tasks": {
            "extract": {"action": {"type": "handler", "name": "extract"}},
            "load": {"action": {"type": "handler", "name": "load"}, "pool": "db"},
            "notify": {"action": {"type": "webhook", "url": "https://example.com/done"}},
        },
        "edges": [
            {"from": "extract", "to": "load"},
            {"from": "load", "to": "notify", "on": "on_finished"},
        ],
        **changes,
    }
