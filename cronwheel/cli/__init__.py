"""The ``cronwheel`` command line: one click group, one module per command family."""

from __future__ import annotations

import click


@click.group()
@click.version_option(package_name="cronwheel")
def main() -> None:
    """cronwheel: cron, but durable, on time, and spread over machines."""


from cronwheel.cli.store import migrate  # noqa: E402

main.add_command(migrate)

from cronwheel.cli.cron import cron  # noqa: E402

main.add_command(cron)

from cronwheel.cli.services import dev, scheduler, worker  # noqa: E402

main.add_command(dev)
main.add_command(worker)
main.add_command(scheduler)

from cronwheel.cli.remote import COMMANDS  # noqa: E402

for _command in COMMANDS:
    main.add_command(_command)

from cronwheel.cli.api import api  # noqa: E402

main.add_command(api)

from cronwheel.cli._logs import add_everywhere  # noqa: E402

# Last, once every command is registered: none can be left without the log options.
add_everywhere(main)
