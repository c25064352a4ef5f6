"""``--log-format`` and ``--log-level`` (env ``CRONWHEEL_LOG_FORMAT``,
``CRONWHEEL_LOG_LEVEL``): the same two options on every long-running command."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cronwheel.logs import FORMATS, LEVELS, configure

F = TypeVar("F", bound=Callable[..., Any])


def log_options(default_level: str, quiet_by_default: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Add the two options to a command and set up logging before its body runs, from
    ``default_level`` up unless told otherwise; the loggers ``quiet_by_default`` log
    nothing unless a level is given (``cronwheel dev``'s console shows every attempt)."""

    def decorate(fn: F) -> F:
        @click.option(
            "--log-level",
            type=click.Choice(LEVELS, case_sensitive=False),
            envvar="CRONWHEEL_LOG_LEVEL",
            default=default_level,
            show_default=True,
            help="Log records from this level up (env CRONWHEEL_LOG_LEVEL).",
        )
        @click.option(
            "--log-format",
            type=click.Choice(FORMATS, case_sensitive=False),
            envvar="CRONWHEEL_LOG_FORMAT",
            default="text",
            show_default=True,
            help="Log lines on stderr as text or one JSON object each (env"
            " CRONWHEEL_LOG_FORMAT); docs/observability.md lists the fields.",
        )
        @functools.wraps(fn)
        def command(*args: Any, log_format: str, log_level: str, **kwargs: Any) -> Any:
            configure(log_format.lower(), log_level.lower())
            source = click.get_current_context().get_parameter_source("log_level")
            if source is click.core.ParameterSource.DEFAULT:
                for name in quiet_by_default:
                    logging.getLogger(name).setLevel(logging.CRITICAL + 1)
            return fn(*args, **kwargs)

        return command  # type: ignore[return-value]  # same signature, less two options

    return decorate


def access_log_option(default: bool) -> Callable[[F], F]:
    """``--access-log/--no-access-log``: uvicorn's line per HTTP request, at info."""
    where = "on in cronwheel api" if default else "off in cronwheel dev, whose console shows runs"
    return click.option(
        "--access-log/--no-access-log",
        default=default,
        show_default=True,
        help=f"A log line per HTTP request, at info ({where}).",
    )
