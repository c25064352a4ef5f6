"""A stored secret goes only where it was given for: a job's PATCH or a pipeline's PUT
that sends a secret header back as read (``***``) keeps its stored value for the same
destination (scheme, host, port), and is refused (422 naming the header) for another,
so a write key cannot have the secret delivered in clear to a receiver of its own
(docs/security.md#secrets-at-rest)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.core.model import RunState
from cronwheel.engine.worker import Worker
from cronwheel.security.egress import LOOPBACK, EgressPolicy
from cronwheel.security.sealing import Sealer
from cronwheel.store.base import Store
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, SECRETS_KEY, new_key, problem, spec
from tests.api.test_secrets_at_rest import API_KEY, BEARER, CUSTOM, secret_action
from tests.engine.helpers import one_run
from tests.engine.test_worker import FAST
from tests.engine.webhook_target import Target, webhook_target

REASON = "a stored secret is not sent to a new destination: send its value again"
SEALER = Sealer([SECRETS_KEY])


@pytest.fixture
def app(store: Store) -> FastAPI:
    """The API with a secrets key and loopback targets allowed (the receivers here)."""
    return create_app(
        store,
        auth=AuthConfig(admin_token=ADMIN_TOKEN),
        sealer=SEALER,
        egress=EgressPolicy.parse(LOOPBACK),
    )


def _opened(action: dict[str, Any]) -> dict[str, str]:
    return {
        k: SEALER.open(v, "default") if v.startswith("cwsealed:") else v
        for k, v in action["headers"].items()
    }


async def _writer(app: FastAPI) -> httpx.AsyncClient:
    async with connect(app, ADMIN_TOKEN) as admin:
        key = await new_key(admin, "write")
    return connect(app, key["token"])


async def _run_once(store: Store, job_id: str, writer: httpx.AsyncClient) -> RunState:
    triggered = await writer.post(f"/v1/jobs/{job_id}/trigger")
    assert triggered.status_code in (200, 201, 202), triggered.text
    assert await Worker(store, FAST, sealer=SECRETS_KEY).run_once() == 1
    return (await one_run(store, job_id)).state


async def test_a_job_patched_to_a_new_destination_with_stars_is_refused(
    app: FastAPI, store: Store
) -> None:
    with webhook_target() as partner, webhook_target() as thief:
        async with await _writer(app) as writer:
            body = spec(action=secret_action(f"{partner.url}/hook"))
            job = (await writer.post("/v1/jobs", json=body)).json()
            path, first = f"/v1/jobs/{job['id']}", {"If-Match": '"1"'}
            as_read = (await writer.get(path)).json()["action"]
            assert as_read["headers"]["Authorization"] == "***"
            # Only the URL changed, to another origin (here: another port).
            stolen = as_read | {"url": f"{thief.url}/collect"}
            refused = await writer.patch(path, json={"action": stolen}, headers=first)
            found = problem(refused, 422, "action.headers.Authorization")
            assert REASON in found["detail"], found
            assert "X-Api-Key" in found["detail"] and "X-Partner" in found["detail"]
            # Another scheme or host is another destination too.
            for url in (partner.url.replace("127.0.0.1", "localhost"), "https://127.0.0.1/"):
                moved = as_read | {"url": url}
                again = await writer.patch(path, json={"action": moved}, headers=first)
                problem(again, 422, "action.headers.Authorization")
            stored = await store.get_job("default", job["id"])
            assert stored is not None and stored.version == 1
            assert stored.action["url"] == f"{partner.url}/hook"
            assert await _run_once(store, job["id"], writer) is RunState.SUCCEEDED
        assert thief.received == []
        [sent] = partner.received
        assert sent.headers["Authorization"] == BEARER


async def test_a_job_patched_with_stars_to_the_same_destination_keeps_its_secrets(
    app: FastAPI, store: Store
) -> None:
    with webhook_target() as partner:
        async with await _writer(app) as writer:
            body = spec(action=secret_action(f"{partner.url}/hook"))
            job = (await writer.post("/v1/jobs", json=body)).json()
            path = f"/v1/jobs/{job['id']}"
            # The same origin, another path and spelling: the stored values are kept.
            url = partner.url.replace("http://", "HTTP://") + "/other?x=1"
            moved = job["action"] | {"url": url}
            answer = await writer.patch(path, json={"action": moved}, headers={"If-Match": '"1"'})
            assert answer.status_code == 200, answer.text
            assert answer.json()["action"]["headers"]["Authorization"] == "***"
            stored = await store.get_job("default", job["id"])
            assert stored is not None
            assert _opened(dict(stored.action))["Authorization"] == BEARER
            assert await _run_once(store, job["id"], writer) is RunState.SUCCEEDED
        [sent] = partner.received
        assert sent.path == "/other?x=1"
        headers = (sent.headers["Authorization"], sent.headers["X-Api-Key"])
        assert headers == (BEARER, API_KEY)
        assert sent.headers["X-Partner"] == CUSTOM


async def test_a_job_moved_with_its_secrets_sent_again_is_sent_the_new_values(
    app: FastAPI, store: Store
) -> None:
    with webhook_target() as partner, webhook_target() as other:
        async with await _writer(app) as writer:
            body = spec(action=secret_action(f"{partner.url}/hook"))
            job = (await writer.post("/v1/jobs", json=body)).json()
            new_values = {"Authorization": "Bearer new-9d7b5f3a1c", "X-Api-Key": "new-key-2468ac"}
            headers = job["action"]["headers"] | new_values | {"X-Partner": "new-partner-1357"}
            moved = job["action"] | {"url": f"{other.url}/hook", "headers": headers}
            answer = await writer.patch(
                f"/v1/jobs/{job['id']}", json={"action": moved}, headers={"If-Match": '"1"'}
            )
            assert answer.status_code == 200, answer.text
            assert await _run_once(store, job["id"], writer) is RunState.SUCCEEDED
        assert partner.received == []
        [sent] = other.received
        assert sent.headers["Authorization"] == "Bearer new-9d7b5f3a1c"
        assert sent.headers["X-Partner"] == "new-partner-1357"
        assert BEARER not in repr(sent.headers) and CUSTOM not in repr(sent.headers)


def _pipeline(target: Target) -> dict[str, Any]:
    return {"tasks": {"ping": {"action": secret_action(f"{target.url}/hook")}}, "edges": []}


async def test_a_pipeline_task_put_to_a_new_destination_with_stars_is_refused(
    app: FastAPI, store: Store
) -> None:
    with webhook_target() as partner, webhook_target() as thief:
        async with await _writer(app) as writer:
            made = await writer.post("/v1/pipelines", json={"name": "p", **_pipeline(partner)})
            assert made.status_code == 201, made.text
            path = f"/v1/pipelines/{made.json()['id']}"
            as_read = {k: made.json()[k] for k in ("tasks", "edges")}
            action = as_read["tasks"]["ping"]["action"]
            assert action["headers"]["Authorization"] == "***"
            stolen = {**as_read, "tasks": {"ping": {"action": action | {"url": thief.url}}}}
            refused = await writer.put(path, json=stolen, headers={"If-Match": '"1"'})
            found = problem(refused, 422, "tasks.ping.action.headers.Authorization")
            assert REASON in found["detail"], found
            stored = await store.get_pipeline("default", made.json()["id"])
            assert stored is not None and stored.version == 1

            # The same origin: kept, a new version whose task still opens to the secret.
            same = {**as_read, "tasks": {"ping": {"action": action | {"url": f"{partner.url}/b"}}}}
            kept = await writer.put(path, json=same, headers={"If-Match": '"1"'})
            assert kept.status_code == 200 and kept.json()["version"] == 2, kept.text
            stored = await store.get_pipeline("default", made.json()["id"])
            assert stored is not None
            task = stored.definition["tasks"]["ping"]["action"]
            assert _opened(task)["Authorization"] == BEARER

            # A new destination with the values sent again: taken.
            given = {"Authorization": "Bearer fresh-0f1e2d3c", "X-Api-Key": "k-fresh-1234"}
            given |= {"X-Partner": "p-fresh-5678"}
            fresh = action | {"url": thief.url, "headers": action["headers"] | given}
            moved = await writer.put(
                path,
                json={**as_read, "tasks": {"ping": {"action": fresh}}},
                headers={"If-Match": '"2"'},
            )
            assert moved.status_code == 200 and moved.json()["version"] == 3, moved.text
            stored = await store.get_pipeline("default", made.json()["id"])
            assert stored is not None
            task = stored.definition["tasks"]["ping"]["action"]
            assert _opened(task)["Authorization"] == "Bearer fresh-0f1e2d3c"
        assert thief.received == [] and partner.received == []
