"""Ordinary mistakes answered in a sentence, with the documented exit code, by real
``cronwheel`` processes: a database that does not exist, a server down, a user refused,
an SQLite folder that does not exist, a port in use, a malformed ``--db``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests import pg
from tests.e2e.procs import REPO, free_port

PASSWORD = "pw-" + uuid.uuid4().hex  # trust authentication accepts and ignores it

# Every command that opens a store, with what keeps it from doing anything else.
STORE_COMMANDS = {
    "migrate": ["migrate"],
    "worker": ["worker", "--duration", "5"],
    "scheduler": ["scheduler", "--duration", "5"],
    "api": ["api", "--port", "0"],
    "dev": ["dev", "--port", "0", "--duration", "5"],
    "secrets rotate": [
        "secrets",
        "rotate",
        "--secrets-key",
        "3O-FTHqnfsDPNuGfL1d8cMKn41fSn2TQJWiIDNhnVIE=",
    ],
}


def run(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CRONWHEEL_")}
    return subprocess.run(
        [sys.executable, "-m", "cronwheel", *args],
        cwd=cwd,
        env={**clean, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def said(result: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The process exited with ``code``, saying each of ``words`` on stderr in a line or
    two (click's usage lines aside), without a traceback or the password."""
    err = result.stderr
    assert result.returncode == code, (result.returncode, err, result.stdout)
    assert "Traceback" not in err and "Traceback" not in result.stdout, err
    lines = [line for line in err.splitlines() if line.strip()]
    message = [line for line in lines if not line.startswith(("Usage:", "Try '"))]
    assert 1 <= len(message) <= 2, err
    for word in words:
        assert word in err, (word, err)
    assert PASSWORD not in err + result.stdout
    return err


def pg_url(user: str = "postgres", port: int = 0, database: str = "postgres") -> str:
    """A URL to the test server (or ``port`` on its host), with a password."""
    server = urlsplit(pg.DSN)
    return (
        f"postgresql://{user}:{PASSWORD}@{server.hostname}:{port or server.port or 5432}/{database}"
    )


@pytest.fixture
def postgres(pg_dsn: str) -> None:
    """PostgreSQL is there (fails in CI, skips elsewhere, when it is not)."""


@pytest.mark.parametrize("command", list(STORE_COMMANDS))
def test_a_database_that_does_not_exist_names_the_command_that_creates_it(
    postgres: None, command: str
) -> None:
    name = f"cronwheel_missing_{uuid.uuid4().hex[:8]}"
    result = run(*STORE_COMMANDS[command], "--db", pg_url(database=name))
    said(result, 6, f'database "{name}" does not exist', "cronwheel migrate --create-database")
    assert "postgres:***@" in result.stderr


@pytest.mark.parametrize("command", list(STORE_COMMANDS))
def test_a_server_that_is_down_is_unavailable(command: str) -> None:
    result = run(*STORE_COMMANDS[command], "--db", pg_url(port=free_port()))
    said(result, 6, "cannot reach PostgreSQL", "Connection refused")


@pytest.mark.parametrize("command", ["migrate", "worker"])
def test_a_user_the_server_refuses(postgres: None, command: str) -> None:
    user = f"nobody_{uuid.uuid4().hex[:8]}"
    result = run(*STORE_COMMANDS[command], "--db", pg_url(user=user))
    said(result, 6, f'refused user "{user}"', "check the user")


@pytest.mark.parametrize("command", list(STORE_COMMANDS))
def test_an_sqlite_file_in_a_folder_that_does_not_exist(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    result = run(*STORE_COMMANDS[command], "--db", str(missing / "x.db"))
    said(result, 6, f"the folder {missing} does not exist", "mkdir -p")
    result = run(*STORE_COMMANDS[command], "--db", f"sqlite:///{missing / 'x.db'}")
    said(result, 6, f"the folder {missing} does not exist")


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("command", ["api", "dev"])
def test_a_port_in_use(command: str, busy_port: int, tmp_path: Path) -> None:
    result = run(command, "--db", str(tmp_path / "x.db"), "--port", str(busy_port))
    said(result, 1, f"port {busy_port} on 127.0.0.1 is already in use", "--port")


def test_db_takes_bare_paths_and_sqlalchemy_urls(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    for db, file in [
        ("dev.db", tmp_path / "dev.db"),
        ("data/rel.db", tmp_path / "data" / "rel.db"),
        (str(tmp_path / "abs.db"), tmp_path / "abs.db"),
        ("sqlite:///three.db", tmp_path / "three.db"),
        (f"sqlite:///{tmp_path / 'four.db'}", tmp_path / "four.db"),
    ]:
        result = run("migrate", "--db", db, cwd=tmp_path)
        assert result.returncode == 0, (db, result.stderr)
        assert file.is_file(), db
    memory = run("migrate", "--db", ":memory:", cwd=tmp_path)
    assert memory.returncode == 0 and "schema at version" in memory.stdout, memory.stderr


@pytest.mark.parametrize("db", ["mysql://host/db", "postgresql:/host/db", "sqlite://", ""])
def test_a_malformed_db_is_refused_under_its_option_name(db: str) -> None:
    result = run("migrate", "--db", db)
    err = said(result, 2, "'--db'")
    assert "url:" not in err
    if db.startswith("mysql"):
        assert "sqlite:////absolute/path.db" in err and "postgresql://" in err


def test_create_database_creates_it_once_then_finds_it(postgres: None) -> None:
    name = f"cronwheel_created_{uuid.uuid4().hex[:8]}"
    url = pg_url(database=name)
    try:
        first = run("migrate", "--create-database", "--db", url)
        assert first.returncode == 0, first.stderr
        assert f'database "{name}" on' in first.stdout and "created" in first.stdout
        assert "applied: 1" in first.stdout
        again = run("migrate", "--create-database", env={"CRONWHEEL_DB": url})
        assert again.returncode == 0, again.stderr
        assert "exists already" in again.stdout and "nothing to apply" in again.stdout
        assert PASSWORD not in first.stdout + first.stderr + again.stdout + again.stderr
    finally:
        pg.drop_database(name)


def test_create_database_without_the_right_to_is_not_allowed(postgres: None) -> None:
    role = f"cronwheel_nocreate_{uuid.uuid4().hex[:8]}"
    name = f"cronwheel_refused_{uuid.uuid4().hex[:8]}"
    pg._run(pg._admin(f'CREATE ROLE "{role}" LOGIN NOCREATEDB'))
    try:
        result = run("migrate", "--create-database", "--db", pg_url(user=role, database=name))
        said(result, 5, f'user "{role}" may not create databases', f'CREATE DATABASE "{name}"')
    finally:
        pg.drop_database(name)
        pg._run(pg._admin(f'DROP ROLE IF EXISTS "{role}"'))


def test_a_remote_command_with_the_api_down_is_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = run("jobs", "list", "--url", url, "--token", "x" * 20)
    said(result, 6, f"cannot reach {url}")
