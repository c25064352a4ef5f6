"""The job form's pages without a browser: who gets a form, who gets a 403 or a 404, and
what the page carries (a fresh Idempotency-Key per load, the version it edits, no
secret)."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI

from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import new_key, new_tenant, spec


def _page(app: FastAPI, token: str) -> httpx.AsyncClient:
    return connect(app, cookies={SESSION_COOKIE: token})


async def test_a_writer_gets_a_form_with_a_fresh_idempotency_key_per_load(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    key = await new_key(client, "write")
    async with _page(app, key["token"]) as browser:
        first = (await browser.get("/ui/jobs/new")).text
        second = (await browser.get("/ui/jobs/new")).text
    keys = [re.findall(r'data-idempotency-key="([0-9a-f-]{36})"', t) for t in (first, second)]
    assert len(keys[0]) == len(keys[1]) == 1 and keys[0] != keys[1]
    assert 'data-mode="create"' in first and "Create job" in first
    assert '<option value="Europe/Paris">' in first  # the zones' datalist
    assert 'src="/ui/static/jobform.js"' in first


async def test_the_edit_page_names_the_version_and_shows_no_secret(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    action = {
        "type": "webhook",
        "url": "https://user:pa55word@example.com/h",
        "headers": {"Authorization": "Bearer s3cret"},
    }
    job = (await client.post("/v1/jobs", json=spec(action=action))).json()
    key = await new_key(client, "write")
    async with _page(app, key["token"]) as browser:
        answer = await browser.get(f"/ui/jobs/{job['id']}/edit")
    assert answer.status_code == 200, answer.text
    assert 'data-mode="edit"' in answer.text and 'data-version="1"' in answer.text
    assert "s3cret" not in answer.text and "pa55word" not in answer.text
    assert 'value="*/5 * * * *"' in answer.text


async def test_a_reader_gets_403_and_another_tenants_job_is_not_found(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    job = (await client.post("/v1/jobs", json=spec())).json()
    reader = await new_key(client, "read")
    async with _page(app, reader["token"]) as browser:
        for path in ("/ui/jobs/new", f"/ui/jobs/{job['id']}/edit"):
            answer = await browser.get(path)
            assert answer.status_code == 403
            assert "jobform" not in answer.text
    await new_tenant(client, "acme")
    stranger = await new_key(client, "write", "acme")
    async with _page(app, stranger["token"]) as browser:
        theirs = await browser.get(f"/ui/jobs/{job['id']}/edit")
        missing = await browser.get("/ui/jobs/01a1ff91-f97e-7000-8a6d-746a4710197a/edit")
        nonsense = await browser.get("/ui/jobs/not-a-job/edit")
    assert theirs.status_code == missing.status_code == nonsense.status_code == 404
    async with connect(app) as nobody:
        answer = await nobody.get("/ui/jobs/new")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/signin?next=/ui/jobs/new"
