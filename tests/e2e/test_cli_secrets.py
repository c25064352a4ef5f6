"""Secrets at rest and the audit log from the command line, with real processes:
`cronwheel dev`'s own key beside its file, `cronwheel secrets rotate`, and
`cronwheel audit` on an 80-column terminal and in a pipe."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import httpx

from cronwheel.control.pipelines import PipelineService
from cronwheel.control.service import JobService
from cronwheel.security.sealing import PREFIX, Sealer, generate_key, open_url
from cronwheel.store.sqlite import SqliteStore

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py).
from tests.e2e.apiserver import api_store, api_url_per_module, shared_api  # noqa: F401
from tests.e2e.procs import REPO, free_port, wait_until
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.e2e.test_cli import cli
from tests.e2e.test_cli_views import ok, on_terminal_process, piped_process
from tests.engine.webhook_target import webhook_target

BEARER = "Bearer dev-t0ken-4f2a9c"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronwheel", *args],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _rows(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return repr(conn.execute("SELECT * FROM jobs").fetchall())
    finally:
        conn.close()


def test_dev_keeps_its_key_beside_its_file_and_sends_the_real_header(tmp_path: Path) -> None:
    db = tmp_path / "dev.db"
    port = free_port()
    log = tmp_path / "dev.log"
    args = ["dev", "--db", f"sqlite:///{db}", "--port", str(port), "--duration", "60"]
    with (
        webhook_target() as target,
        cronwheel_proc(*args, env={"CRONWHEEL_SECRETS_KEY": ""}, log=log) as proc,
    ):
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}")
        wait_until("dev answers", lambda: api.get("/readyz").is_success, 60, [log])
        spec = {
            "name": "hook",
            "schedule": {"kind": "immediate"},
            "action": {
                "type": "webhook",
                "url": f"{target.url}/hook",
                "headers": {"Authorization": BEARER},
            },
        }
        created = api.post("/v1/jobs", json=spec)
        assert created.status_code == 201, created.text
        assert created.json()["action"]["headers"] == {"Authorization": "***"}
        wait_until("the target is called", lambda: target.received, 60, [log])
        assert target.received[0].headers["Authorization"] == BEARER
        proc.terminate()
        proc.wait(timeout=60)
    key_file = Path(f"{db}.secrets-key")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    out = log.read_text()
    assert f"secret webhook headers are stored encrypted; key: {key_file}" in out, out
    rows = _rows(db)
    assert "dev-t0ken-4f2a9c" not in rows and PREFIX in rows
    assert key_file.read_text().strip() not in out


async def test_secrets_rotate_reseals_with_the_new_key(tmp_path: Path) -> None:
    db = tmp_path / "cw.db"
    old = generate_key()
    store = await SqliteStore.open(db)
    try:
        await store.migrate()
        service = JobService(store, sealer=Sealer([old]))
        action = {"type": "webhook", "url": "https://example.com/h", "headers": {"X-Api-Key": "k"}}
        job = await service.create(name="j", schedule={"kind": "manual"}, action=action)
        target = {"on": ["failed"], "url": "https://hook:pipe-pw-3c5e@example.com/n"}
        definition = {"tasks": {"a": {"action": {"type": "handler", "name": "a"}}}, "edges": []}
        pipeline = await PipelineService(store, sealer=Sealer([old])).create(
            "p", {**definition, "notify": [target]}
        )
    finally:
        await store.close()
    new = _run("secrets", "new-key").stdout.strip()
    Sealer([new])  # a valid key
    refused = _run("secrets", "rotate", "--db", str(db), env={"CRONWHEEL_SECRETS_KEY": ""})
    assert refused.returncode == 2 and "--secrets-key NEW,OLD" in refused.stderr
    bad = _run("secrets", "rotate", "--db", str(db), "--secrets-key", f"{new},nope")
    assert bad.returncode == 2 and "key 2 is not a Fernet key" in bad.stderr
    done = _run("secrets", "rotate", "--db", str(db), "--secrets-key", f"{new},{old}")
    assert done.returncode == 0, done.stderr
    assert "1 of 1 jobs re-encrypted with the first key" in done.stdout
    assert "1 pipeline versions" in done.stdout  # the pipeline's target URL
    assert new not in done.stdout + done.stderr and old not in done.stdout + done.stderr
    store = await SqliteStore.open(db)
    try:
        stored = await store.get_job("default", job.id)
        stored_pipeline = await store.get_pipeline("default", pipeline.id)
    finally:
        await store.close()
    assert stored is not None
    assert Sealer([new]).open(stored.action["headers"]["X-Api-Key"], "default") == "k"
    assert stored_pipeline is not None
    stored_url = str(stored_pipeline.definition["notify"][0]["url"])
    assert open_url(stored_url, "default", Sealer([new])) == target["url"]


def test_a_pipelines_target_password_is_masked_by_the_cli(api_url: str, tmp_path: Path) -> None:
    password = "cli-pipe-pw-8d1f"
    file = tmp_path / "told.json"
    target = {"on": ["failed"], "url": f"https://hook:{password}@example.com/n"}
    tasks = {"a": {"action": {"type": "handler", "name": "a"}}}
    file.write_text(json.dumps({"tasks": tasks, "edges": [], "notify": [target]}))
    made = ok(cli(api_url, "pipelines", "create", "--file", str(file), "--name", "told"))
    as_json = ok(cli(api_url, "pipelines", "get", "told", "--json"))
    shown = ok(cli(api_url, "pipelines", "get", "told"))
    assert json.loads(as_json)["notify"][0]["url"] == "https://hook:***@example.com/n"
    for text in (made, as_json, shown):
        assert password not in text and "cwsealed" not in text


def test_audit_on_a_terminal_and_in_a_pipe(api_url: str) -> None:
    ok(cli(api_url, "tenants", "create", "acme"))
    ok(cli(api_url, "keys", "create", "--role", "read", "--name", "reader", "--tenant", "acme"))
    code, screen = on_terminal_process(api_url, "audit")  # the entry point, once
    assert code == 0, screen
    assert max(len(line) for line in screen.splitlines()) <= 80
    assert "…" not in screen and "created" in screen and "tenant" in screen
    entries = json.loads(ok(cli(api_url, "audit", "--json")))["items"]
    assert [(e["entity"], e["action"]) for e in entries] == [
        ("key", "created"),
        ("tenant", "created"),
    ]
    assert entries[0]["at"] in screen  # whole times
    lines = ok(piped_process(api_url, "audit")).splitlines()
    assert lines[0].split("\t") == ["at", "entity", "action", "actor", "entity id", "tenant", "id"]
    assert lines[1].split("\t")[:4] == [entries[0]["at"], "key", "created", "admin-token for acme"]
    tenant_only = json.loads(ok(cli(api_url, "audit", "--entity", "tenant", "--json")))
    assert [e["entity"] for e in tenant_only["items"]] == ["tenant"]
    paged = ok(cli(api_url, "audit", "--limit", "1"))
    assert "--cursor" in cli(api_url, "audit", "--limit", "1").stderr and paged
    bad = cli(api_url, "audit", "--since", "yesterday")
    assert bad.returncode == 2 and "--since" in bad.stderr
    reader = json.loads(ok(cli(api_url, "keys", "create", "--role", "read", "--json")))
    refused = cli(api_url, "audit", token=reader["token"])
    assert refused.returncode != 0 and "admin" in refused.stderr
