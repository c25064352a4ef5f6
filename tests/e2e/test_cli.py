"""The CLI and the sync SDK against `cronwheel api` as a real process, on each store. The
commands run in the test process (tests/e2e/clirun.py), except in
test_each_command_family_answers_as_a_real_process."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronwheel.observability.logs import json_lines
from cronwheel.sdk import Client
from cronwheel.security.redact import redact
from tests.e2e import clirun

# The fixtures: one `cronwheel api` for this file, its store put back before each test.
from tests.e2e.apiserver import (  # noqa: F401
    SECRETS_KEY,
    TOKEN,
    api_store,
    api_url_per_module,
    shared_api,
)


def _env(url: str, token: str) -> dict[str, str]:
    return {"CRONWHEEL_URL": url, "CRONWHEEL_TOKEN": token}


def cli(
    url: str, *args: str, token: str = TOKEN, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``cronwheel ARGS`` against the API at ``url``, output in a pipe, in this process
    (tests/e2e/clirun.py)."""
    return clirun.run(args, _env(url, token), stdin=stdin)


def cli_process(
    url: str, *args: str, token: str = TOKEN, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The same, as a real ``python -m cronwheel`` process: for the tests that prove the
    entry point of a command family."""
    return clirun.real(args, _env(url, token), stdin=stdin)


def test_each_command_family_answers_as_a_real_process(api_url: str) -> None:
    """The other tests run the commands in this process (tests/e2e/clirun.py); here
    ``python -m cronwheel`` itself, once per command family: the entry point, each
    family loaded by a fresh interpreter, its output in a real pipe and its exit codes."""
    made = cli_process(api_url, "jobs", "create", "--name", "real", "--manual", "--handler", "h",
                       "--json")  # fmt: skip
    assert made.returncode == 0, made.stderr
    job = json.loads(made.stdout)
    enqueued = cli_process(api_url, "jobs", "enqueue", "real", "--payload", "1", "--json")
    [run_id] = json.loads(enqueued.stdout)["run_ids"]
    got = cli_process(api_url, "runs", "get", str(run_id), "--json")
    assert json.loads(got.stdout)["job_id"] == job["id"], got.stderr
    missing = cli_process(api_url, "dlq", "replay", "99999")
    assert missing.returncode == 3 and "not found" in missing.stderr, missing.stderr
    notifications = cli_process(api_url, "notifications", "list", "--json")
    assert json.loads(notifications.stdout) == {"items": [], "next_cursor": None}
    assert cli_process(api_url, "tenants", "create", "acme").returncode == 0
    keys = cli_process(api_url, "keys", "list", "--tenant", "acme", "--json")
    assert json.loads(keys.stdout) == [], keys.stderr
    rate = cli_process(api_url, "pools", "rate", "crm", "10", "--json")
    assert json.loads(rate.stdout) == [{"pool": "crm", "per_second": 10.0}], rate.stderr
    pipelines = cli_process(api_url, "pipelines", "get", "nope")
    assert pipelines.returncode == 3 and "nope" in pipelines.stderr, pipelines.stderr
    status = cli_process(api_url, "status", "--json")
    assert json.loads(status.stdout)["scope"] == "system", status.stderr
    audit = cli_process(api_url, "audit", "--json")
    entities = [e["entity"] for e in json.loads(audit.stdout)["items"]]
    assert entities == ["tenant", "job"], audit.stderr  # newest first
    upcoming = cli_process(api_url, "cron", "next", "0 9 * * *", "--tz", "UTC", "--json")
    assert json.loads(upcoming.stdout)[0]["utc"].endswith("T09:00:00+00:00"), upcoming.stderr
    usage = cli_process(api_url, "jobs", "create", "--name", "nothing")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
    assert cli_process("http://127.0.0.1:9", "jobs", "list").returncode == 6


def test_jobs_from_the_terminal(api_url: str) -> None:
    created = cli(
        api_url,
        "jobs",
        "create",
        "--name",
        "ping",
        "--every",
        "60",
        "--webhook",
        "https://example.com/ping",
        "--payload",
        '{"a": 1}',
        "--json",
    )
    assert created.returncode == 0, created.stderr
    job = json.loads(created.stdout)
    assert (job["name"], job["schedule"]["every_seconds"], job["payload"]) == ("ping", 60, {"a": 1})
    listed = cli(api_url, "jobs", "list")
    assert listed.returncode == 0 and "ping" in listed.stdout  # a human table
    paused = json.loads(cli(api_url, "jobs", "pause", job["id"], "--json").stdout)
    assert paused["state"] == "paused"
    updated = cli(
        api_url,
        "jobs",
        "update",
        job["id"],
        "--version",
        str(paused["version"]),
        "--set",
        'payload={"a": 2}',
        "--json",
    )
    assert json.loads(updated.stdout)["payload"] == {"a": 2}
    stale = cli(api_url, "jobs", "update", job["id"], "--version", "1", "--set", "payload=3")
    assert stale.returncode == 4 and "version" in stale.stderr
    resumed = json.loads(cli(api_url, "jobs", "resume", job["id"], "--json").stdout)
    assert resumed["state"] == "active"
    run = json.loads(cli(api_url, "jobs", "trigger", job["id"], "--json").stdout)
    runs = json.loads(cli(api_url, "jobs", "runs", job["id"], "--json").stdout)
    assert [r["id"] for r in runs["items"]] == [run["id"]]
    got = json.loads(cli(api_url, "runs", "get", str(run["id"]), "--json").stdout)
    assert got["attempts"] == []
    assert (
        json.loads(cli(api_url, "runs", "cancel", str(run["id"]), "--json").stdout)["state"]
        == "cancelled"
    )
    assert json.loads(cli(api_url, "dlq", "list", "--json").stdout)["items"] == []
    assert (
        json.loads(cli(api_url, "jobs", "cancel", job["id"], "--json").stdout)["state"]
        == "cancelled"
    )


def test_notifications_from_the_terminal(api_url: str) -> None:
    # What a dead notification looks like and how it is replayed: tests/api/test_notifications.py.
    listed = cli(api_url, "notifications", "list", "--state", "dead", "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"items": [], "next_cursor": None}
    assert cli(api_url, "notifications", "list").returncode == 0
    replayed = cli(api_url, "notifications", "replay", "1", "2", "--json")
    assert json.loads(replayed.stdout) == {"replayed": []}
    assert cli(api_url, "notifications", "replay", "7").stdout == "replayed 0: []\n"
    bad = cli(api_url, "notifications", "list", "--state", "lost")
    assert bad.returncode != 0 and "lost" in bad.stderr
    assert cli(api_url, "notifications", "replay").returncode != 0  # ids are required


def test_exit_codes_scripts_can_rely_on(api_url: str) -> None:
    bad = cli(api_url, "jobs", "create", "--name", "bad", "--cron", "61 * * * *", "--handler", "h")
    assert bad.returncode == 2 and "schedule.cron" in bad.stderr and "Traceback" not in bad.stderr
    usage = cli(api_url, "jobs", "create", "--name", "nothing")
    assert usage.returncode == 2
    missing = cli(api_url, "jobs", "get", "01a1ff91-f97e-7000-8a6d-746a4710197a")
    assert missing.returncode == 3
    assert (
        cli(api_url, "jobs", "create", "--name", "twice", "--now", "--handler", "h").returncode == 0
    )
    conflict = cli(api_url, "jobs", "create", "--name", "twice", "--now", "--handler", "h")
    assert conflict.returncode == 4 and "name" in conflict.stderr
    assert cli(api_url, "jobs", "list", token="cw_wrong_token").returncode == 5
    assert cli("http://127.0.0.1:9", "jobs", "list").returncode == 6


def test_tenants_and_keys_from_the_terminal(api_url: str) -> None:
    assert cli(api_url, "tenants", "create", "acme", "--max-jobs", "10").returncode == 0
    assert "acme" in cli(api_url, "tenants", "list").stdout
    key = json.loads(
        cli(api_url, "keys", "create", "--role", "read", "--tenant", "acme", "--json").stdout
    )
    assert cli(api_url, "jobs", "list", token=key["token"]).returncode == 0
    denied = cli(
        api_url, "jobs", "create", "--name", "x", "--now", "--handler", "h", token=key["token"]
    )
    assert denied.returncode == 5
    listed = json.loads(cli(api_url, "keys", "list", "--tenant", "acme", "--json").stdout)
    assert [k["id"] for k in listed] == [key["id"]] and listed[0].get("token") is None
    assert cli(api_url, "keys", "revoke", key["id"]).returncode == 0
    assert cli(api_url, "jobs", "list", token=key["token"]).returncode == 5


def test_tenant_limits_from_the_terminal(api_url: str) -> None:
    assert cli(api_url, "tenants", "create", "limited").returncode == 0
    set_ = cli(
        api_url, "tenants", "update", "limited", "--max-jobs", "1",
        "--max-creates-per-second", "0.01", "--json",
    )  # fmt: skip
    updated = json.loads(set_.stdout)
    assert (updated["max_jobs"], updated["max_creates_per_second"]) == (1, 0.01)
    writer = json.loads(
        cli(api_url, "keys", "create", "--role", "write", "--tenant", "limited", "--json").stdout
    )["token"]

    def create(name: str) -> subprocess.CompletedProcess[str]:
        return cli(api_url, "jobs", "create", "--name", name, "--cron", "* * * * *",
                   "--handler", "h", token=writer)  # fmt: skip

    assert create("first").returncode == 0
    over = create("second")
    assert over.returncode == 7 and "max_creates_per_second" in over.stderr, over.stderr
    # "none" removes a limit; the one not named is kept.
    removed = json.loads(
        cli(
            api_url, "tenants", "update", "limited", "--max-creates-per-second", "none", "--json"
        ).stdout
    )
    assert (removed["max_jobs"], removed["max_creates_per_second"]) == (1, None)
    full = create("third")
    assert full.returncode == 7 and "max_jobs" in full.stderr, full.stderr
    bad = cli(api_url, "tenants", "update", "limited", "--max-jobs", "lots")
    assert bad.returncode == 2 and "'none'" in bad.stderr
    assert cli(api_url, "tenants", "update", "limited").returncode == 2


def test_a_tenants_claim_weight_and_running_cap_from_the_terminal(api_url: str) -> None:
    made = cli(
        api_url,
        "tenants",
        "create",
        "fair",
        "--claim-weight",
        "2.5",
        "--max-running",
        "8",
        "--json",
    )
    assert made.returncode == 0, made.stderr
    tenant = json.loads(made.stdout)
    assert (tenant["claim_weight"], tenant["max_running"]) == (2.5, 8)
    bad = cli(api_url, "tenants", "create", "unfair", "--claim-weight", "0")
    assert bad.returncode == 2 and "claim_weight" in bad.stderr


def test_the_sync_sdk_against_a_real_server(api_url: str) -> None:
    with Client(api_url, TOKEN) as cw:
        job = cw.create_job(
            {
                "name": "sdk",
                "schedule": {"kind": "immediate"},
                "action": {"type": "webhook", "url": "https://example.com"},
            }
        )
        [run] = cw.job_runs(job.id).items
        assert (run.job_id, run.state) == (job.id, "pending")
        assert cw.get_run(run.id).attempts == []


def test_enqueue_from_the_terminal(api_url: str) -> None:
    created = cli(
        api_url, "jobs", "create", "--name", "queue", "--manual", "--handler", "h", "--json"
    )
    assert created.returncode == 0, created.stderr
    job = json.loads(created.stdout)
    assert (job["schedule"], job["next_fire_at"]) == ({"kind": "manual"}, None)
    enqueued = cli(
        api_url, "jobs", "enqueue", job["id"], "--payload", '{"n": 1}', "--payload", "null"
    )
    assert enqueued.returncode == 0, enqueued.stderr
    first, second = json.loads(cli(api_url, "jobs", "runs", job["id"], "--json").stdout)["items"][
        ::-1
    ]
    assert enqueued.stdout.strip() == f"enqueued 2: [{first['id']}, {second['id']}]"
    assert (first["payload"], second["payload"]) == ({"n": 1}, None)
    from_stdin = cli(
        api_url,
        "jobs",
        "enqueue",
        job["id"],
        "--payloads-file",
        "-",
        "--json",
        stdin='[{"n": 3}, [4], "five"]',
    )
    assert from_stdin.returncode == 0, from_stdin.stderr
    run_ids = json.loads(from_stdin.stdout)["run_ids"]
    assert len(run_ids) == 3 and min(run_ids) > second["id"]
    got = json.loads(cli(api_url, "runs", "get", str(run_ids[-1]), "--json").stdout)
    assert got["payload"] == "five"
    cron = cli(api_url, "jobs", "create", "--name", "c", "--every", "60", "--handler", "h")
    assert cron.returncode == 0, cron.stderr
    cron_id = json.loads(cli(api_url, "jobs", "list", "--json").stdout)["items"][-1]["id"]
    refused = cli(api_url, "jobs", "enqueue", cron_id, "--payload", "1")
    assert refused.returncode == 4 and "manual" in refused.stderr and "(schedule)" in refused.stderr


def test_enqueue_refuses_bad_json_naming_the_option(api_url: str) -> None:
    job_id = "01a1ff91-f97e-7000-8a6d-746a4710197a"
    for value in ("{not json", "NaN"):
        bad = cli(api_url, "jobs", "enqueue", job_id, "--payload", "1", "--payload", value)
        assert bad.returncode == 2, bad.stderr
        assert "--payload" in bad.stderr and "is not JSON" in bad.stderr
        assert "Traceback" not in bad.stderr
    not_a_list = cli(api_url, "jobs", "enqueue", job_id, "--payloads-file", "-", stdin="{}")
    assert not_a_list.returncode == 2 and "--payloads-file" in not_a_list.stderr
    nothing = cli(api_url, "jobs", "enqueue", job_id)
    assert nothing.returncode == 2 and "--payload" in nothing.stderr
    missing = cli(api_url, "jobs", "enqueue", job_id, "--payload", "1")
    assert missing.returncode == 3 and "not found" in missing.stderr


def test_the_sync_sdk_enqueues(api_url: str) -> None:
    with Client(api_url, TOKEN) as cw:
        job = cw.create_job(
            {
                "name": "sdk-queue",
                "schedule": {"kind": "manual"},
                "action": {"type": "handler", "name": "h"},
            }
        )
        run_ids = cw.enqueue(job.id, [{"n": 1}, None], idempotency_key="sync-1")
        assert cw.enqueue(job.id, [{"n": 1}, None], idempotency_key="sync-1") == run_ids
        assert [cw.get_run(i).payload for i in run_ids] == [{"n": 1}, None]
        assert len(cw.job_runs(job.id).items) == 2


def test_backfill_from_the_terminal_and_the_sdk(api_url: str) -> None:
    created = cli(
        api_url, "jobs", "create", "--name", "bf", "--cron", "0 * * * *", "--webhook",
        "https://example.com/h", "--json",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    day = (datetime.now(UTC) - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
    start, end = day.isoformat(), (day + timedelta(hours=3)).isoformat()
    done = cli(api_url, "jobs", "backfill", "bf", "--from", start, "--to", end)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"3 occurrences from {day.isoformat()} to {(day + timedelta(hours=2)).isoformat()}:"
        " 3 runs created, 0 already had one"
    )
    with Client(api_url, token=TOKEN) as cw:
        again = cw.backfill(
            json.loads(created.stdout)["id"], day, day + timedelta(hours=4), priority="high"
        )
        assert (again.occurrences, again.created) == (4, 1)
    naive = cli(api_url, "jobs", "backfill", "bf", "--from", "2026-01-01T00:00", "--to", end)
    assert naive.returncode == 2 and "--from" in naive.stderr and "UTC offset" in naive.stderr
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    late = cli(api_url, "jobs", "backfill", "bf", "--from", start, "--to", future, "--json")
    assert late.returncode == 2 and "end" in late.stderr and "future" in late.stderr


def test_jobs_list_in_an_order_page_by_page(api_url: str) -> None:
    with Client(api_url, TOKEN) as cw:
        for name in ("ord-b", "ord-c", "ord-a"):
            cw.create_job(
                {
                    "name": name,
                    "schedule": {"kind": "manual"},
                    "action": {"type": "handler", "name": "h"},
                }
            )
    args = ("jobs", "list", "--name-prefix", "ord-", "--order", "-name", "--limit", "2")
    first = cli(api_url, *args)
    assert first.returncode == 0, first.stderr
    assert first.stdout.index("ord-c") < first.stdout.index("ord-b")
    assert "ord-a" not in first.stdout
    # The hint for the next page keeps the order: the cursor belongs to it.
    [cursor] = [
        line.split("--cursor ")[1] for line in first.stderr.splitlines() if "--cursor" in line
    ]
    assert "--order=-name --cursor" in first.stderr
    rest = cli(api_url, *args, "--cursor", cursor, "--json")
    assert [j["name"] for j in json.loads(rest.stdout)["items"]] == ["ord-a"]
    other = cli(api_url, "jobs", "list", "--order", "name", "--cursor", cursor)
    assert other.returncode == 2 and "cursor" in other.stderr and "'-name'" in other.stderr
    unknown = cli(api_url, "jobs", "list", "--order", "last_run")
    assert unknown.returncode == 2 and "next_fire" in unknown.stderr


def test_pipelines_from_the_terminal(api_url: str, tmp_path: Path) -> None:
    tasks = {
        "extract": {"action": {"type": "handler", "name": "extract"}},
        "load": {"action": {"type": "handler", "name": "load"}, "pool": "db"},
    }
    first = tmp_path / "etl.json"
    first.write_text(json.dumps({"tasks": tasks, "edges": [{"from": "extract", "to": "load"}]}))
    created = cli(api_url, "pipelines", "create", "--file", str(first), "--name", "etl", "--json")
    assert created.returncode == 0, created.stderr
    made = json.loads(created.stdout)
    assert (made["name"], made["version"]) == ("etl", 1)
    listed = cli(api_url, "pipelines", "list")
    assert listed.returncode == 0 and "etl" in listed.stdout  # a human table
    shown = cli(api_url, "pipelines", "get", "etl")
    assert shown.returncode == 0 and "edge extract → load (on_success)" in shown.stdout
    second = tmp_path / "etl2.json"
    second.write_text(json.dumps({"tasks": tasks, "edges": [], "failure_policy": "continue"}))
    args = ["pipelines", "update", "etl", "--file", str(second)]
    updated = cli(api_url, *args, "--version", "1", "--json")
    assert updated.returncode == 0, updated.stderr
    assert (json.loads(updated.stdout)["version"], json.loads(updated.stdout)["edges"]) == (2, [])
    stale = cli(api_url, *args, "--version", "1")
    assert stale.returncode == 4 and "version 2" in stale.stderr
    old = cli(api_url, "pipelines", "get", made["id"], "--version", "1", "--json")
    assert json.loads(old.stdout)["edges"] == [
        {"from": "extract", "to": "load", "on": "on_success"}
    ]
    cycle = tmp_path / "cycle.json"
    edges = [{"from": "extract", "to": "load"}, {"from": "load", "to": "extract"}]
    cycle.write_text(json.dumps({"tasks": tasks, "edges": edges}))
    refused = cli(api_url, "pipelines", "create", "--file", str(cycle), "--name", "loop")
    assert (
        refused.returncode == 2 and "tasks.extract → tasks.load → tasks.extract" in refused.stderr
    )
    assert "(edges)" in refused.stderr
    missing = cli(api_url, "pipelines", "get", "nope")
    assert missing.returncode == 3 and "nope" in missing.stderr


def test_a_pools_rate_from_the_terminal(api_url: str) -> None:
    set_ = cli(api_url, "pools", "rate", "crm", "10", "--json")
    assert set_.returncode == 0, set_.stderr
    assert json.loads(set_.stdout) == [{"pool": "crm", "per_second": 10.0}]
    listed = cli(api_url, "pools", "rates")
    assert listed.returncode == 0 and "crm" in listed.stdout and "10" in listed.stdout
    bad = cli(api_url, "pools", "rate", "crm", "lots")
    assert bad.returncode == 2 and "'none'" in bad.stderr
    removed = cli(api_url, "pools", "rate", "crm", "none", "--json")
    assert json.loads(removed.stdout) == []


def test_a_command_run_in_process_leaves_the_test_process_as_it_was() -> None:
    """tests/e2e/clirun.py: a command sets up logging, a crash hook and the secrets it
    hides for its whole process; in the test process, they must not outlive it (pytest's
    log capture would be gone, later output masked)."""
    root = logging.getLogger()
    handlers, level, hook = list(root.handlers), root.level, sys.excepthook
    # As it was, not NOTSET: a test of this process before may have set it (xdist order).
    httpx_level = logging.getLogger("httpx").level
    token = "cw_never-registered-here-0123"
    done = clirun.run(
        ("jobs", "list", "--log-format", "json", "--log-level", "debug"),
        {"CRONWHEEL_URL": "http://127.0.0.1:9", "CRONWHEEL_TOKEN": token},
    )
    assert done.returncode == 6 and json.loads(done.stderr.splitlines()[-1])["exit_code"] == 6
    assert (root.handlers, root.level, sys.excepthook) == (handlers, level, hook)
    assert logging.getLogger("httpx").level == httpx_level
    assert not json_lines()
    assert redact(token) == token
