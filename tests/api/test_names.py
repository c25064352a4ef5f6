"""Names with control or bidi characters are refused everywhere a name is given: 422
naming the field, the character's code point in the reason (issue 29, item 10;
docs/security.md). They would forge log lines, drive the terminal of whoever runs
``cronwheel jobs get``, or show a name in another order than its own."""

from __future__ import annotations

import httpx
import pytest

from tests.api.helpers import pipeline as a_pipeline
from tests.api.helpers import problem, spec

BAD = [
    ("nightly\n2026-01-01 ERROR forged", "U+000A"),
    ("carriage\rreturn", "U+000D"),
    ("\x1b]0;pwned\x07title", "U+001B"),
    ("invoice\u202egpj.exe", "U+202E"),
    ("isolate\u2067x", "U+2067"),
    ("c1\x9b31m", "U+009B"),
]


@pytest.mark.parametrize(("name", "code"), BAD)
async def test_a_job_name_with_a_control_or_bidi_character_is_422(
    client: httpx.AsyncClient, name: str, code: str
) -> None:
    body = problem(await client.post("/v1/jobs", json=spec(name)), 422, "name")
    assert code in body["detail"]
    batch = {"jobs": [spec(), spec(name)]}
    body = problem(await client.post("/v1/jobs/batch", json=batch), 422, "jobs.1.name")
    assert code in body["detail"]


async def test_a_rename_and_a_handler_name_are_checked_too(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json=spec())
    assert created.status_code == 201, created.text
    patched = await client.patch(
        f"/v1/jobs/{created.json()['id']}",
        json={"name": "ok\nforged"},
        headers={"If-Match": created.headers["ETag"]},
    )
    assert "U+000A" in problem(patched, 422, "name")["detail"]
    handler = {"type": "handler", "name": "send\x1b[2J"}
    body = problem(await client.post("/v1/jobs", json=spec(action=handler)), 422, "action.name")
    assert "U+001B" in body["detail"]


async def test_pipeline_tenant_and_key_names_are_checked(client: httpx.AsyncClient) -> None:
    body = problem(await client.post("/v1/pipelines", json=a_pipeline("etl\u202e")), 422, "name")
    assert "U+202E" in body["detail"]
    tenant = {"id": "acme", "name": "ACME\r\nforged"}
    body = problem(await client.post("/v1/tenants", json=tenant), 422, "name")
    assert "U+000D" in body["detail"]
    created = await client.post("/v1/tenants", json={"id": "acme", "name": "ACME"})
    assert created.status_code == 201, created.text
    renamed = await client.patch("/v1/tenants/acme", json={"name": "\x1b[31mACME"})
    assert "U+001B" in problem(renamed, 422, "name")["detail"]
    key = {"role": "read", "name": "ci\nkey"}
    assert "U+000A" in problem(await client.post("/v1/keys", json=key), 422, "name")["detail"]


async def test_names_in_any_script_still_pass(client: httpx.AsyncClient) -> None:
    for name in ("Rapport de nuit (été)", "夜間レポート", "تقرير", "report 🕐"):
        created = await client.post("/v1/jobs", json=spec(name))
        assert created.status_code == 201, created.text
        assert created.json()["name"] == name
