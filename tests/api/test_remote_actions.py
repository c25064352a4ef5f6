"""Command and publish runs served by a tenant's remote workers (decision 0054): a remote
worker announces the commands it runs and the brokers it names, the API counts it for
its own tenant's jobs as it counts a cronwheel worker, and it reports a command's exit
and output, kept as a cronwheel worker's are (redacted, then cut to 64 KiB a stream)."""

from __future__ import annotations

import asyncio
import typing
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.core.brokers import KINDS
from cronwheel.core.model import SHARED_WORKERS, WorkerInfo
from cronwheel.store.base import Store
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, new_tenant, pipeline, problem, spec

POOL = "remote"
KEPT = 64 * 1024
"""Bytes of each stream an attempt keeps (cronwheel.security.output.MAX_OUTPUT)."""


def command(*argv: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "argv": list(argv), **extra}


async def remote_worker(
    app: FastAPI, admin: httpx.AsyncClient, tenant_id: str | None = None
) -> httpx.AsyncClient:
    key = await new_key(admin, "worker", tenant_id)
    return connect(app, key["token"])


async def claim(worker: httpx.AsyncClient, worker_id: str = "w1", **announced: Any) -> list[Any]:
    body = {"worker_id": worker_id, "pools": [POOL], "capacity": 10, **announced}
    response = await worker.post("/v1/workers/claim", json=body)
    assert response.status_code == 200, response.text
    runs: list[Any] = response.json()["runs"]
    return runs


async def create(client: httpx.AsyncClient, action: dict[str, Any], **changes: Any) -> Any:
    sent = spec(action=action, pool=POOL, **changes)
    return await client.post("/v1/jobs", json=sent)


async def run_command(action: dict[str, Any]) -> tuple[int, bytes, bytes]:
    """What a remote worker does with a command run: the argv as a child process, with
    the action's environment (a real process: what it prints is what it reports)."""
    proc = await asyncio.create_subprocess_exec(
        *action["argv"],
        env={"PATH": "/usr/bin:/bin", **action.get("env", {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out, err


async def test_a_remote_worker_reports_a_commands_output_kept_as_a_cronwheel_workers(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    token = "tok-5ecret-value-42"
    # 100,000 bytes of stdout then the secret: more than is kept, the secret at the end.
    script = 'head -c 100000 /dev/zero | tr "\\0" x; echo; echo "token=$DB_PASSWORD"; echo oops >&2'
    action = command("/bin/sh", "-c", script, env={"DB_PASSWORD": token, "REGION": "eu"})
    created = await create(client, action, schedule={"kind": "immediate"})
    assert created.status_code == 201, created.text
    async with await remote_worker(app, client) as worker:
        [claimed] = await claim(worker, commands=["/bin/sh"])
        # The tenant's own worker gets the command as the tenant wrote it: its secret
        # variable opened, as a webhook's secret headers are for it.
        assert claimed["action"]["env"] == {"DB_PASSWORD": token, "REGION": "eu"}
        code, out, err = await run_command(claimed["action"])
        assert code == 0 and token.encode() in out
        run = claimed["run"]
        sent = {
            "worker_id": "w1",
            "fence": run["fence"],
            "outcome": "succeeded",
            "output": {"exit_code": code, "stdout": out.decode(), "stderr": err.decode()},
        }
        done = await worker.post(f"/v1/runs/{run['id']}/complete", json=sent)
        assert done.status_code == 200, done.text
        assert done.json()["state"] == "succeeded"
    detail = await client.get(f"/v1/runs/{run['id']}")
    assert token not in detail.text
    [attempt] = detail.json()["attempts"]
    output = attempt["output"]
    assert output["exit_code"] == 0 and output["signal"] is None
    assert output["stderr"] == "oops\n"
    marker, kept = output["stdout"].split("\n", 1)
    assert marker.startswith("[… ") and marker.endswith(" bytes before this not kept …]")
    assert len(kept.encode()) == KEPT
    assert kept.endswith("x\ntoken=***\n")
    # The dashboard shows it as a cronwheel worker's.
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as ui:
        page = await ui.get(f"/ui/runs/{run['id']}")
    assert page.status_code == 200
    assert "Attempt 1: command exited with code 0" in page.text
    assert "token=***" in page.text and token not in page.text


async def test_a_command_killed_by_a_signal_is_reported_with_its_signal(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    action = command("/bin/sh", "-c", "echo started; kill -KILL $$")
    created = await create(
        client, action, schedule={"kind": "immediate"}, retry={"max_attempts": 1}
    )
    assert created.status_code == 201, created.text
    async with await remote_worker(app, client) as worker:
        [claimed] = await claim(worker, commands=["/bin/sh"])
        code, out, _ = await run_command(claimed["action"])
        assert code == -9
        run = claimed["run"]
        sent = {
            "worker_id": "w1",
            "fence": run["fence"],
            "outcome": "failed",
            "error_class": "Signal",
            "error_message": "/bin/sh was killed by SIGKILL",
            "output": {"signal": "SIGKILL", "stdout": out.decode()},
        }
        done = await worker.post(f"/v1/runs/{run['id']}/complete", json=sent)
        assert done.status_code == 200, done.text
        assert done.json()["state"] == "dead"
    [attempt] = (await client.get(f"/v1/runs/{run['id']}")).json()["attempts"]
    assert attempt["output"] == {
        "exit_code": None,
        "signal": "SIGKILL",
        "stdout": "started\n",
        "stderr": "",
    }


@pytest.mark.parametrize(
    ("output", "field"),
    [
        ({"exit_code": -1}, "output.exit_code"),
        ({"exit_code": 2**32}, "output.exit_code"),
        ({"exit_code": 1.5}, "output.exit_code"),
        ({"exit_code": "0"}, "output.exit_code"),
        ({"exit_code": 1, "signal": "SIGTERM"}, "output.signal"),
        ({"signal": "SIG\x1b[31mTERM"}, "output.signal"),
        ({"signal": ""}, "output.signal"),
        ({"stdout": 42}, "output.stdout"),
        ({"stderr": ["a"]}, "output.stderr"),
        ({"exit_code": 0, "lines": 3}, "output.lines"),
        ("exit 0", "output"),
    ],
)
async def test_bad_output_is_a_422_naming_the_field_and_the_run_stays_held(
    app: FastAPI, client: httpx.AsyncClient, output: Any, field: str
) -> None:
    created = await create(client, command("pg_dump"), schedule={"kind": "immediate"})
    assert created.status_code == 201, created.text
    async with await remote_worker(app, client) as worker:
        [claimed] = await claim(worker, commands=["pg_dump"])
        run = claimed["run"]
        url = f"/v1/runs/{run['id']}/complete"
        sent = {"worker_id": "w1", "fence": run["fence"], "outcome": "succeeded"}
        problem(await worker.post(url, json={**sent, "output": output}), 422, field)
        done = await worker.post(url, json={**sent, "output": {"exit_code": 0}})
        assert done.status_code == 200, done.text
    [attempt] = (await client.get(f"/v1/runs/{run['id']}")).json()["attempts"]
    assert attempt["output"] == {"exit_code": 0, "signal": None, "stdout": "", "stderr": ""}


async def test_only_a_command_run_has_an_output(app: FastAPI, client: httpx.AsyncClient) -> None:
    created = await create(client, {"type": "webhook", "url": "https://example.com/h"})
    assert created.status_code == 201, created.text
    triggered = await client.post(f"/v1/jobs/{created.json()['id']}/trigger")
    assert triggered.status_code in (200, 201, 202), triggered.text
    async with await remote_worker(app, client) as worker:
        [claimed] = await claim(worker)
        run = claimed["run"]
        sent = {"worker_id": "w1", "fence": run["fence"], "outcome": "succeeded"}
        url = f"/v1/runs/{run['id']}/complete"
        body = problem(await worker.post(url, json={**sent, "output": {"exit_code": 0}}), 422)
        assert body["field"] == "output"
        assert "only a command run has an output" in body["detail"]
        assert "is a webhook run" in body["detail"]
        assert (await worker.post(url, json=sent)).status_code == 200


async def test_the_commands_a_remote_worker_announces_decide_what_its_tenant_may_create(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    async with await remote_worker(app, client) as worker:
        # A remote worker that announced no patterns runs no command: its pool's jobs
        # could only fail, so they are refused, naming the way out.
        await claim(worker)
        body = problem(await create(client, command("pg_dump")), 422, "action.argv")
        assert f"no live worker of pool {POOL!r} would run 'pg_dump'" in body["detail"]
        assert "remote worker announces" in body["detail"]
        await claim(worker, commands=["pg_dump", "/opt/jobs/*"])
        assert (await create(client, command("pg_dump", "-f", "/b/db.sql"))).status_code == 201
        assert (await create(client, command("/opt/jobs/nightly"))).status_code == 201
        problem(await create(client, command("rm", "-rf", "/")), 422, "action.argv")
        # A heartbeat keeps what the claim announced unless it says otherwise.
        beat = {"worker_id": "w1", "leases": []}
        assert (await worker.post("/v1/workers/heartbeat", json=beat)).status_code == 200
        assert (await create(client, command("pg_dump"))).status_code == 201
        beat["commands"] = []
        assert (await worker.post("/v1/workers/heartbeat", json=beat)).status_code == 200
        problem(await create(client, command("pg_dump")), 422, "action.argv")
    # A cronwheel worker of the pool that does not allow it is no longer the last word:
    # the tenant's own remote worker that does counts (it was refused before).
    now = datetime.now(UTC)
    shared = WorkerInfo("box", SHARED_WORKERS, "h", (POOL,), 4, 0, now, now, commands=("curl",))
    await store.register_worker(shared)
    async with await remote_worker(app, client) as worker:
        await claim(worker, "w2", commands=["backup-*"])
    assert (await create(client, command("backup-db"))).status_code == 201
    problem(await create(client, command("pg_restore")), 422, "action.argv")


async def test_a_pipeline_task_counts_its_tenants_remote_workers(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    now = datetime.now(UTC)
    shared = WorkerInfo("box", SHARED_WORKERS, "h", (POOL,), 4, 0, now, now, commands=("curl",))
    await store.register_worker(shared)
    sent = pipeline()
    sent["tasks"]["extract"] = {"action": command("/opt/etl/extract"), "pool": POOL}
    problem(await client.post("/v1/pipelines", json=sent), 422, "tasks.extract.action.argv")
    async with await remote_worker(app, client) as worker:
        await claim(worker, commands=["/opt/etl/*"])
    created = await client.post("/v1/pipelines", json=sent)
    assert created.status_code == 201, created.text
    # A publish task likewise counts the brokers the tenant's remote worker names.
    publish = {"type": "publish", "broker": "events", "to": "etl.done"}
    sent = pipeline()
    sent["tasks"]["notify"] = {"action": publish, "pool": POOL}
    problem(await client.post("/v1/pipelines", json=sent), 422, "tasks.notify.action.broker")
    async with await remote_worker(app, client) as worker:
        await claim(worker, brokers={"events": "nats"})
    created = await client.post("/v1/pipelines", json=sent)
    assert created.status_code == 201, created.text


async def test_another_tenants_remote_worker_is_no_help(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await new_tenant(client, "t2")
    async with await remote_worker(app, client, "t2") as worker:
        await claim(worker, commands=["*"])
    # The default tenant's pool has no live worker of its own or shared: the job waits.
    created = await create(client, command("pg_dump"))
    assert created.status_code == 201, created.text
    assert [n["code"] for n in created.json()["notices"]] == ["no_live_worker"]
    async with await remote_worker(app, client) as worker:
        await claim(worker)  # the default tenant's, allowing nothing
    problem(await create(client, command("pg_dump")), 422, "action.argv")


async def test_the_brokers_a_remote_worker_announces_are_counted(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    publish = {"type": "publish", "broker": "events", "to": "orders.created", "body": {}}
    async with await remote_worker(app, client) as worker:
        await claim(worker)
        body = problem(await create(client, publish), 422, "action.broker")
        assert "(they name: none)" in body["detail"]
        await claim(worker, brokers={"events": "nats"})
        assert (await create(client, publish)).status_code == 201
        problem(await create(client, {**publish, "to": "orders.*"}), 422, "action.to")
        claimed = await claim(worker)
    assert claimed == []  # the jobs were cron jobs: nothing due yet


@pytest.mark.parametrize(
    ("announced", "field"),
    [
        ({"commands": ["opt/jobs/*"]}, "commands.0"),
        ({"commands": ["pg_dump", " "]}, "commands.1"),
        ({"commands": "pg_dump"}, "commands"),
        ({"brokers": {"events": "kafka"}}, "brokers.events"),
        ({"brokers": {"a b": "nats"}}, "brokers.a b"),
    ],
)
async def test_bad_announcements_are_a_422_naming_the_field(
    app: FastAPI, client: httpx.AsyncClient, announced: dict[str, Any], field: str
) -> None:
    async with await remote_worker(app, client) as worker:
        body = {"worker_id": "w1", "pools": [POOL], **announced}
        response = await worker.post("/v1/workers/claim", json=body)
        found = problem(response, 422)
        fields = [e.get("field") for e in found.get("errors", [])] or [found.get("field")]
        assert any(f is not None and f.startswith(field) for f in fields), found
        beat = {"worker_id": "w1", "leases": [], **announced}
        problem(await worker.post("/v1/workers/heartbeat", json=beat), 422)


def test_the_broker_kinds_a_worker_may_announce_are_the_ones_cronwheel_publishes_to() -> None:
    from cronwheel.api.inputs import BrokerKindIn
    from cronwheel.security.output import MAX_OUTPUT

    assert MAX_OUTPUT == KEPT
    assert set(typing.get_args(BrokerKindIn)) == set(KINDS)


async def test_the_workers_list_shows_what_each_worker_runs_and_names(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    now = datetime.now(UTC)
    shared = WorkerInfo(
        "box", SHARED_WORKERS, "h", (POOL,), 4, 0, now, now, {"events": "nats"}, ("pg_dump",)
    )
    await store.register_worker(shared)
    async with await remote_worker(app, client) as worker:
        await claim(worker, commands=["/opt/jobs/*"], brokers={"local": "redis"})
        items = (await worker.get("/v1/workers")).json()["items"]
    shown = [(w["id"], w["shared"], w["commands"], w["brokers"], w["host"]) for w in items]
    assert shown == [
        ("w1", False, ["/opt/jobs/*"], {"local": "redis"}, "127.0.0.1"),
        # What the operator allows tenants is shown to them; the host is not.
        ("box", True, ["pg_dump"], {"events": "nats"}, None),
    ]
