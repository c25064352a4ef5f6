"""``cronwheel jobs create --command LINE`` and ``--publish BROKER:TO`` against a real
``cronwheel api`` (issue 30, decision 0053): the options make the action the API
documents; a line that cannot be argv, or options of another kind of action, are usage
errors (exit 2) naming the option, before anything reaches the API."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e import clirun

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py).
from tests.e2e.apiserver import api_store, api_url_per_module, shared_api  # noqa: F401
from tests.e2e.test_cli import TOKEN, cli


def _created(url: str, *args: str) -> dict[str, Any]:
    done = cli(url, "jobs", "create", *args, "--json")
    assert done.returncode == 0, done.stderr
    job: dict[str, Any] = json.loads(done.stdout)
    return job


def _names(url: str) -> list[str]:
    listed = json.loads(cli(url, "jobs", "list", "--json").stdout)["items"]
    return [j["name"] for j in listed]


def test_a_command_job_from_options(api_url: str) -> None:
    job = _created(
        api_url,
        "--name", "nightly-dump", "--cron", "0 3 * * *", "--pool", "backups",
        "--command", "pg_dump --file '/backups/db main.sql' \"$DB\" -Z\\ 9",
        "--env", "PGHOST=db.internal", "--env", "PGPASSWORD=s3cret=x", "--env", "EMPTY=",
        "--env", "DSN=postgres://u:pw@db/main", "--secret-env", "DSN",
        "--cwd", "/backups", "--timeout", "3600", "--permanent-exit-code", "2",
    )  # fmt: skip
    assert job["action"] == {
        "type": "command",
        # Split as a shell splits words, run without one: "$DB" reaches pg_dump as written.
        "argv": ["pg_dump", "--file", "/backups/db main.sql", "$DB", "-Z 9"],
        "env": {"PGHOST": "db.internal", "PGPASSWORD": "***", "EMPTY": "", "DSN": "***"},
        "secret_env": ["DSN"],
        "cwd": "/backups",
        "timeout_seconds": 3600.0,
        "permanent_exit_codes": [2],
    }
    # The command's timeout is the job's too (decision 0048): an hour's dump is not
    # stopped by the 300 s default.
    assert (job["timeout_seconds"], job["pool"]) == (3600.0, "backups")
    # No worker serves the pool yet: the job waits for one, and says so.
    assert [n["code"] for n in job["notices"]] == ["no_live_worker"]

    shown = cli(api_url, "jobs", "get", "nightly-dump")
    assert shown.returncode == 0, shown.stderr
    assert "pg_dump" in shown.stdout and "s3cret" not in shown.stdout

    # The least a command needs: its line; --command works from a real process too.
    least = clirun.real(
        ["jobs", "create", "--name", "df", "--manual", "--command", "df -P /", "--json"],
        {"CRONWHEEL_URL": api_url, "CRONWHEEL_TOKEN": TOKEN},
    )
    assert least.returncode == 0, least.stderr
    assert json.loads(least.stdout)["action"] == {"type": "command", "argv": ["df", "-P", "/"]}


def test_a_command_line_that_cannot_be_argv_is_refused_naming_the_option(api_url: str) -> None:
    def refused(line: str) -> str:
        done = cli(api_url, "jobs", "create", "--name", "bad", "--now", "--command", line)
        assert done.returncode == 2, (line, done.stdout, done.stderr)
        assert "--command" in done.stderr and "Traceback" not in done.stderr
        return " ".join(done.stderr.split())  # click wraps its message

    assert "no closing quotation" in refused("pg_dump -f '/backups/db.sql")
    assert "is empty" in refused("   ")
    # A shell's operators would reach the program as words: refused, with the way out.
    piped = refused("pg_dump main | gzip > /backups/db.gz")
    assert "'|' is shell syntax" in piped
    assert "sh -c 'pg_dump main | gzip > /backups/db.gz'" in piped
    assert "'&&' is shell syntax" in refused("cd /backups&&ls")
    assert "'$(' is shell syntax" in refused("echo $(date)")
    # Quoted, or escaped, an operator is an argument like any other.
    quoted = _created(api_url, "--name", "quoted", "--now", "--command", "grep '|' \\> \"a;b\"")
    assert quoted["action"]["argv"] == ["grep", "|", ">", "a;b"]
    assert _names(api_url) == ["quoted"]


def test_options_of_another_action_are_usage_errors(api_url: str) -> None:
    def refused(*args: str) -> str:
        done = cli(api_url, "jobs", "create", "--name", "bad", "--now", *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        return " ".join(done.stderr.split())

    both = refused("--command", "df", "--webhook", "https://example.com/h")
    assert "give exactly one action" in both and "(given: --webhook, --command)" in both
    assert "give exactly one action" in refused()
    assert "--env goes with --command, not --webhook" in refused(
        "--webhook", "https://example.com/h", "--env", "A=1"
    )
    assert "--cwd goes with --command, not --publish" in refused(
        "--publish", "events:orders", "--cwd", "/tmp"
    )
    assert "--method goes with --webhook, not --command" in refused(
        "--command", "df", "--method", "GET"
    )
    assert "--body goes with --webhook or --publish, not --handler" in refused(
        "--handler", "h", "--body", "{}"
    )
    assert "expected NAME=VALUE" in refused("--command", "df", "--env", "PGHOST")
    twice = refused("--command", "df", "--env", "PGHOST=a", "--env", "PGHOST=b")
    assert "PGHOST is given twice" in twice
    assert "expected BROKER:TO" in refused("--publish", "orders.created")
    body = refused("--publish", "events:orders", "--body", "{order: 42}")
    assert "--body" in body and "is not JSON" in body
    assert _names(api_url) == []


def test_what_only_the_api_knows_is_its_422_naming_the_field(api_url: str) -> None:
    path = cli(
        api_url, "jobs", "create", "--name", "p", "--now", "--command", "df", "--env", "PATH=/x"
    )
    assert path.returncode == 2 and "action.env" in path.stderr and "PATH" in path.stderr
    dotted = cli(api_url, "jobs", "create", "--name", "d", "--now", "--command", "/opt/../bin/sh")
    assert dotted.returncode == 2 and "action.argv" in dotted.stderr
    broker = cli(api_url, "jobs", "create", "--name", "b", "--now", "--publish", "no way:x")
    assert broker.returncode == 2 and "action.broker" in broker.stderr
    assert _names(api_url) == []


def test_a_publish_job_from_options(api_url: str) -> None:
    job = _created(
        api_url, "--name", "order-created", "--manual", "--pool", "events",
        "--publish", "events:orders.created", "--body", '{"order": 42}',
    )  # fmt: skip
    assert job["action"] == {
        "type": "publish",
        "broker": "events",
        "to": "orders.created",
        "body": {"order": 42},
    }
    # Only the first ':' separates: a RabbitMQ exchange/key or a stream may hold more.
    rabbit = _created(api_url, "--name", "invoices", "--now", "--publish", "billing:inv/a:b")
    assert (rabbit["action"]["broker"], rabbit["action"]["to"]) == ("billing", "inv/a:b")
    assert "body" not in rabbit["action"]  # the message is then the run's envelope
    # A string body is sent as text: it is given as a JSON string.
    text = _created(api_url, "--name", "t", "--now", "--publish", "audit:s", "--body", '"hi"')
    assert text["action"]["body"] == "hi"
    # --body is the webhook's request body too.
    hook = _created(
        api_url, "--name", "h", "--now", "--webhook", "https://example.com/h", "--body", "[1]"
    )
    assert (hook["action"]["body"], hook["action"]["method"]) == ([1], "POST")
    shown = cli(api_url, "jobs", "get", "order-created")
    assert "publish to orders.created on broker events" in shown.stdout


def test_jobs_create_help_fits_80_columns() -> None:
    shown = clirun.run(["jobs", "create", "--help"], {}, columns=80)
    assert shown.returncode == 0
    assert "--command LINE" in shown.stdout and "--publish BROKER:TO" in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80
