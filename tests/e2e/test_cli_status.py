"""`cronwheel status` and `cronwheel jobs why` as a person and a script see them: the CLI
(in the test process, and once as a real process: tests/e2e/clirun.py) against a real
`cronwheel api`, on an 80-column terminal and in a pipe, on each store."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests import pg

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py).
from tests.e2e.apiserver import api_store, api_url_per_module, running_api, shared_api  # noqa: F401
from tests.e2e.test_cli import TOKEN, cli
from tests.e2e.test_cli_views import created, manual, ok, on_terminal, on_terminal_process, piped

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def _scenario(url: str) -> None:
    """Pool email: two runs enqueued, one of them claimed by remote worker w1; pool
    nobody: one run enqueued, and no worker."""
    created(url, manual("mailer", pool="email"))
    ok(cli(url, "jobs", "enqueue", "mailer", "--payload", "1", "--payload", "2"))
    created(url, manual("orphan", pool="nobody"))
    ok(cli(url, "jobs", "enqueue", "orphan", "--payload", "1"))
    claim = {"worker_id": "w1", "pools": ["email"], "capacity": 1}
    response = httpx.post(f"{url}/v1/workers/claim", json=claim, headers=HEADERS)
    assert response.status_code == 200 and len(response.json()["runs"]) == 1, response.text


def test_status_on_an_80_column_terminal(api_url: str) -> None:
    _scenario(api_url)
    code, screen = on_terminal_process(api_url, "status")  # a real process, once
    assert code == 0, screen
    assert "Traceback" not in screen and "…" not in screen
    assert screen.startswith("NOT HEALTHY · cronwheel ")
    assert "problem: pool nobody: 1 due, and no live worker serves it" in screen
    assert "default/w1" in screen  # a system admin sees every worker, its id whole
    [email] = [line.split() for line in screen.splitlines() if line.startswith("email ")]
    assert email[1:4] == ["1", "0", "1"]  # due, held, running
    assert all(len(line) <= 80 for line in screen.splitlines()), screen
    # --watch redraws in place, as many times as asked.
    code, watched = on_terminal(api_url, "status", "--watch", "--count", "2", "--interval", "0")
    assert code == 0 and "NOT HEALTHY · cronwheel" in watched, watched


def test_status_in_a_pipe_is_tab_separated_and_watch_prints_snapshots(api_url: str) -> None:
    _scenario(api_url)
    lines = ok(piped(api_url, "status")).splitlines()
    assert lines[0].startswith("now\thealthy\tversion\t")
    header = next(line for line in lines if line.startswith("pool\t")).split("\t")
    [row] = [line.split("\t") for line in lines if line.startswith("email\t")]
    values = dict(zip(header, row, strict=True))
    assert (values["due"], values["running"], values["workers"]) == ("1", "1", "1")
    assert float(values["oldest_due_age_seconds"]) >= 0
    assert any(line.startswith("default/w1\temail\t") for line in lines), lines
    watched = ok(piped(api_url, "status", "--watch", "--count", "2", "--interval", "0"))
    assert sum(line.startswith("now\t") for line in watched.splitlines()) == 2
    reports = ok(piped(api_url, "status", "--watch", "--count", "2", "--interval", "0", "--json"))
    assert [json.loads(line)["scope"] for line in reports.splitlines()] == ["system", "system"]
    whole = json.loads(ok(piped(api_url, "status", "--json", "--window", "10")))
    assert whole["window_minutes"] == 10
    bad = piped(api_url, "status", "--window", "0")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def _cron_job(url: str) -> dict[str, object]:
    return created(
        url,
        {
            "name": "paris-nine",
            "schedule": {"kind": "cron", "cron": "0 9 * * *", "timezone": "Europe/Paris"},
            "action": {"type": "handler", "name": "h"},
        },
    )


def test_jobs_why_on_a_terminal_and_in_a_pipe(api_url: str) -> None:
    job = _cron_job(api_url)
    code, screen = on_terminal(api_url, "jobs", "why", "paris-nine", "--at", "2020-01-01T09:00")
    assert code == 0, screen
    assert "2020-01-01T09:00 read in Europe/Paris." in screen
    assert "The job was created at" in screen and "after that time" in screen
    assert str(job["id"]) in screen and "2020-01-01T09:00:00+01:00" in screen
    assert "…" not in screen
    out = ok(piped(api_url, "jobs", "why", str(job["id"])[:13], "--at", "2020-01-01T09:30"))
    lines = out.splitlines()
    assert "No occurrence of the schedule falls at that time" in out
    assert "fact\tvalue" in lines
    assert "verdict\tnot_created" in lines  # no occurrence then, nor a job
    assert "previous fire\t2020-01-01T09:00:00+01:00" in lines
    assert "next fire\t2020-01-02T09:00:00+01:00" in lines
    answer = json.loads(ok(piped(api_url, "jobs", "why", "paris-nine", "--at", "09:00", "--json")))
    assert answer["assumed"].startswith("09:00 read as today (")


def test_jobs_why_bad_input_and_unknown_jobs(api_url: str) -> None:
    _cron_job(api_url)
    bad = piped(api_url, "jobs", "why", "paris-nine", "--at", "nine o'clock")
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr.startswith("error: ") and "(at)" in bad.stderr
    assert "Traceback" not in bad.stderr and len(bad.stderr.splitlines()) <= 2
    missing = piped(api_url, "jobs", "why", "no-such-job", "--at", "09:00")
    assert missing.returncode == 3 and "Traceback" not in missing.stderr
    # Without --at: the latest occurrence (tests/e2e/test_cli_first_hour.py).
    no_at = piped(api_url, "jobs", "why", "paris-nine")
    assert no_at.returncode == 0 and no_at.stdout.startswith("No time given"), no_at.stderr


# PostgreSQL only: a SQLite file cannot stop answering while its API runs.
@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
@pytest.mark.both_stores  # the stores differ here
def test_status_exits_6_when_the_store_does_not_answer(store_url: str, tmp_path: Path) -> None:
    # A server of its own: its database is dropped under it.
    with running_api(store_url, tmp_path / "api.log") as api_url:
        pg.drop_database(store_url.rpartition("/")[2])  # the API's database is gone
        result = piped(api_url, "status")
    assert result.returncode == 6, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    [head, values] = result.stdout.splitlines()[:2]
    fields = dict(zip(head.split("\t"), values.split("\t"), strict=True))
    assert (fields["healthy"], fields["store_reachable"]) == ("no", "no")
    assert fields["store_error"]
