"""Options and error handling shared by the commands.

Exit codes (docs/api.md's): 0 ok, 1 other error (a port in use included), 2 bad input,
5 not allowed, 6 store unavailable (a database that does not exist, a server down, a
user or password refused, an SQLite folder that does not exist).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Coroutine
from typing import IO, Any, TypeVar

import click

from cronwheel.engine import eventloop
from cronwheel.errors import CronwheelError, InvalidInput, StoreUnavailable
from cronwheel.observability.logs import json_lines, log_exit
from cronwheel.security.redact import redact, register_secret, register_url
from cronwheel.store import ACCEPTED_FORMS, DEFAULT_URL, store_url

T = TypeVar("T")

EXIT_OTHER = 1
EXIT_NOT_ALLOWED = 5
EXIT_UNAVAILABLE = 6


def _db_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The store URL, normalised (a bare path is an SQLite file); its password is never
    shown by this process."""
    register_url(value)
    try:
        return store_url(value)
    except InvalidInput as exc:
        raise click.BadParameter(exc.reason, ctx=ctx, param=param) from None


db_option = click.option(
    "--db",
    "db_url",
    envvar="CRONWHEEL_DB",
    default=DEFAULT_URL,
    show_default=True,
    callback=_db_url,
    help=f"Store URL (env CRONWHEEL_DB): {ACCEPTED_FORMS}.",
)


def secret(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback for options holding a secret (tokens): never shown again."""
    register_secret(value)
    return value


class Failure(click.ClickException):
    """A one-line error with its exit code; the message is redacted."""

    def __init__(self, message: str, exit_code: int = EXIT_OTHER) -> None:
        super().__init__(redact(message))
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it a ClassVar

    def show(self, file: IO[Any] | None = None) -> None:
        if file is None and json_lines():  # a collector parsing JSON sees why it stopped
            log_exit(self.message, self.exit_code)
            return
        super().show(file)


def run_async(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine for a command; cronwheel's own errors become a message and the
    documented exit code, never a traceback."""
    from cronwheel.store.postgres._connect import CreateDatabaseRefused
    from cronwheel.web.sockets import CannotListen

    try:
        return eventloop.run(main())
    except InvalidInput as exc:
        if exc.field == "url":
            raise click.BadParameter(redact(exc.reason), param_hint="'--db'") from None
        raise click.UsageError(redact(str(exc))) from None
    except StoreUnavailable as exc:
        raise Failure(str(exc), EXIT_UNAVAILABLE) from None
    except CreateDatabaseRefused as exc:
        raise Failure(str(exc), EXIT_NOT_ALLOWED) from None
    except CannotListen as exc:
        raise Failure(str(exc), EXIT_OTHER) from None
    except (CronwheelError, OSError) as exc:
        raise Failure(str(exc), EXIT_OTHER) from None


def start_tracing() -> None:
    """Trace as the ``OTEL_*`` variables ask (docs/observability.md#traces): nothing set,
    nothing traced. A setting that cannot be honoured is bad input (exit 2)."""
    from cronwheel.observability import tracing

    try:
        tracing.setup_from_env()
    except InvalidInput as exc:
        raise click.UsageError(redact(str(exc))) from None


def _secrets_key(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The secrets keys, comma-separated, each checked (a Fernet key: URL-safe base64 of
    32 bytes) without importing the cryptography package (a worker starts sooner);
    never shown by this process."""
    if not value or not value.strip():
        return None
    keys = [k.strip() for k in value.split(",") if k.strip()]
    for i, key in enumerate(keys):
        register_secret(key)
        try:
            good = len(base64.urlsafe_b64decode(key.encode())) == 32 and len(key) == 44
        except ValueError:
            good = False
        if not good:
            raise click.BadParameter(
                f"key {i + 1} is not a Fernet key (44 characters of URL-safe base64;"
                " `cronwheel secrets new-key` prints one)",
                ctx=ctx,
                param=param,
            )
    return ",".join(keys)


secrets_key_option = click.option(
    "--secrets-key",
    "secrets_key",
    envvar="CRONWHEEL_SECRETS_KEY",
    default=None,
    callback=_secrets_key,
    metavar="KEY[,OLDER,...]",
    help=(
        "Encrypts secret webhook headers at rest (env CRONWHEEL_SECRETS_KEY): the first"
        " key encrypts, every one decrypts. Give the API and every worker the same."
        " docs/security.md#secrets-at-rest."
    ),
)


def _webhook_allow(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    """The allow-list entries, each checked (a CIDR, an address or a host name)."""
    from cronwheel.security.egress import EgressPolicy

    try:
        EgressPolicy.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


def _allow_command(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    """The allow-command patterns, each checked."""
    from cronwheel.security.commands import pattern_problem

    for pattern in value:
        why = pattern_problem(pattern)
        if why is not None:
            raise click.BadParameter(f"{pattern!r}: {why}", ctx=ctx, param=param)
    return value


allow_command_option = click.option(
    "--allow-command",
    "allow_commands",
    multiple=True,
    callback=_allow_command,
    metavar="PATTERN",
    help=(
        "Let command jobs run this executable (repeatable; none: this worker runs no"
        " command). A name or glob without '/' (pg_dump, backup-*) matches argv[0] given"
        " as a name, found on the worker's PATH; one with '/' (/opt/jobs/*) argv[0]"
        " given as an absolute path; '*' anything. Tenants run what you allow (a shell"
        " or an interpreter runs anything): docs/actions.md#command-actions."
    ),
)
command_grace_option = click.option(
    "--command-grace",
    "command_grace_seconds",
    type=click.FloatRange(0, 3600),
    default=10.0,
    show_default=True,
    help="How long a command being stopped (timeout, cancel) has between SIGTERM and SIGKILL.",
)


def commands_line(patterns: tuple[str, ...]) -> str:
    """What a worker says at start of the commands it may run."""
    if not patterns:
        return "command jobs: none allowed (--allow-command PATTERN allows some)"
    return f"command jobs may run: {', '.join(patterns)}"


webhook_allow_option = click.option(
    "--webhook-allow",
    "webhook_allow",
    multiple=True,
    callback=_webhook_allow,
    metavar="CIDR|HOST",
    help=(
        "Let webhooks reach this internal network or host (repeatable; env"
        " CRONWHEEL_WEBHOOK_ALLOW, comma-separated, adds to it). By default webhooks"
        " reach only public addresses: docs/security.md."
    ),
)
