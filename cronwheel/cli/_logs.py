"""``--log-format`` and ``--log-level`` (env ``CRONWHEEL_LOG_FORMAT``,
``CRONWHEEL_LOG_LEVEL``): the same two options on every command — declared by the
long-running ones with their own default level, given to every other leaf command of
the tree (``warning``) by :func:`add_everywhere` as each command is loaded."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

import click

from cronwheel.core.text import escape_controls
from cronwheel.observability.logs import FORMATS, LEVELS, configure, json_lines, log_exit
from cronwheel.security.redact import redact

F = TypeVar("F", bound=Callable[..., Any])


def _level_option(default_level: str) -> dict[str, Any]:
    return {
        "type": click.Choice(LEVELS, case_sensitive=False),
        "envvar": "CRONWHEEL_LOG_LEVEL",
        "default": default_level,
        "show_default": True,
        "help": "Log records from this level up (env CRONWHEEL_LOG_LEVEL).",
    }


_FORMAT_OPTION: dict[str, Any] = {
    "type": click.Choice(FORMATS, case_sensitive=False),
    "envvar": "CRONWHEEL_LOG_FORMAT",
    "default": "text",
    "show_default": True,
    "help": "Log lines on stderr as text or one JSON object each (env"
    " CRONWHEEL_LOG_FORMAT); docs/observability.md lists the fields.",
}


def _configuring(fn: F, quiet_by_default: tuple[str, ...]) -> F:
    """``fn`` after logging is set up from the two options, which it does not receive."""

    @functools.wraps(fn)
    def command(*args: Any, log_format: str, log_level: str, **kwargs: Any) -> Any:
        configure(log_format.lower(), log_level.lower())
        source = click.get_current_context().get_parameter_source("log_level")
        if source is click.core.ParameterSource.DEFAULT:
            for name in quiet_by_default:
                logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        return fn(*args, **kwargs)

    return command  # type: ignore[return-value]  # same signature, less two options


def log_options(default_level: str, quiet_by_default: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Add the two options to a command and set up logging before its body runs, from
    ``default_level`` up unless told otherwise; the loggers ``quiet_by_default`` log
    nothing unless a level is given (``cronwheel dev``'s console shows every attempt)."""

    def decorate(fn: F) -> F:
        with_format = click.option("--log-format", **_FORMAT_OPTION)
        with_level = click.option("--log-level", **_level_option(default_level))
        return with_level(with_format(_configuring(fn, quiet_by_default)))

    return decorate


def leaves(command: click.Command) -> Iterator[click.Command]:
    """Every command under ``command`` that runs something (not a group), itself included."""
    if isinstance(command, click.Group):
        # Through list/get_command, not .commands: the root group loads its commands lazily.
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from leaves(sub)
    else:
        yield command


def add_everywhere(root: click.Command, default_level: str = "warning") -> None:
    """Give the two options to every leaf command under ``root`` that does not declare
    them itself: done as each command is loaded, so that no command is forgotten. The
    short commands (jobs, runs, cron next, …) print their results on stdout; from
    ``warning`` up, their stderr stays empty unless something is wrong."""
    for command in leaves(root):
        if any(param.name == "log_level" for param in command.params):
            continue
        command.params.append(click.Option(["--log-level"], **_level_option(default_level)))
        command.params.append(click.Option(["--log-format"], **_FORMAT_OPTION))
        if command.callback is not None:
            command.callback = _configuring(command.callback, ())


def say(line: str, *, err: bool = False) -> None:
    """One line of what a command shows a person, written with every control character,
    bidi control and line separator escaped (:func:`cronwheel.core.text.escape_controls`):
    what the line carries from the server (a name stored before names were checked, a
    target's error text) can neither forge lines nor drive the terminal."""
    click.echo(escape_controls(line), err=err)


def hint(text: str) -> None:
    """A line for the person at the terminal, on stderr (a pipe keeps the results): as
    it is in text (escaped, see :func:`say`), or with ``--log-format json`` an info
    record of ``cronwheel.cli``, so that every line on stderr parses."""
    if json_lines():
        logging.getLogger("cronwheel.cli").info(text)
    else:
        say(text, err=True)


def fail(message: str, exit_code: int, **fields: Any) -> NoReturn:
    """Stop a command on an error: ``error: MESSAGE`` on stderr, or with ``--log-format
    json`` one JSON line at error carrying ``exit_code`` and ``fields``, like the error
    that stops a long-running command."""
    if json_lines():
        log_exit(message, exit_code, **fields)
    else:
        say(f"error: {redact(message)}", err=True)
    sys.exit(exit_code)


def access_log_option(default: bool) -> Callable[[F], F]:
    """``--access-log/--no-access-log``: uvicorn's line per HTTP request, at info."""
    where = "on in cronwheel api" if default else "off in cronwheel dev, whose console shows runs"
    return click.option(
        "--access-log/--no-access-log",
        default=default,
        show_default=True,
        help=f"A log line per HTTP request, at info ({where}).",
    )
