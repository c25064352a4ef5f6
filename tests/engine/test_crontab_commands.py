"""A crontab entry's command as a real worker runs it (issue 30 item 3, decision 0052):
through the crontab's shell, the text after its ``%`` on stdin as cron gives it, no
arguments seen by the command, its variables in its environment."""

from __future__ import annotations

import json

from cronwheel.core.crontab import parse_crontab
from cronwheel.core.model import RunState
from cronwheel.engine.worker import Worker
from cronwheel.store.base import Store
from tests.engine.helpers import job_with_run, one_run
from tests.engine.test_commands import CONFIG

CRONTAB = r"""
GREETING=hello there
* * * * * echo "[$GREETING] [$1] [$#]"; cat; echo " 100\% done"%first line%second 50\% line%
"""


async def test_an_entry_runs_as_cron_would_run_it(store: Store) -> None:
    [entry] = parse_crontab(CRONTAB).entries
    action = entry.spec(pool="default", timeout_seconds=30)["action"]
    job, _ = await job_with_run(store, action=action)
    assert await Worker(store, CONFIG).run_once() == 1
    run = await one_run(store, job.id)
    [attempt] = await store.list_attempts("default", run.id)
    assert run.state is RunState.SUCCEEDED, attempt
    assert attempt.output is not None
    stdout = json.loads(attempt.output)["stdout"]
    # stdin is the text after the first %, each later % a newline, \% a %; no envelope
    assert stdout == "[hello there] [] [0]\nfirst line\nsecond 50% line\n 100% done\n"
