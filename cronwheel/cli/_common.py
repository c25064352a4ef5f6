"""Options and error handling shared by the commands."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import click

from cronwheel import eventloop
from cronwheel.errors import CronwheelError, InvalidInput
from cronwheel.store import DEFAULT_URL

T = TypeVar("T")

db_option = click.option(
    "--db",
    "db_url",
    envvar="CRONWHEEL_DB",
    default=DEFAULT_URL,
    show_default=True,
    help="Store URL: sqlite:///file.db or postgresql://user@host/db (env CRONWHEEL_DB).",
)


def run_async(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine for a command; cronwheel's own errors become a message and exit 2
    (bad input) or 1 (anything else it refused), never a traceback."""
    try:
        return eventloop.run(main())
    except InvalidInput as exc:
        raise click.UsageError(str(exc)) from exc
    except (CronwheelError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
