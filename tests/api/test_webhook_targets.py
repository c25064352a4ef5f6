"""Webhook jobs a hostile tenant could aim inward, or use to shadow cronwheel's headers,
are refused at creation with the field named (docs/security.md)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.security.egress import EgressPolicy
from cronwheel.store.base import Store
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, problem, spec


def hook(url: str, **extra: Any) -> dict[str, Any]:
    return {"type": "webhook", "url": url, **extra}


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/v1/tenants",
        "http://localhost/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://metadata.google.internal/",
        "http://10.0.0.7/",
        "http://[fd12::1]/",
        # Spellings a client resolves inward (issue 29, item 9).
        "http://[::127.0.0.1]/",
        "http://%31%32%37.0.0.1/",
        "http://127。0。0。1/",
        "http://\uff11\uff12\uff17.0.0.1/",
        "http://[::a9fe:a9fe]/",
        "http://[::ffff:0:a9fe:a9fe]/",
        "http://[64:ff9b:1::a9fe:a9fe]/",
        "http://[fec0::1]/",
    ],
)
async def test_an_internal_target_is_422_naming_action_url(
    client: httpx.AsyncClient, url: str
) -> None:
    body = problem(await client.post("/v1/jobs", json=spec(action=hook(url))), 422, "action.url")
    assert "not allowed for webhooks" in body["detail"]


async def test_a_batch_names_the_item_with_the_internal_target(client: httpx.AsyncClient) -> None:
    jobs = [spec(), spec(action=hook("http://169.254.169.254/"))]
    body = problem(await client.post("/v1/jobs/batch", json={"jobs": jobs}), 422)
    assert body["field"] == "jobs.1.action.url"


async def test_a_patch_cannot_aim_a_job_inward(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json=spec())
    assert created.status_code == 201, created.text
    patched = await client.patch(
        f"/v1/jobs/{created.json()['id']}",
        json={"action": hook("http://127.0.0.1:6379/")},
        headers={"If-Match": created.headers["ETag"]},
    )
    problem(patched, 422, "action.url")


async def test_the_operator_allow_list_opens_a_target(store: Store) -> None:
    app: FastAPI = create_app(
        store,
        auth=AuthConfig(admin_token=ADMIN_TOKEN),
        egress=EgressPolicy.parse(["10.1.0.0/16"]),
    )
    async with connect(app, ADMIN_TOKEN) as client:
        allowed = await client.post("/v1/jobs", json=spec(action=hook("http://10.1.2.3/hook")))
        assert allowed.status_code == 201, allowed.text
        refused = await client.post("/v1/jobs", json=spec(action=hook("http://10.2.0.1/hook")))
        problem(refused, 422, "action.url")


@pytest.mark.parametrize(
    ("headers", "field"),
    [
        ({"Cronwheel-Tenant-Id": "acme"}, "action.headers.Cronwheel-Tenant-Id"),
        ({"cronwheel-signature": "t=1,v2=00"}, "action.headers.cronwheel-signature"),
        ({"Idempotency-Key": "x"}, "action.headers.Idempotency-Key"),
        ({"HOST": "internal"}, "action.headers.HOST"),
        ({"Content-Length": "0"}, "action.headers.Content-Length"),
        ({"Transfer-Encoding": "chunked"}, "action.headers.Transfer-Encoding"),
        ({"Connection": "close"}, "action.headers.Connection"),
        # Receivers that read _ as - would see two (issue 29, item 10).
        ({"Cronwheel_Tenant_Id": "acme"}, "action.headers.Cronwheel_Tenant_Id"),
        ({"Cronwheel_Signature": "t=1,v2=00"}, "action.headers.Cronwheel_Signature"),
        ({"idempotency_key": "x"}, "action.headers.idempotency_key"),
        ({"Content_Length": "0"}, "action.headers.Content_Length"),
        ({"X-Team": "a", "x_team": "b"}, "action.headers.x_team"),
        ({"X-Team": "a", "x-team": "b"}, "action.headers.x-team"),
        ({"X-Evil": "a\r\nCronwheel-Tenant-Id: acme"}, "action.headers.X-Evil"),
        ({"X-Nul": "a\u0000b"}, "action.headers.X-Nul"),
        ({"Bad Name": "a"}, "action.headers"),
        ({"X-Été": "a"}, "action.headers"),
        ({f"X-{i}": "v" for i in range(33)}, "action.headers"),
        ({"X-Big": "v" * 9000}, "action.headers"),
    ],
)
async def test_bad_or_reserved_headers_are_422_naming_them(
    client: httpx.AsyncClient, headers: dict[str, str], field: str
) -> None:
    action = hook("https://example.com/hook", headers=headers)
    problem(await client.post("/v1/jobs", json=spec(action=action)), 422, field)


async def test_ordinary_headers_pass(client: httpx.AsyncClient) -> None:
    headers = {f"X-{i}": "v" * 100 for i in range(32)} | {"Authorization": "Bearer abc"}
    headers.pop("X-0")
    action = hook("https://example.com/hook", headers=headers)
    created = await client.post("/v1/jobs", json=spec(action=action))
    assert created.status_code == 201, created.text


async def test_an_action_body_over_256_kib_is_413_like_a_payload(
    client: httpx.AsyncClient,
) -> None:
    big = hook("https://example.com/hook", body="x" * 262_200)
    problem(await client.post("/v1/jobs", json=spec(action=big)), 413, "action.body")
    json_body = hook("https://example.com/hook", body={"text": "x" * 262_200})
    problem(await client.post("/v1/jobs", json=spec(action=json_body)), 413, "action.body")
    fits = hook("https://example.com/hook", body="x" * 1000)
    assert (await client.post("/v1/jobs", json=spec(action=fits))).status_code == 201
