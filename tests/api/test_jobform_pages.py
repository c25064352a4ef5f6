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


async def test_the_form_splits_a_command_line_by_the_clis_rule(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    writer = await new_key(client, "write")
    reader = await new_key(client, "read")
    async with _page(app, writer["token"]) as browser:
        ok = await browser.post("/ui/jobs/argv", json={"line": "pg_dump -f '/b/db 1.sql' a\\ b"})
        piped = await browser.post("/ui/jobs/argv", json={"line": "pg_dump | gzip"})
        open_quote = await browser.post("/ui/jobs/argv", json={"line": "echo 'a"})
        nonsense = await browser.post("/ui/jobs/argv", json={"words": ["a"]})
    assert ok.status_code == 200 and ok.json() == {"argv": ["pg_dump", "-f", "/b/db 1.sql", "a b"]}
    assert piped.status_code == 422
    [error] = piped.json()["errors"]
    assert error["field"] == "action.argv" and "'|' is shell syntax" in error["reason"]
    assert "sh -c 'pg_dump | gzip'" in error["reason"]
    assert open_quote.status_code == 422 and "no closing quotation" in open_quote.text
    assert nonsense.status_code == 400 and '{"line":' in nonsense.json()["errors"][0]["reason"]
    async with _page(app, reader["token"]) as browser:
        assert (await browser.post("/ui/jobs/argv", json={"line": "df"})).status_code == 403


async def test_a_command_jobs_edit_page_writes_its_argv_as_one_line(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    action = {
        "type": "command",
        "argv": ["sh", "-c", "df | tail -1"],
        "env": {"A_TOKEN": "hunter2x"},
    }
    created = await client.post("/v1/jobs", json=spec(action=action))
    assert created.status_code == 201, created.text
    key = await new_key(client, "write")
    async with _page(app, key["token"]) as browser:
        answer = await browser.get(f"/ui/jobs/{created.json()['id']}/edit")
    assert answer.status_code == 200, answer.text
    assert 'value="sh -c &#39;df | tail -1&#39;"' in answer.text
    assert "A_TOKEN=***" in answer.text and "hunter2x" not in answer.text
