"""What a real ``cronwheel worker`` has imported when its first run starts: none of what
only some runs need (issue 28, "W1 from the spawn").

tests/e2e/test_cli_imports.py checks the worker command's module alone; this one runs
the whole start (the options' checks, the store opened and migrated, the clock probes,
the first claim) on each store, for what those steps pull in besides: pydantic with the
pipelines' definitions (a store parses one only to plan a pipeline run), the HTTP stack
with the publish package (needed only with a ``--broker``), importlib.metadata with the
version (needed only by a webhook's or a notification's User-Agent, or a tracer).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from cronwheel.control.service import connect
from tests.e2e.procs import REPO
from tests.e2e.procs import cronwheel as cronwheel_proc

# The start differs by store (each has its own pipeline-run module): run on both.
pytestmark = pytest.mark.both_stores

APP = """
import json, os, sys
from cronwheel.actions.handler import HandlerRegistry

handlers = HandlerRegistry()


async def first(ctx):
    out = os.environ["IMPORTS_OUT"]
    if not os.path.exists(out):
        with open(out + ".tmp", "w") as f:
            json.dump(sorted(sys.modules), f)
        os.replace(out + ".tmp", out)


handlers.register("first", first)
"""

NOT_AT_START = {
    "pydantic",
    "cronwheel.core.jobspec",
    "cronwheel.core.pipelines.definition",
    "httpx",
    "httpcore",
    "cronwheel.actions.webhook",
    "cronwheel.actions.publish",
    "importlib.metadata",
}


async def test_a_worker_starts_its_first_run_without_what_only_some_runs_need(
    store_url: str, tmp_path: Path
) -> None:
    service = await connect(store_url)
    try:
        job = await service.create(
            name="first", schedule={"kind": "manual"}, action={"type": "handler", "name": "first"}
        )
        await service.enqueue(job.id, [None])
    finally:
        await service.store.close()
    (tmp_path / "imports_app.py").write_text(APP)
    out = tmp_path / "imported.json"
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "IMPORTS_OUT": str(out)}
    args = ["worker", "--db", store_url, "--app", "imports_app:handlers", "--log-level", "error"]
    log = tmp_path / "worker.log"
    with cronwheel_proc(*args, env=env, log=log) as proc:
        deadline = time.monotonic() + 60
        while not out.exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            await asyncio.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    imported = set(json.loads(out.read_text()))
    assert "cronwheel.engine.worker" in imported  # the probe saw the worker's process
    assert not NOT_AT_START & imported, sorted(NOT_AT_START & imported)
