"""What the CLI shows a person carries no raw control or bidi character (docs/security.md,
"Names, run ids…"): a name stored before names were checked, or an error a target
answered, is escaped as the text log escapes it, in `jobs get`, `jobs list` (in a pipe
and on a terminal), `runs get`, `jobs runs`, `dlq list` and the hints on stderr. The API is a real
`cronwheel api`; the CLI runs in this process, but for the terminal, a pseudo-terminal."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from cronwheel.core.model import AttemptOutcome, RunState
from cronwheel.store import open_store
from cronwheel.store.conformance.factories import make_job, make_run, succeeded
from tests.e2e import clirun

# The fixture: a `cronwheel api` of the test's own, on its store_url.
from tests.e2e.apiserver import api_url_per_test  # noqa: F401  (the fixture)
from tests.e2e.test_cli import TOKEN
from tests.e2e.test_cli_views import on_terminal_process

# ESC (a terminal command: clear the screen), a C1 CSI (the same, in one byte, to many
# terminals), a right-to-left override (the name reads in another order) and a newline
# (a forged line).
NAME = "report\x1b[2J\x9b31m\u202etxt.exe\nforged"
SHOWN_NAME = "report\\x1b[2J\\x9b31m\\u202etxt.exe\\nforged"
ERROR = "boom\x1b]0;pwned\x07 \u2066isolated\u2069 \x85next"
SHOWN_ERROR = "boom\\x1b]0;pwned\\x07 \\u2066isolated\\u2069 \\x85next"
RAW = ("\x1b", "\x9b", "\x07", "\x85", "\u202e", "\u2066", "\u2069", "\nforged")


async def _stored_before_the_rule(store_url: str) -> tuple[str, int]:
    """A job with NAME, written to the store directly (as one created before names were
    checked), and a dead run of it whose error is ERROR: their ids."""
    store = await open_store(store_url)
    try:
        now = datetime.now(UTC)
        job = make_job(NAME, next_fire_at=now + timedelta(hours=1))
        await store.create_jobs([job], [make_run(job, now - timedelta(seconds=1))])
        [claimed] = await store.claim_runs(
            "w", [job.pool], limit=1, now=now, prefetch_until=now, lease_seconds=30
        )
        failed = succeeded(
            claimed,
            now,
            state=RunState.DEAD,
            outcome=AttemptOutcome.FAILED,
            error_class="Boom",
            error_message=ERROR,
            reason="it failed",
        )
        assert await store.complete_runs([failed]) == [claimed.run.id]
        return job.id, claimed.run.id
    finally:
        await store.close()


def _cli(url: str, *args: str) -> str:
    # In a pipe, stdout and stderr as the person sees them; the command's logging set-up
    # undone after it (tests/e2e/clirun.py).
    result = clirun.run([*args, "--url", url, "--token", TOKEN], {})
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def _escaped(output: str, shown: str) -> None:
    assert shown in output, output
    for raw in RAW:
        assert raw not in output, (raw, output)


def test_names_and_errors_are_escaped_in_every_view(store_url: str, api_url: str) -> None:
    job_id, run_id = asyncio.run(_stored_before_the_rule(store_url))
    got = _cli(api_url, "jobs", "get", job_id)
    _escaped(got, f"name:            {SHOWN_NAME}\n")
    _escaped(_cli(api_url, "jobs", "list"), f"\t{SHOWN_NAME}\t")  # a pipe: one row, TSV
    _escaped(_cli(api_url, "jobs", "pause", job_id), SHOWN_NAME)  # and its hint on stderr
    _escaped(_cli(api_url, "runs", "get", str(run_id)), SHOWN_ERROR)
    _escaped(_cli(api_url, "jobs", "runs", job_id), SHOWN_ERROR)
    _escaped(_cli(api_url, "dlq", "list"), SHOWN_ERROR)
    # A terminal: rich's table, wrapped to 200 columns so that the name stays whole.
    code, screen = on_terminal_process(api_url, "jobs", "list", columns=200)
    assert code == 0, screen
    _escaped(screen, SHOWN_NAME)
