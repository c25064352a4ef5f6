"""The CLI says when a job runs next, as a user needs it right after creating one: the CLI
(in the test process: tests/e2e/clirun.py) against a real `cronwheel api` (which runs no
scheduler, so a job's first run is never created while these tests look), on an
80-column terminal and in a pipe. A pipe's stdout stays the tab-separated table; the line
about the next run is on stderr, beside the `more: --cursor` hint.

SQLite only: this is the CLI's rendering; the API's `next_fire_at` on both stores is
pinned by tests/api/test_truth.py.
"""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py), on SQLite.
from tests.e2e.apiserver import api_url_per_module, shared_api  # noqa: F401
from tests.e2e.test_cli import cli
from tests.e2e.test_cli_views import on_terminal, piped


@pytest.fixture(scope="module")
def api_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The shared server's store: SQLite only (above)."""
    return f"sqlite:///{tmp_path_factory.mktemp('api') / 'e2e.db'}"


_ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\+00:00"
JOB_HEADER = ["id", "name", "state", "next_fire_at", "pool", "version"]


def _job(url: str, name: str) -> dict[str, object]:
    got = cli(url, "jobs", "get", name, "--json")
    assert got.returncode == 0, got.stderr
    job: dict[str, object] = json.loads(got.stdout)
    return job


def _seconds_left(words: str) -> float:
    """``in 48 s`` or ``in 4 min 52 s`` as seconds."""
    units = {"s": 1, "min": 60, "h": 3600}
    parts = re.findall(r"(\d+) (s|min|h)\b", words)
    assert words.startswith("in ") and parts, words
    return sum(int(n) * units[u] for n, u in parts)


def test_a_new_job_says_when_it_fires_first(api_url: str) -> None:
    made = piped(api_url, "jobs", "create", "--name", "soon", "--delay", "50", "--handler", "h")
    assert made.returncode == 0, made.stderr
    header, row = made.stdout.splitlines()  # the table alone: nothing a script must skip
    assert header.split("\t") == JOB_HEADER
    job = _job(api_url, "soon")
    assert row.split("\t")[3] == job["next_fire_at"]
    [line] = made.stderr.splitlines()
    found = re.fullmatch(rf"next fire: ({_ISO}) \((in [^)]+)\)", line)
    assert found, line
    assert found[1] == job["next_fire_at"]
    assert 40 <= _seconds_left(found[2]) <= 50

    now = piped(api_url, "jobs", "create", "--name", "at-once", "--now", "--handler", "h")
    assert now.returncode == 0, now.stderr
    assert now.stderr.strip() == (
        "next fire: none: an immediate job's one run is created with it"
        " (cronwheel jobs runs at-once)"
    )
    by_hand = piped(api_url, "jobs", "create", "--name", "by-hand", "--manual", "--handler", "h")
    assert by_hand.returncode == 0, by_hand.stderr
    assert by_hand.stderr.startswith("next fire: never by itself: a manual job runs when")
    quiet = cli(
        api_url, "jobs", "create", "--name", "quiet", "--delay", "9", "--handler", "h", "--json"
    )
    assert quiet.returncode == 0 and quiet.stderr == ""  # --json: the job alone
    assert json.loads(quiet.stdout)["name"] == "quiet"

    code, screen = on_terminal(
        api_url, "jobs", "create", "--name", "soon-too", "--delay", "50", "--handler", "h"
    )
    assert code == 0, screen
    job = _job(api_url, "soon-too")
    assert f"next fire: {job['next_fire_at']} (in " in screen
    assert "…" not in screen and max(len(line) for line in screen.splitlines()) <= 80


def test_a_job_without_runs_yet_says_when_the_first_is_due(api_url: str) -> None:
    made = cli(api_url, "jobs", "create", "--name", "later", "--delay", "300", "--handler", "h")
    assert made.returncode == 0, made.stderr
    due = _job(api_url, "later")["next_fire_at"]
    runs = piped(api_url, "jobs", "runs", "later")
    assert runs.returncode == 0, runs.stderr
    assert runs.stdout.splitlines() == [runs.stdout.splitlines()[0]]  # the header, no rows
    [line] = runs.stderr.splitlines()
    found = re.fullmatch(
        rf"no runs yet: the next is due at {re.escape(str(due))} \((in [^)]+)\);"
        " the scheduler creates its run shortly before",
        line,
    )
    assert found, line
    assert 280 <= _seconds_left(found[1]) <= 300
    code, screen = on_terminal(api_url, "jobs", "runs", "later")
    assert code == 0 and f"no runs yet: the next is due at {due} (in " in screen, screen
    assert json.loads(cli(api_url, "jobs", "runs", "later", "--json").stdout)["items"] == []

    paused = cli(api_url, "jobs", "pause", "later")
    assert paused.returncode == 0 and "next fire: none while paused" in paused.stderr
    runs = piped(api_url, "jobs", "runs", "later")
    assert runs.returncode == 0, runs.stderr
    assert runs.stderr.startswith("no runs yet: the job is paused, so none are planned")

    made = cli(api_url, "jobs", "create", "--name", "queue", "--manual", "--handler", "h")
    assert made.returncode == 0, made.stderr
    runs = piped(api_url, "jobs", "runs", "queue")
    assert runs.returncode == 0, runs.stderr
    assert runs.stderr.startswith(
        "no runs yet: a manual job runs only when triggered or enqueued to"
    )
    # Once there is a run, the table says it all.
    assert cli(api_url, "jobs", "trigger", "queue").returncode == 0
    runs = piped(api_url, "jobs", "runs", "queue")
    assert runs.returncode == 0 and runs.stderr == "" and len(runs.stdout.splitlines()) == 2


def test_jobs_list_at_80_columns_says_when_each_job_fires_next(api_url: str) -> None:
    for name, every in (("hourly-invoice-run", "3600"), ("daily", "86400")):
        made = cli(api_url, "jobs", "create", "--name", name, "--every", every, "--handler", "h")
        assert made.returncode == 0, made.stderr
    code, screen = on_terminal(api_url, "jobs", "list")
    assert code == 0, screen
    assert "…" not in screen and max(len(line) for line in screen.splitlines()) <= 80
    assert re.search(r"\bnext fire\b", screen.splitlines()[0]), screen
    # A row is found by its id, always whole on the row's first line: within the second
    # of the create the times read "in 1 h" / "in 1 d", short enough for the pool column
    # too, and the name then wraps onto a second line.
    hourly_id, job = _job(api_url, "hourly-invoice-run")["id"], _job(api_url, "daily")
    hourly = next(line for line in screen.splitlines() if str(hourly_id) in line)
    daily = next(line for line in screen.splitlines() if str(job["id"]) in line)
    assert re.search(r"\bin (59 min \d+ s|1 h)(\s|$)", hourly), screen
    assert re.search(r"\bin (23 h 59 min|1 d)(\s|$)", daily), screen
    # Wider, the whole time; in a pipe, always the whole time.
    code, screen = on_terminal(api_url, "jobs", "list", columns=160)
    assert code == 0 and str(job["next_fire_at"]) in screen, screen
    lines = piped(api_url, "jobs", "list").stdout.splitlines()
    assert lines[0].split("\t") == JOB_HEADER
    assert datetime.fromisoformat(lines[2].split("\t")[3]) == datetime.fromisoformat(
        str(job["next_fire_at"])
    )
