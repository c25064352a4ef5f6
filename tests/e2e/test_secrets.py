"""No secret in any log line, error or API answer of a real cluster: an API, a scheduler
and a worker on a fresh PostgreSQL database whose URL carries a password, with an admin
token and a webhook secret, running webhook jobs that carry credential headers, to a
target that fails (and echoes what it got) and to a port where nothing listens, and
asked with a bad token. Every line of every process, every answer, and the CLI's output
are searched for every secret given."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from tests import pg
from tests.e2e.procs import REPO, free_port, wait_until
from tests.e2e.procs import cronwheel as cronwheel_proc

DB_PASSWORD = "dbpw-" + uuid.uuid4().hex  # trust authentication accepts and ignores it
ADMIN_TOKEN = "admin-" + uuid.uuid4().hex
WEBHOOK_SECRET = "whsec-" + uuid.uuid4().hex
BEARER = "bearer-" + uuid.uuid4().hex
COOKIE = "session=" + uuid.uuid4().hex
API_KEY = "key-" + uuid.uuid4().hex
URL_PASSWORD = "urlpw-" + uuid.uuid4().hex
SECRETS_KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()
BAD_TOKEN = "cw_nokey_" + uuid.uuid4().hex
SECRETS = [DB_PASSWORD, ADMIN_TOKEN, WEBHOOK_SECRET, BEARER, COOKIE, API_KEY, URL_PASSWORD]
QUERY_TOKEN = "qtok-" + uuid.uuid4().hex
SECRETS += [SECRETS_KEY, QUERY_TOKEN]
SECRETS += [BAD_TOKEN, COOKIE.split("=", 1)[1]]


class Target(BaseHTTPRequestHandler):
    """Fails every request with a 500 whose body echoes the request's headers, as a
    careless target might; remembers what it got."""

    received: list[dict[str, str]] = []  # noqa: RUF012

    def do_POST(self) -> None:
        headers = dict(self.headers.items())
        Target.received.append(headers)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"error": "boom", "you sent": headers}).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def target() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Target)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def secret_db(pg_dsn: str) -> Iterator[str]:
    """A fresh database, and its URL with a password in it."""
    name, dsn = pg.create_database("cronwheel_secrets")
    parts = urlsplit(dsn)
    netloc = f"{parts.username or 'postgres'}:{DB_PASSWORD}@{parts.hostname}:{parts.port or 5432}"
    try:
        yield parts._replace(netloc=netloc).geturl()
    finally:
        pg.drop_database(name)


async def _stored_rows(dsn: str) -> list[str]:
    """Every row of the tables that keep jobs, answers and history, read directly."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = ("jobs", "runs", "attempts", "idempotency_keys", "audit_log", "notifications")
        return [repr(tuple(r)) for t in tables for r in await conn.fetch(f"SELECT * FROM {t}")]
    finally:
        await conn.close()


@pytest.mark.timeout(150)
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_secret_in_any_log_line_error_or_answer(
    secret_db: str, target: str, tmp_path: Path, log_format: str
) -> None:
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    env = {
        "CRONWHEEL_DB": secret_db,
        "CRONWHEEL_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "CRONWHEEL_SECRETS_KEY": SECRETS_KEY,
        "CRONWHEEL_LOG_FORMAT": log_format,
        # The webhook targets listen on this machine: the API and worker must allow it.
        "CRONWHEEL_WEBHOOK_ALLOW": "127.0.0.1",
    }
    logs = [tmp_path / f"{name}.log" for name in ("migrate", "api", "scheduler", "worker")]
    migrated = subprocess.run(
        [sys.executable, "-m", "cronwheel", "migrate"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    logs[0].write_text(migrated.stdout + migrated.stderr)
    assert migrated.returncode == 0, migrated.stderr
    answers: list[str] = []
    with ExitStack() as procs:
        procs.enter_context(
            cronwheel_proc(
                "api",
                "--port",
                str(port),
                env={**env, "CRONWHEEL_ADMIN_TOKEN": ADMIN_TOKEN},
                log=logs[1],
            )
        )
        procs.enter_context(cronwheel_proc("scheduler", env=env, log=logs[2]))
        worker = procs.enter_context(
            cronwheel_proc("worker", "--pool", "default", env=env, log=logs[3])
        )
        client = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        wait_until("the API answers", lambda: client.get("/readyz").is_success, 60, logs)

        # A token in a query string: the access log shows no query value.
        answers.append(client.get("/v1/jobs", params={"token": QUERY_TOKEN, "limit": 5}).text)

        # A bad token: refused, and the refusal does not quote it.
        refused = httpx.get(f"{api}/v1/jobs", headers={"Authorization": f"Bearer {BAD_TOKEN}"})
        assert refused.status_code == 401
        answers.append(refused.text)

        retry = {"max_attempts": 2, "backoff": "fixed", "initial_delay": 0.2}
        headers = {
            "Authorization": f"Bearer {BEARER}",
            "Cookie": COOKIE,
            "X-Api-Key": API_KEY,
            "Content-Type": "application/json",
        }
        failing = client.post(
            "/v1/jobs",
            json={
                "name": "fails-with-500",
                "schedule": {"kind": "immediate"},
                "action": {"type": "webhook", "url": target, "headers": headers},
                "retry": retry,
            },
        )
        unreachable_url = f"http://hook:{URL_PASSWORD}@127.0.0.1:{free_port()}/hook"
        unreachable = client.post(
            "/v1/jobs",
            json={
                "name": "unreachable",
                "schedule": {"kind": "immediate"},
                "action": {"type": "webhook", "url": unreachable_url, "headers": headers},
                "retry": retry,
            },
        )
        assert failing.status_code == unreachable.status_code == 201, failing.text
        answers += [failing.text, unreachable.text]
        shown = failing.json()["action"]["headers"]
        assert shown == {
            "Authorization": "***",
            "Cookie": "***",
            "X-Api-Key": "***",
            "Content-Type": "application/json",
        }
        assert unreachable.json()["action"]["url"].startswith("http://hook:***@127.0.0.1:")

        ids = [failing.json()["id"], unreachable.json()["id"]]

        def both_dead() -> bool:
            runs = [client.get(f"/v1/jobs/{i}/runs").json()["items"] for i in ids]
            return all(r and r[0]["state"] == "dead" for r in runs)

        wait_until("both jobs' runs go dead after two attempts", both_dead, 60, logs)

        # The worker sent the real values; the target got them.
        assert any(h.get("Authorization") == f"Bearer {BEARER}" for h in Target.received)
        assert any(h.get("Cookie") == COOKIE for h in Target.received)

        for path in ["/v1/jobs", "/v1/dead-letter", "/v1/workers"]:
            answers.append(client.get(path).text)
        for job_id in ids:
            answers.append(client.get(f"/v1/jobs/{job_id}").text)
            runs = client.get(f"/v1/jobs/{job_id}/runs").json()["items"]
            answers.append(json.dumps(runs))
            detail = client.get(f"/v1/runs/{runs[0]['id']}")
            answers.append(detail.text)
            errors = [a["error_message"] for a in detail.json()["attempts"]]
            assert all(errors) and len(errors) == 2, detail.text
        assert any("answered 500" in a for a in answers)

        cli_env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "CRONWHEEL_URL": api,
            "CRONWHEEL_TOKEN": ADMIN_TOKEN,
        }
        for args in (["jobs", "list", "--json"], ["jobs", "list"], ["dlq", "list", "--json"]):
            shown_cli = subprocess.run(
                [sys.executable, "-m", "cronwheel", *args],
                cwd=REPO,
                env=cli_env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert shown_cli.returncode == 0, shown_cli.stderr
            answers.append(shown_cli.stdout + shown_cli.stderr)

        worker.terminate()  # a graceful stop logs too
        worker.wait(timeout=60)

    printed = {p.name: p.read_text() for p in logs}
    assert "postgres:***@" in printed["worker.log"], printed["worker.log"]
    if log_format == "json":  # the services print nothing but log lines, failures included
        parsed = {
            name: [json.loads(line) for line in printed[name].splitlines()]
            for name in ("api.log", "scheduler.log", "worker.log")
        }
        failures = [line for line in parsed["worker.log"] if line.get("outcome") == "failed"]
        assert len(failures) == 4 and all(line["error"] for line in failures), failures
    everything = [*(f"{n}: {line}" for n, t in printed.items() for line in t.splitlines())]
    everything += [f"answer: {a}" for a in answers]
    everything += [f"stored: {row}" for row in asyncio.run(_stored_rows(secret_db))]
    leaks = [(secret, line) for line in everything for secret in SECRETS if secret in line]
    assert not leaks, leaks
