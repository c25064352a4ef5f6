"""What a new user meets in the first hour (issue 29, item 11), as a person sees it: the
CLI (in the test process: tests/e2e/clirun.py) against a real `cronwheel api`, on an
80-column terminal and in a pipe.

SQLite only: this is the CLI's behaviour; what the API answers on both stores is pinned
by tests/api.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py), on SQLite.
from tests.e2e.apiserver import TOKEN, SharedApi, api_url_per_module, shared_api  # noqa: F401
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.e2e.procs import free_port, wait_until
from tests.e2e.test_cli import cli
from tests.e2e.test_cli_views import on_terminal, piped


@pytest.fixture(scope="module")
def api_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The shared server's store: SQLite only (above)."""
    return f"sqlite:///{tmp_path_factory.mktemp('api') / 'e2e.db'}"


def _pending_run(url: str, name: str) -> int:
    made = cli(url, "jobs", "create", "--name", name, "--now", "--handler", "h")
    assert made.returncode == 0, made.stderr
    runs = json.loads(cli(url, "jobs", "runs", name, "--json").stdout)["items"]
    assert [r["state"] for r in runs] == ["pending"]  # `cronwheel api` runs no worker
    run_id: int = runs[0]["id"]
    return run_id


def test_a_replay_of_runs_that_are_not_dead_says_why_and_fails(api_url: str) -> None:
    # No such run: not found, exit 3 (docs/api.md's exit codes).
    missing = piped(api_url, "dlq", "replay", "99999")
    assert missing.returncode == 3, (missing.stdout, missing.stderr)
    assert missing.stderr.strip() == "error: run 99999 not replayed: not found"
    # A run that is not dead: a conflict, exit 4, with its state.
    run_id = _pending_run(api_url, "not-dead")
    alive = piped(api_url, "dlq", "replay", str(run_id))
    assert alive.returncode == 4, (alive.stdout, alive.stderr)
    assert alive.stderr.strip() == (
        f"error: run {run_id} not replayed: not dead (it is pending; only dead runs are replayed)"
    )
    assert alive.stdout == "replayed 0: []\n"  # what was replayed, as before
    # Both: each is named; not found wins the exit code.
    both = piped(api_url, "dlq", "replay", str(run_id), "99999")
    assert both.returncode == 3
    assert f"run {run_id} not replayed: not dead" in both.stderr
    assert "run 99999 not replayed: not found" in both.stderr
    # --json says the same to a script.
    as_json = cli(api_url, "dlq", "replay", str(run_id), "99999", "--json")
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout) == {
        "replayed": [],
        "not_replayed": [
            {"id": run_id, "reason": "not dead (it is pending; only dead runs are replayed)"},
            {"id": 99999, "reason": "not found"},
        ],
    }
    # At a terminal: the whole reason, on 80 columns.
    code, screen = on_terminal(api_url, "dlq", "replay", "99999")
    assert code == 3 and "run 99999 not replayed: not found" in screen, screen
    assert "Traceback" not in screen


def test_without_a_token_the_cli_says_how_to_give_one(api_url: str) -> None:
    said = (
        "error: no API key given: pass --token KEY or set CRONWHEEL_TOKEN (the --admin-token"
        " of `cronwheel api`, or a key from `cronwheel keys create`)"
    )
    bare = cli(api_url, "jobs", "list", token="")
    assert bare.returncode == 5, bare.stderr
    assert bare.stderr.strip() == said
    assert "header" not in bare.stderr
    code, screen = on_terminal(api_url, "jobs", "list", token="")
    assert code == 5 and "CRONWHEEL_TOKEN" in screen and "--token" in screen, screen
    # A wrong token is another mistake, said as the API says it.
    wrong = cli(api_url, "jobs", "list", token="cw_wrong_token")
    assert wrong.returncode == 5 and "CRONWHEEL_TOKEN" not in wrong.stderr


def test_a_mistyped_command_gets_the_nearest_one(api_url: str) -> None:
    typo = piped(api_url, "job", "list")
    assert typo.returncode == 2, typo.stderr
    assert typo.stderr.splitlines()[-1] == "Error: No such command 'job'. Did you mean 'jobs'?"
    assert "Did you mean 'status'?" in piped(api_url, "stat").stderr
    code, screen = on_terminal(api_url, "job", "list")
    assert code == 2 and "Did you mean 'jobs'?" in screen, screen
    # Nothing near: click's line as it was; within a group, click's own suggestion.
    assert piped(api_url, "zzz").stderr.splitlines()[-1] == "Error: No such command 'zzz'."
    assert "Did you mean 'list'?" in piped(api_url, "jobs", "lst").stderr


def test_a_paused_job_shows_no_next_fire(api_url: str) -> None:
    made = cli(api_url, "jobs", "create", "--name", "on-hold", "--every", "3600", "--handler", "h")
    assert made.returncode == 0, made.stderr
    paused = piped(api_url, "jobs", "pause", "on-hold")
    assert paused.returncode == 0, paused.stderr
    header, row = paused.stdout.splitlines()
    assert header.split("\t")[2:4] == ["state", "next_fire_at"]
    assert row.split("\t")[2:4] == ["paused", "paused"]
    job = json.loads(cli(api_url, "jobs", "get", "on-hold", "--json").stdout)
    assert job["next_fire_at"]  # --json: the API's whole answer
    listed = piped(api_url, "jobs", "list").stdout.splitlines()
    [row] = [line for line in listed if job["id"] in line]
    assert row.split("\t")[3] == "paused"
    # At a terminal, wide or 80 columns (where the time gives way to "in 1 h"): no time.
    for columns in (160, 80):
        code, screen = on_terminal(api_url, "jobs", "list", columns=columns)
        assert code == 0, screen
        [line] = [line for line in screen.splitlines() if job["id"] in line]
        assert job["next_fire_at"] not in line and " in " not in line, screen
    code, screen = on_terminal(api_url, "jobs", "list", columns=110)
    [line] = [line for line in screen.splitlines() if job["id"] in line]
    assert line.split()[2:4] == ["paused", "paused"], screen
    described = piped(api_url, "jobs", "get", "on-hold").stdout
    assert "next fires:      none while paused" in described
    assert job["next_fire_at"] not in described


def test_an_api_without_an_admin_token_says_nobody_can_sign_in(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "bare-api.log"
    args = ("api", "--db", f"sqlite:///{tmp_path / 'e2e.db'}", "--port", str(port))
    with cronwheel_proc(*args, env={"CRONWHEEL_ADMIN_TOKEN": ""}, log=log) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_until("cronwheel api answers", lambda: _ready(url), 60, [log])
        assert proc.poll() is None
        warned = [line for line in log.read_text().splitlines() if "admin token" in line]
        assert len(warned) == 1, log.read_text()
        assert (
            " WARNING cronwheel.cli: cronwheel api: no admin token (--admin-token or" in (warned[0])
        )
        assert "nobody can sign in" in warned[0] and "bootstrap" in warned[0]


def test_an_api_with_an_admin_token_says_nothing_of_it(
    api_url: str,
    shared_api: SharedApi,  # noqa: F811
) -> None:
    assert _ready(api_url)
    assert "no admin token" not in shared_api.log.read_text()  # its whole log, from its start


def test_the_server_root_leads_to_the_dashboard(api_url: str) -> None:
    root = httpx.get(f"{api_url}/", follow_redirects=False)
    assert root.status_code in (307, 308), root.text
    assert root.headers["location"] == "/ui/"
    landed = httpx.get(f"{api_url}/", follow_redirects=True)
    assert landed.status_code == 200 and landed.url.path.startswith("/ui/")
    assert "text/html" in landed.headers["content-type"]


def test_the_access_log_masks_only_secret_query_values(
    api_url: str,
    shared_api: SharedApi,  # noqa: F811
) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    query = "name=nightly&limit=5&token=s3cr3t-in-the-url&api_key=k3y-in-the-url"
    assert httpx.get(f"{api_url}/v1/jobs?{query}", headers=auth).status_code == 200
    log = shared_api.log
    wanted = '"GET /v1/jobs?name=nightly&limit=5&token=***&api_key=*** HTTP/1.1" 200'
    wait_until("the access line", lambda: wanted in log.read_text(), 10, [log])
    assert "s3cr3t-in-the-url" not in log.read_text()
    assert "k3y-in-the-url" not in log.read_text()


def _ready(url: str) -> bool:
    return httpx.get(f"{url}/readyz", timeout=1).status_code == 200


def test_jobs_why_without_at_asks_about_the_latest_occurrence(api_url: str) -> None:
    made = cli(
        api_url, "jobs", "create", "--name", "why-me", "--cron", "* * * * *", "--handler", "h"
    )
    assert made.returncode == 0, made.stderr
    asked = piped(api_url, "jobs", "why", "why-me")
    assert asked.returncode == 0, asked.stderr
    first = asked.stdout.splitlines()[0]
    assert first.startswith("No time given"), asked.stdout
    answer = json.loads(cli(api_url, "jobs", "why", "why-me", "--json").stdout)
    assert answer["asked"] == "latest" and answer["occurrence"] is not None
    code, screen = on_terminal(api_url, "jobs", "why", "why-me")
    assert code == 0 and "No time given" in screen and "Error" not in screen, screen


def test_a_backfill_too_long_names_the_first_occurrence_over_in_words(api_url: str) -> None:
    made = cli(
        api_url, "jobs", "create", "--name", "minutely", "--cron", "* * * * *", "--handler", "h"
    )
    assert made.returncode == 0, made.stderr
    refused = piped(
        api_url, "jobs", "backfill", "minutely", "--from", "2026-01-01T00:00:00Z",
        "--to", "2026-01-09T00:00:00Z",
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "more than 10,000 occurrences (the 10,001st is 2026-01-07T22:40:00+00:00)" in (
        refused.stderr
    )
    assert "10,001th" not in refused.stderr
