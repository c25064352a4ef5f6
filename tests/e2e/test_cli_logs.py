"""--log-format and --log-level on every command, the remote ones included: an error in
JSON is a JSON line (a real process), debug shows the HTTP requests on stderr (the
command in the test process, tests/e2e/clirun.py, against a real `cronwheel api`)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import click

from cronwheel.cli import main
from cronwheel.cli._logs import leaves

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py).
from tests.e2e.apiserver import api_store, api_url_per_module, shared_api  # noqa: F401
from tests.e2e.procs import REPO, free_port
from tests.e2e.test_cli import TOKEN, cli

LONG_RUNNING = {"api", "dev", "worker", "scheduler", "migrate"}


def _paths(group: click.Group) -> list[tuple[str, click.Command]]:
    found = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        sub = group.get_command(ctx, name)
        assert sub is not None, f"cronwheel {name} is listed but cannot be loaded"
        if isinstance(sub, click.Group):
            found += [(f"{name} {path}", leaf) for path, leaf in _paths(sub)]
        else:
            found.append((name, sub))
    return found


def test_every_command_takes_both_log_options() -> None:
    commands = _paths(main)
    assert len(commands) > 20 and {"jobs list", "cron next", "status"} <= dict(commands).keys()
    assert [c for _, c in commands] == list(leaves(main))
    for path, command in commands:
        options = {p.name: p for p in command.params if isinstance(p, click.Option)}
        level, fmt = options.get("log_level"), options.get("log_format")
        assert level is not None and fmt is not None, f"cronwheel {path} lacks the log options"
        assert (level.envvar, fmt.envvar) == ("CRONWHEEL_LOG_LEVEL", "CRONWHEEL_LOG_FORMAT")
        assert fmt.default == "text"
        short = path.split()[0] not in LONG_RUNNING
        assert level.default == "warning" if short else level.default in ("info", "warning")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronwheel", *args],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _json_lines(stderr: str) -> list[dict[str, Any]]:
    lines = stderr.splitlines()
    assert lines, "nothing on stderr"
    return [json.loads(line) for line in lines]  # each line parses, or the test fails


def test_an_unreachable_server_in_json_is_one_json_line_without_the_password() -> None:
    port = free_port()
    url = f"http://cli:pw-never-shown@127.0.0.1:{port}"
    by_flag = _run("jobs", "list", "--url", url, "--log-format", "json")
    by_env = _run("runs", "get", "1", "--url", url, env={"CRONWHEEL_LOG_FORMAT": "json"})
    for done in (by_flag, by_env):
        assert done.returncode == 6, done.stderr
        assert done.stdout == ""
        assert "pw-never-shown" not in done.stderr
        [line] = _json_lines(done.stderr)
        assert (line["level"], line["logger"], line["exit_code"]) == ("error", "cronwheel", 6)
        assert line["message"].startswith(f"cannot reach http://cli:***@127.0.0.1:{port}")
    # The error is the answer to why it stopped: no level hides it.
    quiet = _run("jobs", "list", "--url", url, "--log-format", "json", "--log-level", "critical")
    assert quiet.returncode == 6 and "cannot reach" in _json_lines(quiet.stderr)[0]["message"]
    # Text stays as it was: one line a person reads.
    text = _run("jobs", "list", "--url", url)
    assert text.returncode == 6
    assert text.stderr.startswith("error: cannot reach http://cli:***@")
    assert "pw-never-shown" not in text.stderr


def test_debug_shows_the_http_requests_on_stderr_and_the_results_on_stdout(
    api_url: str,
) -> None:
    created = cli(api_url, "jobs", "create", "--name", "ping", "--manual", "--handler", "h")
    assert created.returncode == 0, created.stderr
    quiet = cli(api_url, "jobs", "list")
    assert quiet.returncode == 0 and "ping" in quiet.stdout
    assert "HTTP Request" not in quiet.stderr  # warning by default: stderr stays clean

    debug = cli(api_url, "jobs", "list", "--log-level", "debug")
    assert debug.returncode == 0, debug.stderr
    assert debug.stdout == quiet.stdout  # the table, and nothing else
    assert f"HTTP Request: GET {api_url}/v1/jobs" in debug.stderr
    assert TOKEN not in debug.stderr + debug.stdout

    as_json = cli(api_url, "jobs", "list", "--log-level", "debug", "--log-format", "json")
    assert as_json.returncode == 0 and as_json.stdout == quiet.stdout
    lines = _json_lines(as_json.stderr)
    assert any(line["logger"] == "httpx" and "/v1/jobs" in line["message"] for line in lines)


def test_api_errors_and_hints_in_json_are_json_lines(api_url: str) -> None:
    missing = cli(api_url, "runs", "get", "999999", "--log-format", "json")
    assert missing.returncode == 3
    [line] = _json_lines(missing.stderr)
    assert (line["level"], line["exit_code"]) == ("error", 3)
    unnamed = cli(api_url, "jobs", "get", "no-such-job", "--log-format", "json")
    assert unnamed.returncode == 3
    [line] = _json_lines(unnamed.stderr)
    assert line["message"] == "no job is named 'no-such-job' and no job id starts with it"
    # A hint for the person (when the job fires next, after a change) is an info record
    # in JSON.
    made = cli(api_url, "jobs", "create", "--name", "tick", "--manual", "--handler", "h")
    assert made.returncode == 0, made.stderr
    paused = cli(api_url, "jobs", "pause", "tick", "--log-format", "json", "--log-level", "info")
    assert paused.returncode == 0 and "tick" in paused.stdout
    [line] = _json_lines(paused.stderr)
    assert (line["logger"], line["level"]) == ("cronwheel.cli", "info")
    assert line["message"].startswith("next fire: none while paused")
    # Below its level (warning, the default) the hint is not shown at all in JSON.
    resumed = cli(api_url, "jobs", "resume", "tick", "--log-format", "json")
    assert resumed.returncode == 0 and resumed.stderr == ""
