"""A target that echoes the request's credentials in its error answer gets none of them
recorded: not the URL's password, not the ``Basic`` credential made of it, not a secret
header's value, in no table, answer or log line (docs/security.md#secrets-at-rest)."""

from __future__ import annotations

import base64
import logging
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.control.service import JobService
from cronwheel.core.model import RunState
from cronwheel.engine.worker import Worker
from cronwheel.observability.attempt_log import ATTEMPTS_LOGGER
from cronwheel.security.sealing import Sealer
from cronwheel.store.base import Store
from tests.api.helpers import SECRETS_KEY, spec
from tests.api.test_secrets_at_rest import API_KEY, BEARER, CUSTOM, secret_action, stored_text
from tests.api.test_workers import claim, worker_client
from tests.engine.helpers import one_run
from tests.engine.test_worker import FAST
from tests.engine.webhook_target import webhook_target

USER, PASSWORD = "hookuser", "urlpw-4e6a8c0b2d"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
ECHOED = ("Authorization", "X-Api-Key", "X-Partner")


async def _fail_echoing(store: Store, action: dict[str, Any], caplog: Any) -> tuple[str, str]:
    """Run ``action`` once against a target that answers 500 with the request's
    credentials in its body; the run's stored error and the worker's log."""
    service = JobService(store, sealer=Sealer([SECRETS_KEY]))
    job = await service.create(
        name="echo", schedule={"kind": "immediate"}, action=action, retry={"max_attempts": 1}
    )
    with caplog.at_level(logging.INFO, logger=ATTEMPTS_LOGGER):
        assert await Worker(store, FAST, sealer=SECRETS_KEY).run_once() == 1
    run = await one_run(store, job.id)
    assert run.state is RunState.DEAD
    [attempt] = await store.list_attempts("default", run.id)
    assert attempt.error_message == run.last_error
    logged = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    assert "answered 500" in logged
    return str(run.last_error), logged


async def test_an_echoed_basic_credential_of_the_url_password_is_not_recorded(
    store: Store, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    with webhook_target() as target:
        target.answers["/echo"] = [(500, {})]
        target.echoes["/echo"] = ECHOED
        url = target.url.replace("http://", f"http://{USER}:{PASSWORD}@") + "/echo"
        error, logged = await _fail_echoing(store, {"type": "webhook", "url": url}, caplog)
        [received] = target.received
    assert received.headers["Authorization"] == f"Basic {BASIC}"  # what was echoed
    assert "Authorization=***" in error, error
    for text in (error, logged, await stored_text(store, request)):
        assert PASSWORD not in text
        assert BASIC not in text
        assert BASIC.rstrip("=") not in text


async def test_echoed_secret_headers_are_not_recorded(
    store: Store, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    with webhook_target() as target:
        target.answers["/echo"] = [(500, {})]
        target.echoes["/echo"] = ECHOED
        action = secret_action(f"{target.url}/echo")
        error, logged = await _fail_echoing(store, action, caplog)
        [received] = target.received
    assert received.headers["Authorization"] == BEARER
    assert "Authorization=***" in error and "X-Partner=***" in error, error
    token = BEARER.removeprefix("Bearer ")
    for text in (error, logged, await stored_text(store, request)):
        for secret in (token, API_KEY, CUSTOM, base64.b64encode(token.encode()).decode()):
            assert secret not in text


async def test_a_base64_echo_of_a_secret_header_is_not_recorded(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """A target that echoes a credential encoded (base64) is redacted too."""
    encoded = base64.b64encode(API_KEY.encode()).decode()

    with webhook_target() as target:
        target.answers["/echo"] = [(500, {})]
        target.echoes["/echo"] = ("X-Encoded",)
        action = {
            "type": "webhook",
            "url": f"{target.url}/echo",
            # The target sees the same credential under two names: one plain, one as it
            # would echo it back encoded.
            "headers": {"X-Api-Key": API_KEY, "X-Encoded": encoded},
        }
        error, logged = await _fail_echoing(store, action, caplog)
    assert "X-Encoded=***" in error, error
    assert encoded not in error and encoded not in logged


async def test_a_remote_workers_reported_error_is_redacted_as_an_in_process_one_is(
    app: FastAPI, client: httpx.AsyncClient, store: Store, request: pytest.FixtureRequest
) -> None:
    """A remote worker reports what its target answered (POST /v1/runs/{id}/complete):
    the secrets the run's action was handed out with, in every form, and any URL
    password or ``password=`` setting are masked before the error is stored."""
    url = f"https://{USER}:{PASSWORD}@example.com/hook"
    job = spec(schedule={"kind": "immediate"}, pool="remote", action=secret_action(url))
    job["retry"] = {"max_attempts": 1}
    assert (await client.post("/v1/jobs", json=job)).status_code == 201
    token = BEARER.removeprefix("Bearer ")
    echoed = [
        f"Authorization={BEARER}",
        f"X-Api-Key={API_KEY}",
        f"X-Partner={CUSTOM}",
        f"encoded={base64.b64encode(token.encode()).decode()}",
        f"basic=Basic {BASIC}",
        f"url={url}",
        "dsn=postgresql://app:dbpass-77c1@db.internal/app password=kvpass-5a2b",
    ]
    async with await worker_client(app, client) as worker:
        [claimed] = await claim(worker)
        assert claimed["action"]["headers"]["X-Partner"] == CUSTOM  # handed out opened
        run = claimed["run"]
        done = await worker.post(
            f"/v1/runs/{run['id']}/complete",
            json={
                "worker_id": "w1",
                "fence": run["fence"],
                "outcome": "failed",
                "error_class": f"Echo {API_KEY}",
                "error_message": "POST answered 500: " + " ".join(echoed),
            },
        )
    assert done.status_code == 200, done.text
    error = done.json()["last_error"]
    assert error == (
        "POST answered 500: Authorization=*** X-Api-Key=*** X-Partner=*** encoded=***"
        f" basic=*** url=https://{USER}:***@example.com/hook"
        " dsn=postgresql://app:***@db.internal/app password=***"
    )
    detail = (await client.get(f"/v1/runs/{run['id']}")).json()
    [attempt] = detail["attempts"]
    assert attempt["error_message"] == error
    assert attempt["error_class"] == "Echo ***"
    secrets = (token, API_KEY, CUSTOM, PASSWORD, BASIC, BASIC.rstrip("="), "dbpass-77c1")
    for text in (error, repr(detail), await stored_text(store, request)):
        for secret in (*secrets, "kvpass-5a2b", base64.b64encode(token.encode()).decode()):
            assert secret not in text, (secret, text)
