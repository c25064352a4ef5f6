"""The remote CLI as a person sees it, against a real `cronwheel api`: on an 80-column
terminal and in a pipe. The first two tests run a real `cronwheel` process on a real
pseudo-terminal and a real pipe; the others run the command in the test process, with
the same terminal width or pipe (tests/e2e/clirun.py).

Ids and times are never cut; a job is named by its id, the start of its id or its name;
`jobs get` and `runs get` show everything; a system admin works in any tenant.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import httpx

from tests.e2e import clirun

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py).
from tests.e2e.apiserver import api_store, api_url_per_module, shared_api  # noqa: F401
from tests.e2e.test_cli import TOKEN, cli

_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\+00:00")


def on_terminal(url: str, *args: str, token: str = TOKEN, columns: int = 80) -> tuple[int, str]:
    """Run the CLI with its stdout on a terminal of ``columns`` columns, as a person at a
    terminal runs it, in this process (tests/e2e/clirun.py): its exit code and what the
    screen shows."""
    result = clirun.run(args, _env(url, token), columns=columns)
    return result.returncode, result.stdout


def on_terminal_process(
    url: str, *args: str, token: str = TOKEN, columns: int = 80
) -> tuple[int, str]:
    """The same as a real process on a real pseudo-terminal."""
    return clirun.real_on_terminal(args, _env(url, token), columns)


def piped(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with its output in a pipe that says it is 80 columns wide (rich would
    format for 80 columns in a pipe anyway), in this process."""
    return clirun.run(args, {**_env(url, TOKEN), "COLUMNS": "80"})


def piped_process(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The same as a real process writing to a real pipe."""
    return clirun.real(args, {**_env(url, TOKEN), "COLUMNS": "80"})


def _env(url: str, token: str) -> dict[str, str]:
    return {"CRONWHEEL_URL": url, "CRONWHEEL_TOKEN": token}


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def created(url: str, spec: dict[str, Any], *options: str) -> dict[str, Any]:
    args = ("jobs", "create", "--file", "-", "--json", *options)
    out = ok(cli(url, *args, stdin=json.dumps(spec)))
    job: dict[str, Any] = json.loads(out)
    return job


def manual(name: str, **changes: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"kind": "manual"},
        "action": {"type": "handler", "name": "h"},
        **changes,
    }


def batch(url: str, *names: str) -> list[dict[str, Any]]:
    """Jobs created in one request: their ids share their first 13 or more characters,
    as ids made in the same millisecond do."""
    response = httpx.post(
        f"{url}/v1/jobs/batch",
        json={"jobs": [manual(n) for n in names]},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 201, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def test_tables_at_80_columns_show_whole_ids_and_times(api_url: str) -> None:
    jobs = batch(api_url, "a-job-with-a-rather-long-name-that-has-to-wrap", "b")
    run_ids = json.loads(ok(cli(api_url, "jobs", "enqueue", "b", "--payload", "1", "--json")))
    code, screen = on_terminal_process(api_url, "jobs", "list")
    assert code == 0, screen
    assert "…" not in screen and "..." not in screen
    for job in jobs:
        assert job["id"] in screen
    assert max(len(line) for line in screen.splitlines()) <= 80
    code, screen = on_terminal_process(api_url, "jobs", "runs", "b")
    assert code == 0, screen
    [run] = json.loads(ok(cli(api_url, "jobs", "runs", "b", "--json")))["items"]
    assert run["id"] == run_ids["run_ids"][0]
    assert run["scheduled_for"] in screen  # the whole ISO time, microseconds and offset
    assert "…" not in screen
    code, screen = on_terminal_process(api_url, "jobs", "get", "b")
    assert code == 0 and jobs[1]["id"] in screen and jobs[1]["created_at"] in screen


def test_tables_in_a_pipe_are_whole_tab_separated_values(api_url: str) -> None:
    name = "a-job-with-a-name-longer-than-any-column-of-eighty-characters-could-show-whole"
    job = created(api_url, manual(name, schedule={"kind": "interval", "every_seconds": 3600}))
    lines = ok(piped_process(api_url, "jobs", "list")).splitlines()
    assert lines[0].split("\t") == ["id", "name", "state", "next_fire_at", "pool", "version"]
    assert lines[1].split("\t") == [
        job["id"],
        name,
        "active",
        job["next_fire_at"],
        "default",
        "1",
    ]
    assert _ISO.fullmatch(job["next_fire_at"])
    run = json.loads(ok(cli(api_url, "jobs", "trigger", name, "--json")))
    header, row = ok(piped_process(api_url, "jobs", "runs", name)).splitlines()
    fields = dict(zip(header.split("\t"), row.split("\t"), strict=True))
    assert fields["id"] == str(run["id"]) and fields["job_id"] == job["id"]
    assert fields["scheduled_for"] == run["scheduled_for"]


def test_a_job_is_named_by_its_id_a_unique_prefix_or_its_name(api_url: str) -> None:
    first, second = batch(api_url, "backup", "report")
    prefix = first["id"][:-3]  # unique, though the two ids share most of their digits
    assert not second["id"].startswith(prefix)
    for ref in (first["id"], prefix, prefix.upper(), "backup"):
        got = json.loads(ok(cli(api_url, "jobs", "get", ref, "--json")))
        assert got["id"] == first["id"], ref
    assert json.loads(ok(cli(api_url, "jobs", "pause", "backup", "--json")))["state"] == "paused"
    assert json.loads(ok(cli(api_url, "jobs", "resume", prefix, "--json")))["state"] == "active"
    updated = cli(api_url, "jobs", "update", "backup", "--version", "3", "--set", "pool=p2")
    assert "p2" in ok(updated)
    enqueued = json.loads(ok(cli(api_url, "jobs", "enqueue", "backup", "--payload", "1", "--json")))
    runs = json.loads(ok(cli(api_url, "jobs", "runs", "backup", "--json")))["items"]
    assert [r["id"] for r in runs] == enqueued["run_ids"]
    # A cancelled job keeps its name; the live job of that name is the one meant.
    assert (
        json.loads(ok(cli(api_url, "jobs", "cancel", "backup", "--json")))["state"] == "cancelled"
    )
    again = created(api_url, manual("backup"))
    assert json.loads(ok(cli(api_url, "jobs", "get", "backup", "--json")))["id"] == again["id"]

    common = first["id"][
        : next(i for i, (a, b) in enumerate(zip(first["id"], second["id"], strict=True)) if a != b)
    ]
    ambiguous = cli(api_url, "jobs", "get", common)
    assert ambiguous.returncode == 2, ambiguous.stderr
    assert first["id"] in ambiguous.stderr and second["id"] in ambiguous.stderr
    assert "Traceback" not in ambiguous.stderr and ambiguous.stdout == ""
    missing = cli(api_url, "jobs", "trigger", "no-such-job")
    assert missing.returncode == 3 and "no-such-job" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def _work(url: str, run_id: int, outcome: str, error: str | None, **report: Any) -> None:
    """Be a remote worker for one attempt: claim the run and report its outcome (with a
    progress and a checkpoint, if given)."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    claim = httpx.post(
        f"{url}/v1/workers/claim", json={"worker_id": "w-7", "pools": ["only"]}, headers=auth
    )
    [claimed] = claim.json()["runs"]
    assert claimed["run"]["id"] == run_id
    body = {"worker_id": "w-7", "fence": claimed["run"]["fence"], "outcome": outcome}
    if error:
        body |= {"error_class": "ValueError", "error_message": error}
    body |= report
    done = httpx.post(f"{url}/v1/runs/{run_id}/complete", json=body, headers=auth)
    assert done.status_code == 200, done.text


def test_runs_get_shows_the_run_and_each_attempt(api_url: str) -> None:
    retry = {"max_attempts": 2, "backoff": "fixed", "initial_delay": 0}
    created(api_url, manual("flaky", pool="only", retry=retry))
    [run_id] = json.loads(ok(cli(api_url, "jobs", "enqueue", "flaky", "--payload", "1", "--json")))[
        "run_ids"
    ]
    half = {"progress": {"fraction": 0.5, "message": "page 5 of 10"}}
    _work(api_url, run_id, "failed", "boom: the first try", **half)
    _work(api_url, run_id, "failed", "boom again", checkpoint={"state": {"page": 5}})
    run = json.loads(ok(cli(api_url, "runs", "get", str(run_id), "--json")))
    assert run["state"] == "dead" and len(run["attempts"]) == 2
    dead = json.loads(ok(cli(api_url, "dlq", "list", "--job-id", "flaky", "--json")))["items"]
    assert [r["id"] for r in dead] == [run_id]
    code, screen = on_terminal(api_url, "runs", "get", str(run_id))
    assert code == 0, screen
    for shown in (screen, ok(piped(api_url, "runs", "get", str(run_id)))):
        assert re.search(r"state:\s+dead", shown)
        assert re.search(r"attempt:\s+2 of 2", shown)
        for attempt in run["attempts"]:
            assert f"#{attempt['attempt']}  failed" in shown
            assert attempt["started_at"] in shown and attempt["finished_at"] in shown
            assert f"fence {attempt['fence']}" in shown
            assert attempt["worker_id"] in shown
        assert "ValueError: boom: the first try" in shown and "ValueError: boom again" in shown
        assert re.search(r"ran \d+\.\d{3} s", shown)
        assert re.search(r"started \d+\.\d{3} s after it was due", shown)
        assert re.search(r"progress:\s+50 % \(page 5 of 10\)", shown)
        assert re.search(r"progress at:\s+" + re.escape(run["progress"]["at"]), shown)
        assert re.search(r'checkpoint:\s+\{"page": 5\}', shown)
        assert re.search(r"checkpoint at:\s+" + re.escape(run["checkpoint"]["at"]), shown)


def test_jobs_get_shows_the_whole_job(api_url: str) -> None:
    spec = {
        "name": "nightly-report",
        "schedule": {"kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Paris"},
        "action": {
            "type": "webhook",
            "url": "https://example.com/hooks/report",
            "headers": {"Authorization": "Bearer do-not-show-me-0123", "X-Team": "data"},
        },
        "retry": {"max_attempts": 5},
        "priority": "high",
        "pool": "reports",
        "overlap": "skip",
        "delivery": "at_most_once",
        "timeout_seconds": 90,
    }
    job = created(api_url, spec)
    shown = ok(cli(api_url, "jobs", "get", "nightly-report"))
    assert "do-not-show-me-0123" not in shown
    expected = [
        r"id:\s+" + job["id"],
        r"state:\s+active \(version 1\)",
        r"schedule:\s+cron 30 2 \* \* \* in Europe/Paris",
        r"action:\s+webhook POST https://example.com/hooks/report",
        r"X-Team: data",
        r"Authorization: \*\*\*",
        r"pool:\s+reports",
        r"priority:\s+high",
        r"retry:\s+up to 5 attempts",
        r"timeout:\s+90 s",
        r"misfire:\s+fire_once",
        r"overlap:\s+skip",
        r"delivery:\s+at_most_once",
        r"last fired:\s+never",
    ]
    for pattern in expected:
        assert re.search(pattern, shown), (pattern, shown)
    cron_next = json.loads(
        ok(cli(api_url, "cron", "next", "30 2 * * *", "--tz", "Europe/Paris", "--json"))
    )
    upcoming = [o["utc"] for o in cron_next]
    assert upcoming[0] == job["next_fire_at"]
    assert [t for t in _ISO.findall(shown) if t in upcoming] == upcoming
    assert "Europe/Paris)" in shown  # each fire time in the job's own wall time too
    paused = ok(cli(api_url, "jobs", "pause", job["id"]))
    assert job["id"] in paused
    assert re.search(r"next fires:\s+none while paused", ok(cli(api_url, "jobs", "get", job["id"])))


def test_a_system_admin_acts_for_any_tenant(api_url: str) -> None:
    ok(cli(api_url, "tenants", "create", "acme"))
    job = created(api_url, manual("acme-only"), "--tenant", "acme")
    assert job["tenant_id"] == "acme"
    assert "acme-only" in ok(cli(api_url, "jobs", "list", "--tenant", "acme"))
    assert "acme-only" not in ok(cli(api_url, "jobs", "list"))
    assert cli(api_url, "jobs", "get", "acme-only").returncode == 3
    got = json.loads(ok(cli(api_url, "jobs", "get", "acme-only", "--tenant", "acme", "--json")))
    assert got["id"] == job["id"]
    key = json.loads(
        ok(cli(api_url, "keys", "create", "--role", "write", "--tenant", "acme", "--json"))
    )
    assert key["tenant_id"] == "acme"
    refused = cli(api_url, "jobs", "list", "--tenant", "default", token=key["token"])
    assert refused.returncode == 5 and "--tenant" in refused.stderr
    unknown = cli(api_url, "jobs", "list", "--tenant", "nobody")
    assert unknown.returncode == 2 and "--tenant" in unknown.stderr and "nobody" in unknown.stderr
