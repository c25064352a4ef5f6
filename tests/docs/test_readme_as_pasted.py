"""The README and docs/ as a new user pastes them, beyond what
tests/docs/test_code_blocks.py checks.

That run allows top-level ``await`` in every python block (a block may continue a
session set up by a hidden ``setup`` marker); a block that stands alone is a program a
user saves and runs with ``python``, so here it must compile as one. The HTTP API
bootstrap block (docs/api.md's first session) starts its own `cronwheel api` on a
PostgreSQL server that has never seen cronwheel (no database yet): the database name and
the port are changed to fresh ones, nothing else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests import pg
from tests.docs.test_code_blocks import BLOCKS, free_port

README_DSN = "postgresql://postgres@127.0.0.1/cronwheel"
API_DOC = "docs/api.md"


def test_the_python_blocks_that_stand_alone_run_with_python() -> None:
    """Every python block of the README and docs/ (the docs are pasted as much)."""
    broken = []
    for block in BLOCKS:
        if block.kind != "python" or block.marker == "setup":
            continue
        try:
            compile(block.text, block.where, "exec")  # as `python file.py` compiles it
        except SyntaxError as exc:
            broken.append(f"{block.where}: {exc.msg} (line {exc.lineno} of the block)")
    assert not broken, "\n".join(broken)


def _the_block() -> str:
    [block] = [b for b in BLOCKS if str(b.path) == API_DOC and "cronwheel api --db" in b.text]
    assert README_DSN in block.text and "http://127.0.0.1:8080" in block.text, block.text
    return block.text


def test_the_api_block_starts_on_a_fresh_postgresql_server(pg_dsn: str, tmp_path: Path) -> None:
    name = f"cronwheel_readme_{uuid.uuid4().hex[:12]}"  # does not exist: a fresh server's view
    dsn = pg_dsn.rpartition("/")[0] + f"/{name}"
    port = free_port()
    text = _the_block().replace(README_DSN, dsn)
    text = text.replace("cronwheel api --db", f"cronwheel api --port {port} --db")
    text = text.replace("http://127.0.0.1:8080", f"http://127.0.0.1:{port}")
    script = tmp_path / "block.sh"
    script.write_text(f"set -euo pipefail\n{text}\necho $! > {tmp_path / 'api.pid'}\n")
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWHEEL_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    log = tmp_path / "api.log"
    with open(log, "wb") as out:
        ran = subprocess.run(
            ["bash", str(script)], cwd=tmp_path, env=env, stdout=out, stderr=out, timeout=60
        )
    pid = int((tmp_path / "api.pid").read_text())
    try:
        assert ran.returncode == 0, log.read_text()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                pytest.fail(f"cronwheel api exited:\n{log.read_text()}", pytrace=False)
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        pg.drop_database(name)
