"""Secret webhook headers are stored encrypted, shown as ***, and sent for real
(docs/security.md#secrets-at-rest, decision 0026); on both stores, the stored rows read
directly from the database."""

from __future__ import annotations

import base64
import sqlite3
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.control.secrets import rotate
from cronwheel.control.service import JobService
from cronwheel.core.model import RunState
from cronwheel.engine.worker import Worker
from cronwheel.security.egress import LOOPBACK, EgressPolicy
from cronwheel.security.sealing import ENV, PREFIX, Sealer, generate_key, open_url
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import make_job
from cronwheel.store.sqlite import SqliteStore
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, SECRETS_KEY, problem, spec
from tests.engine.helpers import one_run
from tests.engine.test_worker import FAST
from tests.engine.webhook_target import webhook_target

# Crashes, races between processes and what each store keeps differ by store: this
# file runs on both whatever CRONWHEEL_TEST_STORE says (tests/tiers.py).
pytestmark = pytest.mark.both_stores

BEARER = "Bearer tok-5e1f0c3a9b7d"
API_KEY = "apikey-8c2e4b6d0f1a"
CUSTOM = "custom-3d5f7b9a1c2e"
SECRETS = ("tok-5e1f0c3a9b7d", API_KEY, CUSTOM)
TABLES = (
    "jobs",
    "idempotency_keys",
    "audit_log",
    "pipeline_versions",
    "attempts",
    "runs",
    "notifications",
)


def secret_action(url: str = "https://example.com/hook") -> dict[str, Any]:
    return {
        "type": "webhook",
        "url": url,
        "headers": {
            "Authorization": BEARER,
            "X-Api-Key": API_KEY,
            "X-Partner": CUSTOM,
            "X-Team": "ops",
        },
        "secret_headers": ["x-partner"],
    }


async def stored_text(store: Store, request: pytest.FixtureRequest) -> str:
    """Every row of the tables that hold jobs, answers and history, as text, read
    directly from the database (not through the store)."""
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.path)
        try:
            return repr([conn.execute(f"SELECT * FROM {t}").fetchall() for t in TABLES])
        finally:
            conn.close()
    pg = await asyncpg.connect(request.getfixturevalue("pg_dsn"))
    try:
        return repr([[tuple(r) for r in await pg.fetch(f"SELECT * FROM {t}")] for t in TABLES])
    finally:
        await pg.close()


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


async def test_secret_headers_are_stored_encrypted_and_read_as_stars(
    client: httpx.AsyncClient, store: Store, request: pytest.FixtureRequest
) -> None:
    body = spec(action=secret_action())
    first = await client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "k-1"})
    assert first.status_code == 201, first.text
    job = first.json()
    shown = job["action"]["headers"]
    assert shown == {
        "Authorization": "***",
        "X-Api-Key": "***",
        "X-Partner": "***",
        "X-Team": "ops",
    }
    assert job["action"]["secret_headers"] == ["x-partner"]
    listed = (await client.get("/v1/jobs")).json()["items"]
    read = (await client.get(f"/v1/jobs/{job['id']}")).json()
    replayed = await client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "k-1"})
    assert replayed.status_code == 201 and replayed.json() == job  # the same masked answer
    for answer in (listed, read, replayed.json()):
        assert_no_secret(repr(answer))
    raw = await stored_text(store, request)
    assert_no_secret(raw)
    assert raw.count(PREFIX) == 3  # the three secret values, sealed; X-Team is not
    stored = await store.get_job("default", job["id"])
    assert stored is not None
    assert stored.action["headers"]["X-Team"] == "ops"
    sealer = Sealer([SECRETS_KEY])
    opened = {
        k: sealer.open(v, "default") for k, v in stored.action["headers"].items() if k != "X-Team"
    }
    assert opened == {"Authorization": BEARER, "X-Api-Key": API_KEY, "X-Partner": CUSTOM}


async def test_pipelines_store_their_tasks_secret_headers_encrypted(
    client: httpx.AsyncClient, store: Store, request: pytest.FixtureRequest
) -> None:
    tasks = {"ping": {"action": secret_action()}}
    body = {"name": "p", "tasks": tasks, "edges": []}
    answer = await client.post("/v1/pipelines", json=body)
    assert answer.status_code == 201, answer.text
    assert_no_secret(answer.text)
    assert_no_secret(await stored_text(store, request))
    again = await client.put(
        f"/v1/pipelines/{answer.json()['id']}",
        json={"tasks": tasks, "edges": []},
        headers={"If-Match": '"1"'},
    )
    assert again.json()["version"] == 1  # the same content: no new version


async def test_without_a_key_a_secret_header_is_refused_not_stored(
    store: Store, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    app = create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))
    async with connect(app, ADMIN_TOKEN) as client:
        refused = await client.post("/v1/jobs", json=spec(action=secret_action()))
        found = problem(refused, 422, "action.headers.Authorization")
        assert ENV in found["detail"]
        plain = spec(action={"type": "webhook", "url": "https://example.com/h"})
        assert (await client.post("/v1/jobs", json=plain)).status_code == 201
    assert_no_secret(await stored_text(store, request))


async def test_a_value_that_looks_sealed_is_refused(client: httpx.AsyncClient) -> None:
    action = {"type": "webhook", "url": "https://e.com/h", "headers": {"X-Other": PREFIX + "x"}}
    problem(await client.post("/v1/jobs", json=spec(action=action)), 422, "action.headers.X-Other")


async def test_secret_headers_must_name_headers_of_the_action(client: httpx.AsyncClient) -> None:
    action = {"type": "webhook", "url": "https://e.com/h", "secret_headers": ["X-Nope"]}
    problem(await client.post("/v1/jobs", json=spec(action=action)), 422, "action.secret_headers")


async def test_a_patch_that_sends_stars_back_keeps_the_secret(
    client: httpx.AsyncClient, store: Store
) -> None:
    job = (await client.post("/v1/jobs", json=spec(action=secret_action()))).json()
    action = job["action"] | {"url": "https://example.com/other"}  # headers as read: ***
    answer = await client.patch(
        f"/v1/jobs/{job['id']}", json={"action": action}, headers={"If-Match": '"1"'}
    )
    assert answer.status_code == 200, answer.text
    stored = await store.get_job("default", job["id"])
    assert stored is not None
    sealer = Sealer([SECRETS_KEY])
    assert sealer.open(stored.action["headers"]["Authorization"], "default") == BEARER
    assert stored.action["url"] == "https://example.com/other"


async def test_the_worker_sends_the_real_value_and_only_it_opens_it(
    store: Store, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    key = generate_key()
    egress = EgressPolicy.parse(LOOPBACK)
    app = create_app(
        store, auth=AuthConfig(admin_token=ADMIN_TOKEN), sealer=Sealer([key]), egress=egress
    )
    with webhook_target() as target:
        async with connect(app, ADMIN_TOKEN) as client:
            body = spec(action=secret_action(f"{target.url}/hook"), schedule={"kind": "immediate"})
            job = (await client.post("/v1/jobs", json=body)).json()
        assert await Worker(store, FAST, sealer=key).run_once() == 1
        [received] = target.received
    assert received.headers["Authorization"] == BEARER
    assert (received.headers["X-Api-Key"], received.headers["X-Partner"]) == (API_KEY, CUSTOM)
    assert (await one_run(store, job["id"])).state is RunState.SUCCEEDED
    assert_no_secret(await stored_text(store, request))


async def test_a_worker_without_the_key_fails_the_run_naming_the_key(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    service = JobService(store, sealer=Sealer([generate_key()]))
    with webhook_target() as target:
        action = secret_action(f"{target.url}/hook")
        job = await service.create(name="j", schedule={"kind": "immediate"}, action=action)
        assert await Worker(store, FAST).run_once() == 1
        other = await service.create(name="k", schedule={"kind": "immediate"}, action=action)
        assert await Worker(store, FAST, sealer=generate_key()).run_once() == 1
        assert target.received == []  # nothing sent without the real value
    missing = await one_run(store, job.id)
    assert missing.state is RunState.DEAD  # permanent: a retry would find the same worker
    [attempt] = await store.list_attempts("default", missing.id)
    assert attempt.error_class == "SecretsKeyMissing"
    assert attempt.error_message is not None and ENV in attempt.error_message
    wrong = await one_run(store, other.id)
    [attempt] = await store.list_attempts("default", wrong.id)
    assert (wrong.state, attempt.error_class) == (RunState.DEAD, "SecretUnreadable")


async def test_a_sealed_value_opens_only_for_its_tenant() -> None:
    sealer = Sealer([generate_key()])
    sealed = sealer.seal("s3cret-value", "acme")
    assert sealer.open(sealed, "acme") == "s3cret-value"
    from cronwheel.security.sealing import SecretUnreadable

    with pytest.raises(SecretUnreadable):
        sealer.open(sealed, "other")


async def test_a_url_password_never_reaches_history_or_answers(
    app: FastAPI, store: Store, request: pytest.FixtureRequest
) -> None:
    password = "urlpw-7a9c1e3b5d"
    with webhook_target() as target:
        target.answers["/fail"] = [(500, {})]
        url = target.url.replace("http://", f"http://user:{password}@") + "/fail"
        service = JobService(store, sealer=Sealer([SECRETS_KEY]))
        action = {"type": "webhook", "url": url}
        job = await service.create(
            name="pw", schedule={"kind": "immediate"}, action=action, retry={"max_attempts": 1}
        )
        assert await Worker(store, FAST, sealer=SECRETS_KEY).run_once() == 1
        [received] = target.received
    sent = base64.b64decode(received.headers["Authorization"].removeprefix("Basic "))
    assert sent.decode() == f"user:{password}"  # the worker sent the real password
    async with connect(app, ADMIN_TOKEN) as client:
        shown = (await client.get(f"/v1/jobs/{job.id}")).text
        runs = (await client.get(f"/v1/jobs/{job.id}/runs")).json()["items"]
        run = (await client.get(f"/v1/runs/{runs[0]['id']}")).text
    assert "answered 500" in run
    for text in (shown, repr(runs), run, await stored_text(store, request)):
        assert password not in text


async def test_rotation_reseals_every_job_so_the_old_key_can_go(
    store: Store, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    old, new = generate_key(), generate_key()
    with webhook_target() as target:
        url = f"{target.url}/hook"
        service = JobService(store, sealer=Sealer([old]))
        sealed = await service.create(
            name="sealed", schedule={"kind": "manual"}, action=secret_action(url)
        )
        # A job stored by an older cronwheel, its secret header in plain text.
        legacy_target = {"on": ["dead"], "url": "https://u:legacypw-9x3@example.com/n"}
        legacy = make_job(
            "legacy", action=secret_action(url), next_fire_at=None, notify=(legacy_target,)
        )
        await store.create_jobs([legacy], [])
        before = await stored_text(store, request)
        assert BEARER.split()[1] in before  # the legacy row, as it was
        done = await rotate(store, Sealer([new, old]), now=datetime.now(UTC))
        assert (done.jobs_resealed, done.left) == (2, 0)
        assert_no_secret(await stored_text(store, request))
        assert "legacypw-9x3" not in await stored_text(store, request)
        again = await rotate(store, Sealer([new, old]), now=datetime.now(UTC))
        assert again.jobs_resealed == 0  # nothing left on the old key
        # The new key alone opens everything: the old one can be removed.
        new_only = Sealer([new])
        for job_id in (sealed.id, legacy.id):
            job = await store.get_job("default", job_id)
            assert job is not None
            assert new_only.open(job.action["headers"]["X-Api-Key"], "default") == API_KEY
        stored_legacy = await store.get_job("default", legacy.id)
        assert stored_legacy is not None
        [target_url] = [str(t["url"]) for t in stored_legacy.notify]
        assert open_url(target_url, "default", new_only) == legacy_target["url"]
        for job_id in (sealed.id, legacy.id):
            await service.trigger(job_id)
        assert await Worker(store, FAST, sealer=new).run_once() == 2
        assert [r.headers["Authorization"] for r in target.received] == [BEARER, BEARER]
    [entry] = await store.list_audit_entries(entity="tenant", actor="secrets-rotate")
    assert entry.details == {"jobs": 2}


async def test_a_remote_workers_claim_gets_the_values_it_must_send(
    app: FastAPI, client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.api.test_workers import claim, immediate, worker_client

    await immediate(client, action=secret_action())
    await immediate(client, pool="remote2", action=secret_action())
    async with await worker_client(app, client) as worker:
        [claimed] = await claim(worker)
    assert claimed["action"]["headers"]["Authorization"] == BEARER
    assert claimed["action"]["headers"]["X-Partner"] == CUSTOM
    # An API whose key does not open them shows them masked: never the sealed text.
    monkeypatch.delenv(ENV, raising=False)
    other = create_app(
        store, auth=AuthConfig(admin_token=ADMIN_TOKEN), sealer=Sealer([generate_key()])
    )
    async with connect(other, ADMIN_TOKEN) as admin:
        worker = await worker_client(other, admin)
        async with worker:
            [masked] = await claim(worker, pool="remote2")
    assert masked["action"]["headers"]["Authorization"] == "***"
    assert PREFIX not in repr(masked)


async def test_a_notification_urls_password_is_sealed_and_only_the_notifier_opens_it(
    app: FastAPI, store: Store, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cronwheel.core.model import NotificationState
    from cronwheel.engine.notifier import Notifier
    from tests.engine.helpers import eventually, running
    from tests.engine.test_notifications import LOCAL, QUICK, SECRET, _worker, notifying

    monkeypatch.delenv(ENV, raising=False)
    password = "ntpw-2b4d6f8a0c"
    with webhook_target() as target:
        url = target.url.replace("http://", f"http://hook:{password}@") + "/events"
        service = JobService(store, sealer=Sealer([SECRETS_KEY]))
        notify = [{"on": ["succeeded"], "url": url}]
        job = await service.create(
            name="n",
            schedule={"kind": "immediate"},
            action={"type": "handler", "name": "ok"},
            notify=notify,
        )
        assert password not in await stored_text(store, request)
        async with connect(app, ADMIN_TOKEN) as client:
            shown = (await client.get(f"/v1/jobs/{job.id}")).json()["notify"][0]["url"]
        assert shown.startswith("http://hook:***@127.0.0.1:")
        # A notifier without the key: the notification is dead at once, naming the key.
        async with (
            running(_worker(store)),
            notifying(Notifier(store, config=QUICK, secret=SECRET, egress=LOCAL)),
        ):

            async def dead() -> list[object]:
                return await store.list_notifications("default", state=NotificationState.DEAD)

            [n] = await eventually(dead)
        assert target.received == [] and ENV in (n.last_error or "")  # type: ignore[attr-defined]
        await store.replay_notifications("default", [n.id], now=datetime.now(UTC))  # type: ignore[attr-defined]
        notifier = Notifier(store, config=QUICK, secret=SECRET, egress=LOCAL, sealer=SECRETS_KEY)
        async with notifying(notifier):
            await eventually(lambda: _received(target))
        sent = base64.b64decode(target.received[0].headers["Authorization"].removeprefix("Basic "))
        assert sent.decode() == f"hook:{password}"
    assert password not in await stored_text(store, request)


async def _received(target: Any, n: int = 1) -> bool:
    return len(target.received) >= n


async def test_a_patch_that_sends_the_url_back_as_shown_keeps_its_password(
    client: httpx.AsyncClient, store: Store
) -> None:
    action = {"type": "webhook", "url": "https://hook:pw-77c1a9@example.com/h"}
    job = (await client.post("/v1/jobs", json=spec(action=action))).json()
    assert job["action"]["url"] == "https://hook:***@example.com/h"
    changed = job["action"] | {"method": "PUT"}  # the URL as read
    answer = await client.patch(
        f"/v1/jobs/{job['id']}", json={"action": changed}, headers={"If-Match": '"1"'}
    )
    assert answer.status_code == 200, answer.text
    stored = await store.get_job("default", job["id"])
    assert stored is not None and stored.action["method"] == "PUT"
    opened = open_url(str(stored.action["url"]), "default", Sealer([SECRETS_KEY]))
    assert opened == action["url"]


async def test_rotation_reseals_pipelines_and_their_waiting_task_runs(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipeline's versions and the task runs not finished yet carry sealed actions:
    rotation writes them again, so the old key can go while a pipeline run waits."""
    from cronwheel.control.pipelines import PipelineService

    monkeypatch.delenv(ENV, raising=False)
    old, new = generate_key(), generate_key()
    with webhook_target() as target:
        pipelines = PipelineService(store, sealer=Sealer([old]))
        pipeline = await pipelines.create(
            "sealed-pipeline",
            {"tasks": {"ping": {"action": secret_action(f"{target.url}/hook")}}, "edges": []},
        )
        waiting = await pipelines.start(pipeline.id)  # its task run is pending, old key
        done = await rotate(store, Sealer([new, old]), now=datetime.now(UTC))
        assert (done.pipeline_versions_resealed, done.task_runs_resealed) == (1, 1)
        again = await rotate(store, Sealer([new, old]), now=datetime.now(UTC))
        assert (again.pipeline_versions_resealed, again.task_runs_resealed) == (0, 0)
        later = await PipelineService(store, sealer=Sealer([new])).start(pipeline.id)
        # The new key alone: the waiting task run and a run started after rotation.
        worker = Worker(store, FAST, sealer=new)
        assert await worker.run_once() == 2
        assert [r.headers["X-Api-Key"] for r in target.received] == [API_KEY, API_KEY]
    for started in (waiting, later):
        got = await pipelines.get_run(started.id)
        assert got.state == "succeeded", got


# -- a pipeline's notification targets (decision 0026, as a job's) ----------------------
NOTIFY_PW = "pipepw-4e6a8c0b2d"


def _ok_pipeline(url: str, **extra: Any) -> dict[str, Any]:
    """A pipeline of one handler task, telling ``url`` how its runs end."""
    return {
        "tasks": {"a": {"action": {"type": "handler", "name": "ok"}}},
        "edges": [],
        "notify": [{"on": ["succeeded", "failed"], "url": url}],
        **extra,
    }


async def test_a_pipelines_notify_url_password_is_sealed_masked_and_opened_by_the_notifier(
    store: Store, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored sealed; every read shows ``user:***@`` (API, its idempotent replay, the
    versions, the SDK, the dashboard, the audit log); the notifier sends the password."""
    from cronwheel.engine.notifier import Notifier
    from cronwheel.sdk import AsyncClient
    from cronwheel.web.auth import SESSION_COOKIE
    from tests.engine.helpers import eventually, running
    from tests.engine.test_notifications import LOCAL, QUICK, SECRET, notifying

    monkeypatch.delenv(ENV, raising=False)
    app = create_app(
        store,
        auth=AuthConfig(admin_token=ADMIN_TOKEN),
        sealer=Sealer([SECRETS_KEY]),
        egress=EgressPolicy.parse(LOOPBACK),  # the target listens on this machine
    )
    with webhook_target() as target:
        url = target.url.replace("http://", f"http://hook:{NOTIFY_PW}@") + "/ended"
        # A webhook task too: its URL's password and secret header, as a job's action's.
        task_url = target.url.replace("http://", f"http://task:{NOTIFY_PW}t@") + "/task"
        webhook = {"type": "webhook", "url": task_url, "headers": {"X-Api-Key": API_KEY}}
        definition = _ok_pipeline(url, edges=[{"from": "a", "to": "w"}])
        definition["tasks"]["w"] = {"action": webhook}
        body = {"name": "told", **definition}
        key = {"Idempotency-Key": "p-told"}
        async with connect(app, ADMIN_TOKEN) as client:
            made = await client.post("/v1/pipelines", json=body, headers=key)
            assert made.status_code == 201, made.text
            replayed = await client.post("/v1/pipelines", json=body, headers=key)
            assert replayed.json() == made.json()  # the idempotency table's masked answer
            pipeline_id = made.json()["id"]
            reads = [
                made.text,
                (await client.get(f"/v1/pipelines/{pipeline_id}")).text,
                (await client.get("/v1/pipelines")).text,
                (await client.get(f"/v1/pipelines/{pipeline_id}/versions")).text,
                (await client.get("/v1/audit")).text,
            ]
        shown = made.json()["notify"][0]["url"]
        assert shown == target.url.replace("http://", "http://hook:***@") + "/ended"
        transport = httpx.ASGITransport(app=app)
        async with AsyncClient("http://test", ADMIN_TOKEN, transport=transport) as cw:
            info = await cw.get_pipeline(pipeline_id)
        assert info.notify[0]["url"] == shown
        async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as tab:
            page = await tab.get(f"/ui/pipelines/{pipeline_id}")
            assert page.status_code == 200, page.text
            reads.append(page.text)
        for text in (*reads, repr(info)):
            assert NOTIFY_PW not in text and API_KEY not in text and "cwsealed" not in text
        assert info.tasks["w"]["action"]["url"].startswith("http://task:***@127.0.0.1:")
        stored = await store.get_pipeline("default", pipeline_id)
        assert stored is not None
        stored_url = str(stored.definition["notify"][0]["url"])
        assert "cwsealed1." in stored_url
        assert open_url(stored_url, "default", Sealer([SECRETS_KEY])) == url
        assert_no_secret(text := await stored_text(store, request))
        assert NOTIFY_PW not in text
        # The pipeline runs: its webhook task, then its ending's notification, each sent
        # with its password by the one that opens it (the worker, the notifier).
        from cronwheel.control.pipelines import PipelineService

        started = await PipelineService(store).start(pipeline_id)
        worker = Worker(store, FAST, sealer=SECRETS_KEY)
        worker.handler("ok")(lambda ctx: None)
        notifier = Notifier(store, config=QUICK, secret=SECRET, egress=LOCAL, sealer=SECRETS_KEY)
        async with running(worker), notifying(notifier):
            await eventually(lambda: _received(target, 2))
        task_call, ended = target.received
        assert (task_call.path, ended.path) == ("/task", "/ended")
        assert task_call.headers["X-Api-Key"] == API_KEY
        for call, user in ((task_call, f"task:{NOTIFY_PW}t"), (ended, f"hook:{NOTIFY_PW}")):
            sent = base64.b64decode(call.headers["Authorization"].removeprefix("Basic "))
            assert sent.decode() == user
        assert (await PipelineService(store).get_run(started.id)).state == "succeeded"
    async with connect(app, ADMIN_TOKEN) as client:
        listed = (await client.get("/v1/notifications")).text
    assert "hook:***@" in listed and NOTIFY_PW not in listed
    assert NOTIFY_PW not in await stored_text(store, request)  # the outbox row too


async def test_a_pipeline_read_and_sent_back_keeps_its_secrets_and_its_version(
    client: httpx.AsyncClient, store: Store
) -> None:
    """PUT of the definition as read (``***`` headers, ``user:***@`` URLs) keeps the
    stored secrets, as a job's PATCH does: the same content, the same version."""
    task_url = f"https://task:{NOTIFY_PW}x@example.com/t"
    notify_url = f"https://hook:{NOTIFY_PW}@example.com/n"
    definition = _ok_pipeline(notify_url)
    definition["tasks"]["w"] = {"action": secret_action(task_url)}
    made = (await client.post("/v1/pipelines", json={"name": "kept", **definition})).json()
    as_read = {k: made[k] for k in ("tasks", "edges", "failure_policy", "notify")}
    assert as_read["notify"][0]["url"] == "https://hook:***@example.com/n"
    assert as_read["tasks"]["w"]["action"]["headers"]["Authorization"] == "***"
    path, first = f"/v1/pipelines/{made['id']}", {"If-Match": '"1"'}
    same = await client.put(path, json=as_read, headers=first)
    assert same.status_code == 200, same.text
    assert same.json()["version"] == 1  # nothing changed
    changed = as_read | {"failure_policy": "continue"}
    second = await client.put(path, json=changed, headers=first)
    assert second.json()["version"] == 2, second.text
    stored = await store.get_pipeline("default", made["id"])
    assert stored is not None and stored.version == 2
    sealer = Sealer([SECRETS_KEY])
    assert open_url(str(stored.definition["notify"][0]["url"]), "default", sealer) == notify_url
    action = stored.definition["tasks"]["w"]["action"]
    assert open_url(str(action["url"]), "default", sealer) == task_url
    assert sealer.open(action["headers"]["Authorization"], "default") == BEARER
    # A URL a client sealed itself is refused, as for a job's target.
    looks_sealed = stored.definition["notify"][0]["url"]
    refused = await client.put(
        path,
        json=changed | {"notify": [{"on": ["failed"], "url": looks_sealed}]},
        headers={"If-Match": '"2"'},
    )
    problem(refused, 422, "notify.0.url")
    new = {"name": "other", **_ok_pipeline(looks_sealed)}
    problem(await client.post("/v1/pipelines", json=new), 422, "notify.0.url")


async def test_without_a_key_a_pipelines_notify_url_password_is_refused_naming_it(
    store: Store, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    app = create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))
    plain, with_password = "https://example.com/x", f"https://hook:{NOTIFY_PW}@example.com/n"
    async with connect(app, ADMIN_TOKEN) as client:
        body = {"name": "p", **_ok_pipeline(plain)}
        body["notify"].append({"on": ["cancelled"], "url": with_password})
        found = problem(await client.post("/v1/pipelines", json=body), 422, "notify.1.url")
        assert ENV in found["detail"] and "password" in found["detail"]
        made = await client.post("/v1/pipelines", json={"name": "p", **_ok_pipeline(plain)})
        assert made.status_code == 201, made.text
        update = _ok_pipeline(with_password)
        path = f"/v1/pipelines/{made.json()['id']}"
        refused = await client.put(path, json=update, headers={"If-Match": '"1"'})
        assert ENV in problem(refused, 422, "notify.0.url")["detail"]
    assert NOTIFY_PW not in await stored_text(store, request)


async def test_rotation_reseals_pipelines_notify_urls(
    store: Store, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sealed with the old key, or stored in plain text by an older cronwheel: after
    rotation the new key alone opens each pipeline version's target URL."""
    from cronwheel.control.pipelines import PipelineService
    from cronwheel.core.model import new_id
    from cronwheel.core.pipelines.definition import parse_definition
    from cronwheel.core.pipelines.model import Pipeline

    monkeypatch.delenv(ENV, raising=False)
    old, new = generate_key(), generate_key()
    url = f"https://hook:{NOTIFY_PW}@example.com/n"
    sealed = await PipelineService(store, sealer=Sealer([old])).create("sealed", _ok_pipeline(url))
    legacy_url = "https://hook:legacypw-5k2@example.com/n"
    parsed = parse_definition(_ok_pipeline(legacy_url))
    now = datetime.now(UTC)
    legacy = Pipeline(
        id=new_id(),
        tenant_id="default",
        name="legacy",
        version=1,
        definition=parsed.to_dict(),
        fingerprint=parsed.fingerprint(),
        created_at=now,
        updated_at=now,
        latest_version=1,
    )
    await store.create_pipeline(legacy, actor="older-cronwheel")
    assert "legacypw-5k2" in await stored_text(store, request)  # as it was
    done = await rotate(store, Sealer([new, old]), now=now)
    assert done.pipeline_versions_resealed == 2
    text = await stored_text(store, request)
    assert "legacypw-5k2" not in text and NOTIFY_PW not in text
    again = await rotate(store, Sealer([new, old]), now=now)
    assert again.pipeline_versions_resealed == 0  # nothing left on the old key
    new_only = Sealer([new])
    for pipeline_id, plain in ((sealed.id, url), (legacy.id, legacy_url)):
        stored = await store.get_pipeline("default", pipeline_id)
        assert stored is not None
        assert open_url(str(stored.definition["notify"][0]["url"]), "default", new_only) == plain
