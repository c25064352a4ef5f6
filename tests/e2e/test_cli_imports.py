"""Each command imports only what it uses: a worker or scheduler starts without the web
framework (it claims its first runs sooner), the commands that talk to the API without
the engine, and ``import cronwheel`` alone without either (issue 18)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

WEB = ("fastapi", "starlette", "uvicorn", "jinja2")

PROBE = """
import json, sys
import click
from cronwheel.cli import main
if sys.argv[1]:
    assert main.get_command(click.Context(main), sys.argv[1]) is not None
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in
    ("fastapi", "starlette", "uvicorn", "jinja2", "pydantic", "cronwheel", "httpx",
     "httpcore"))))
"""


def _imported_by(command: str) -> set[str]:
    # A fresh interpreter: this test process has imported everything already.
    out = subprocess.run(
        [sys.executable, "-c", PROBE, command], capture_output=True, text=True, check=True
    ).stdout
    return set(json.loads(out))


@pytest.mark.parametrize("command", ["worker", "scheduler", "migrate", "cron"])
def test_the_engine_commands_import_no_web_framework(command: str) -> None:
    imported = _imported_by(command)
    assert not {m for m in imported if m.split(".")[0] in WEB}, imported
    assert not {m for m in imported if m.startswith(("cronwheel.api", "cronwheel.dashboard"))}
    # nor the HTTP stack: a worker makes its webhook sender with its first webhook run
    if command == "worker":  # nor the scheduler's planner
        assert not {"cronwheel.engine.scheduler", "cronwheel.core.planning"} & imported
    assert not {m for m in imported if m.split(".")[0] in ("httpx", "httpcore")}, imported


@pytest.mark.parametrize(
    "command",
    ["jobs", "pipelines", "runs", "dlq", "notifications", "status", "keys", "tenants", "import"],
)
def test_the_api_client_commands_import_neither_server_nor_engine(command: str) -> None:
    imported = _imported_by(command)
    assert "cronwheel.sdk" in imported  # they do load what they need
    assert not {m for m in imported if m.split(".")[0] in WEB}, imported
    assert not {"cronwheel.engine.worker", "cronwheel.engine.scheduler"} & imported
    # nor the runs' lifecycle, which tracing (imported for its request headers) needs only
    # in a worker: a tenth of each command's start
    assert "cronwheel.core.lifecycle" not in imported


def test_the_cli_alone_loads_no_command() -> None:
    imported = _imported_by("")
    assert not {
        m for m in imported if m.startswith("cronwheel.cli.") and m != "cronwheel.cli._logs"
    }
    assert "pydantic" not in imported


def test_import_cronwheel_is_lazy_but_complete() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, cronwheel; before = 'pydantic' in sys.modules;"
            " names = [getattr(cronwheel, n) for n in cronwheel.__all__];"
            " print(before, all(names), set(cronwheel.__all__) <= set(dir(cronwheel)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["False", "True", "True"]


def test_an_unknown_attribute_of_cronwheel_is_an_attribute_error() -> None:
    import cronwheel

    with pytest.raises(AttributeError, match="no_such_thing"):
        cronwheel.no_such_thing  # type: ignore[attr-defined]  # noqa: B018
