"""``cronwheel api``: the HTTP API in one process (run several behind a load balancer)."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal

import click
import uvicorn

from cronwheel.api import AuthConfig, create_app
from cronwheel.cli._common import (
    db_option,
    run_async,
    secret,
    secrets_key_option,
    start_tracing,
    webhook_allow_option,
)
from cronwheel.cli._logs import access_log_option, log_options
from cronwheel.cli._metrics import tenant_labels_option
from cronwheel.errors import InvalidInput
from cronwheel.observability.logs import hide_query_values
from cronwheel.security.egress import EgressPolicy
from cronwheel.security.redact import mask_url
from cronwheel.store import open_store
from cronwheel.web.quotas import TenantDefaults
from cronwheel.web.sockets import listen_socket

log = logging.getLogger("cronwheel.cli")


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@log_options("info")
@db_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--admin-token",
    envvar="CRONWHEEL_ADMIN_TOKEN",
    default=None,
    callback=secret,
    help="Accept this token as a system admin (env CRONWHEEL_ADMIN_TOKEN): the bootstrap.",
)
@click.option(
    "--no-auth", is_flag=True, help="Every request is a system admin (loopback hosts only)."
)
@access_log_option(True)
@tenant_labels_option
@webhook_allow_option
@click.option(
    "--tenant-max-jobs",
    envvar="CRONWHEEL_TENANT_MAX_JOBS",
    type=click.IntRange(0, 2**31 - 1),
    default=None,
    help="max_jobs of a tenant created without one (env CRONWHEEL_TENANT_MAX_JOBS);"
    " default: no limit.",
)
@click.option(
    "--tenant-max-creates-per-second",
    envvar="CRONWHEEL_TENANT_MAX_CREATES_PER_SECOND",
    type=click.FloatRange(0, 1_000_000, min_open=True),
    default=None,
    help="max_creates_per_second of a tenant created without one (env"
    " CRONWHEEL_TENANT_MAX_CREATES_PER_SECOND); default: no limit.",
)
@secrets_key_option
@click.option(
    "--read-replica",
    "read_replica",
    envvar="CRONWHEEL_READ_REPLICA_URL",
    default=None,
    metavar="URL",
    help="A PostgreSQL streaming standby of --db: lists and history (GET requests) read"
    " from it while it is within --max-replica-lag (env CRONWHEEL_READ_REPLICA_URL).",
)
@click.option(
    "--max-replica-lag",
    envvar="CRONWHEEL_MAX_REPLICA_LAG",
    type=click.FloatRange(0, 3600),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How far behind the primary the read replica may be and still serve reads;"
    " further behind, or down, the primary serves them.",
)
def api(
    db_url: str,
    host: str,
    port: int,
    admin_token: str | None,
    no_auth: bool,
    access_log: bool,
    metrics_tenant_labels: bool,
    webhook_allow: tuple[str, ...],
    tenant_max_jobs: int | None,
    tenant_max_creates_per_second: float | None,
    secrets_key: str | None,
    read_replica: str | None,
    max_replica_lag: float,
) -> None:
    """Serve the HTTP API (docs/api.md) until SIGTERM or SIGINT."""
    defaults = TenantDefaults(tenant_max_jobs, tenant_max_creates_per_second)
    egress = EgressPolicy.from_env(*webhook_allow)
    if no_auth and not is_loopback(host):
        raise click.UsageError(
            f"--no-auth is refused on {host}: anyone who reaches it would be a system admin;"
            " listen on 127.0.0.1 or use --admin-token"
        )
    if admin_token is not None and len(admin_token) < 16:
        raise click.BadParameter("must be at least 16 characters", param_hint="--admin-token")
    auth = AuthConfig(admin_token=admin_token, disabled=no_auth)
    if read_replica is not None:
        _check_replica(db_url, read_replica)
    start_tracing()

    async def main() -> None:
        sock = listen_socket(host, port)  # a port in use is said before the store opens
        try:
            store = await open_store(db_url)
        except BaseException:
            sock.close()
            raise
        try:
            await store.migrate()
            from cronwheel.cli.services import secrets_key_of
            from cronwheel.security.sealing import Sealer

            keys = secrets_key_of(db_url, secrets_key)
            sealer = None if keys is None else Sealer.from_text(keys)
            if read_replica:
                # Imported here: an API without a replica never loads it.
                from cronwheel.store.replica import ReplicaReads

                store = await ReplicaReads.open(store, read_replica, max_lag=max_replica_lag)
                log.info(
                    "cronwheel api: lists and history from %s while within %g s of the primary",
                    mask_url(read_replica),
                    max_replica_lag,
                )
            # log_config=None: uvicorn logs through the process's handler
            # (cronwheel.observability.logs)
            config = uvicorn.Config(
                create_app(
                    store,
                    auth=auth,
                    metrics_tenant_labels=metrics_tenant_labels,
                    egress=egress,
                    tenant_defaults=defaults,
                    sealer=sealer,
                ),
                host=host,
                port=port,
                log_config=None,
                access_log=access_log,
            )
            hide_query_values()  # no query string's token in an access line
            server = uvicorn.Server(config)
            _stop_on_signals(server)
            bound_host, bound_port = sock.getsockname()[:2]
            where = f"http://{bound_host}:{bound_port}"
            log.info(
                "cronwheel api on %s (store %s); dashboard at %s/ui/",
                where,
                mask_url(db_url),
                where,
            )
            if sealer is None:
                log.warning(
                    "cronwheel api: no secrets key (CRONWHEEL_SECRETS_KEY): webhook jobs with"
                    " secret headers (Authorization, X-Api-Key…) are refused"
                )
            if no_auth:
                log.warning("cronwheel api: NO AUTHENTICATION on %s:%s", host, port)
            elif admin_token is None:
                log.warning(
                    "cronwheel api: no admin token (--admin-token or CRONWHEEL_ADMIN_TOKEN):"
                    " nobody can sign in to the API or the dashboard except with an API key"
                    " created before; give one to bootstrap (docs/api.md)"
                )
            await server.serve(sockets=[sock])
        finally:
            await store.close()

    run_async(main)


def _check_replica(db_url: str, replica_url: str) -> None:
    """Refuse a --read-replica that cannot work before anything is opened."""
    if not replica_url.startswith(("postgresql://", "postgres://")):
        raise click.BadParameter(
            f"{mask_url(replica_url)!r} is not a PostgreSQL URL:"
            " use postgresql://user@host:5432/dbname (a streaming standby of --db)",
            param_hint="'--read-replica'",
        )
    if not db_url.startswith(("postgresql://", "postgres://")):
        raise click.UsageError(
            "--read-replica needs a PostgreSQL store (--db postgresql://…): an SQLite file"
            " has no replicas"
        )
    from cronwheel.store import pgurl

    try:
        pgurl.replica_attrs(replica_url)  # hosts, ports and session attributes
    except InvalidInput as exc:
        raise click.BadParameter(exc.reason, param_hint="'--read-replica'") from None


def _stop_on_signals(server: uvicorn.Server) -> None:
    """A graceful stop on SIGTERM/SIGINT, ending in exit status 0. uvicorn installs its
    own handlers while serving and raises the signal again once stopped, to hand it to
    the handlers it found; these are those, and they only ask the server to exit."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
