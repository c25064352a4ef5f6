"""Command jobs over HTTP (issue 30 item 1): what is refused (422 naming the field, a
command that no live worker of its pool would run among them), what is shown (secret
variables masked, the attempt's output tails)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.core.model import SHARED_WORKERS, WorkerInfo
from cronwheel.engine.worker import Worker
from cronwheel.security.sealing import Sealer
from cronwheel.store.base import Store
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, SECRETS_KEY, pipeline, problem, spec
from tests.api.test_sdk import sdk
from tests.engine.test_worker import FAST


def command(*argv: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "argv": list(argv), **extra}


async def live_worker(store: Store, pools: tuple[str, ...], commands: tuple[str, ...]) -> None:
    now = datetime.now(UTC)
    await store.register_worker(
        WorkerInfo(
            f"w-{pools}-{commands}", SHARED_WORKERS, "h", pools, 4, 0, now, now, commands=commands
        )
    )


@pytest.mark.parametrize(
    ("action", "field"),
    [
        (command(), "action.argv"),
        (command("./backup.sh"), "action.argv"),
        (command("/opt/../bin/sh"), "action.argv"),
        (command("pg_dump", env={"LD_PRELOAD": "/tmp/x.so"}), "action.env.LD_PRELOAD"),
        (command("pg_dump", env={"PATH": "/tmp"}), "action.env.PATH"),
        (command("pg_dump", env={"CRONWHEEL_RUN_ID": "1"}), "action.env.CRONWHEEL_RUN_ID"),
        (command("pg_dump", cwd="backups"), "action.cwd"),
        (command("pg_dump", permanent_exit_codes=[0]), "action.permanent_exit_codes"),
        (command("pg_dump", secret_env=["NOPE"]), "action.secret_env"),
    ],
)
async def test_bad_command_input_is_a_422_naming_the_field(
    client: httpx.AsyncClient, action: dict[str, Any], field: str
) -> None:
    problem(await client.post("/v1/jobs", json=spec(action=action)), 422, field)


async def test_a_command_longer_than_its_job_timeout_is_refused(client: httpx.AsyncClient) -> None:
    sent = spec(action=command("pg_dump", timeout_seconds=3600), timeout_seconds=60)
    body = problem(await client.post("/v1/jobs", json=sent), 422, "action.timeout_seconds")
    assert "longer than the job's timeout_seconds (60 s)" in body["detail"]
    alone = await client.post(
        "/v1/jobs", json=spec(action=command("pg_dump", timeout_seconds=3600))
    )
    assert alone.status_code == 201, alone.text
    assert alone.json()["timeout_seconds"] == 3600  # the job takes the command's


async def test_a_command_no_live_worker_of_its_pool_allows_is_refused(
    store: Store, client: httpx.AsyncClient
) -> None:
    await live_worker(store, ("default",), ("pg_dump", "/opt/jobs/*"))
    await live_worker(store, ("other",), ("*",))  # another pool's: no help
    body = problem(
        await client.post("/v1/jobs", json=spec(action=command("rm", "-rf", "/"))),
        422,
        "action.argv",
    )
    assert "no live worker of pool 'default' would run 'rm'" in body["detail"]
    assert "--allow-command rm" in body["detail"]
    # A name is not a path: /opt/jobs/* allows /opt/jobs/nightly, not nightly.
    problem(await client.post("/v1/jobs", json=spec(action=command("nightly"))), 422)
    for argv in (["pg_dump", "-f", "/b/db.sql"], ["/opt/jobs/nightly"]):
        created = await client.post("/v1/jobs", json=spec(action=command(*argv)))
        assert created.status_code == 201, (argv, created.text)
    # A PATCH to a command nobody runs is refused alike; a move to a pool whose workers
    # run it is not.
    job_id, match = created.json()["id"], {"If-Match": created.headers["etag"]}
    sent = {"action": command("rm")}
    patched = await client.patch(f"/v1/jobs/{job_id}", json=sent, headers=match)
    problem(patched, 422, "action.argv")
    sent = {"action": command("rm"), "pool": "other"}
    moved = await client.patch(f"/v1/jobs/{job_id}", json=sent, headers=match)
    assert moved.status_code == 200, moved.text


async def test_a_pool_no_live_worker_serves_takes_the_job_with_a_notice(
    client: httpx.AsyncClient,
) -> None:
    created = await client.post("/v1/jobs", json=spec(action=command("pg_dump"), pool="nightly"))
    assert created.status_code == 201, created.text
    assert [n["code"] for n in created.json()["notices"]] == ["no_live_worker"]


async def test_a_pipeline_task_no_live_worker_allows_is_refused(
    store: Store, client: httpx.AsyncClient
) -> None:
    await live_worker(store, ("default", "db"), ("pg_dump",))
    sent = pipeline()
    sent["tasks"]["extract"]["action"] = command("curl", "https://example.com")
    response = await client.post("/v1/pipelines", json=sent)
    problem(response, 422, "tasks.extract.action.argv")
    sent["tasks"]["extract"]["action"] = command("pg_dump")
    assert (await client.post("/v1/pipelines", json=sent)).status_code == 201


async def test_secret_env_is_masked_and_the_output_shown_redacted(
    app: FastAPI, store: Store, client: httpx.AsyncClient
) -> None:
    token = "tok-5ecret-value-42"
    action = command("/bin/sh", "-c", 'echo "token=$DB_PASSWORD"; echo done >&2')
    action["env"] = {"DB_PASSWORD": token, "REGION": "eu"}
    created = await client.post(
        "/v1/jobs", json=spec(action=action, schedule={"kind": "immediate"})
    )
    assert created.status_code == 201, created.text
    job = created.json()
    assert job["action"]["env"] == {"DB_PASSWORD": "***", "REGION": "eu"}
    assert token not in created.text
    config = dataclasses.replace(FAST, allow_commands=("/bin/sh",))
    assert await Worker(store, config, sealer=Sealer([SECRETS_KEY])).run_once() == 1
    runs = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    run = (await client.get(f"/v1/runs/{runs[0]['id']}")).json()
    assert run["state"] == "succeeded"
    [attempt] = run["attempts"]
    assert attempt["output"] == {
        "exit_code": 0,
        "signal": None,
        "stdout": "token=***\n",
        "stderr": "done\n",
    }
    # The SDK reads it.
    async with sdk(app) as cw:
        [read] = (await cw.get_run(run["id"])).attempts or []
    assert read.output is not None and read.output.stdout == "token=***\n"
    # The dashboard's run page shows it too (escaped: a tenant's output is not HTML).
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as ui:
        page = await ui.get(f"/ui/runs/{run['id']}")
    assert page.status_code == 200
    assert "Attempt 1: command exited with code 0" in page.text
    assert "token=***" in page.text and token not in page.text


async def test_the_dashboard_escapes_a_commands_output(app: FastAPI, store: Store) -> None:
    config = dataclasses.replace(FAST, allow_commands=("/bin/sh",))
    async with connect(app, ADMIN_TOKEN) as client:
        sent = spec(
            action=command("/bin/sh", "-c", "echo '<script>alert(1)</script>'; exit 3"),
            schedule={"kind": "immediate"},
            retry={"max_attempts": 1},
        )
        job = (await client.post("/v1/jobs", json=sent)).json()
        assert await Worker(store, config).run_once() == 1
        [listed] = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as ui:
        page = (await ui.get(f"/ui/runs/{listed['id']}")).text
    assert "exited with code 3" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
