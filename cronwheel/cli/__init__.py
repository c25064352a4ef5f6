"""The ``cronwheel`` command line: one click group, one module per command family.

A command's module is imported only when that command runs: ``cronwheel worker`` must
not pay for the web framework that ``cronwheel api`` needs, nor ``cronwheel jobs`` for
the engine (a worker claims its first runs sooner; a script calling the CLI in a loop
waits less)."""

from __future__ import annotations

import difflib
import importlib

import click

from cronwheel.cli._logs import add_everywhere

# name -> "module:attribute"; the module is imported when the command is looked up.
COMMANDS = {
    "migrate": "cronwheel.cli.store:migrate",
    "cron": "cronwheel.cli.cron:cron",
    "dev": "cronwheel.cli.dev:dev",
    "worker": "cronwheel.cli.services:worker",
    "scheduler": "cronwheel.cli.scheduler:scheduler",
    "jobs": "cronwheel.cli.remote.jobs:jobs",
    "pipelines": "cronwheel.cli.remote.pipelines:pipelines",
    "runs": "cronwheel.cli.remote.runs:runs",
    "dlq": "cronwheel.cli.remote.runs:dlq",
    "notifications": "cronwheel.cli.remote.runs:notifications",
    "tenants": "cronwheel.cli.remote.admin:tenants",
    "keys": "cronwheel.cli.remote.admin:keys",
    "pools": "cronwheel.cli.remote.pools:pools",
    "status": "cronwheel.cli.remote.status:status",
    "api": "cronwheel.cli.api:api",
    "webhook-key": "cronwheel.cli.webhook_key:webhook_key",
    "secrets": "cronwheel.cli.secrets:secrets",
    "audit": "cronwheel.cli.remote.audit:audit",
    "import": "cronwheel.cli.remote.imports:import_",
}


class _LazyGroup(click.Group):
    """A group whose commands are imported on first use (click's documented pattern for
    lazily loaded subcommands). Each command gets the log options as it is loaded, so
    none can be left without them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, _, attribute = COMMANDS[cmd_name].partition(":")
            command: click.Command = getattr(importlib.import_module(module), attribute)
            add_everywhere(command)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, but an unknown command is compared with every command, not only
        those loaded so far: ``cronwheel job list`` asks "Did you mean 'jobs'?"."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            name = args[0] if args else ""
            if name.startswith("-") or name in COMMANDS:
                raise
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=3)
            if not close:
                raise
            guesses = " or ".join(repr(c) for c in close)
            raise click.UsageError(
                f"No such command {name!r}. Did you mean {guesses}?", ctx
            ) from exc


@click.group(cls=_LazyGroup)
@click.version_option(package_name="cronwheel")
def main() -> None:
    """cronwheel: cron, but durable, on time, and spread over machines."""
