"""Opening PostgreSQL: why a connection was refused, in words, and creating the database.

A user meets these first (a database not created yet, a server down, a wrong password),
so each becomes one sentence saying what is wrong and what to do, with the URL's
password masked, instead of asyncpg's traceback.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Final
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import asyncpg
from asyncpg.connect_utils import SessionAttribute

from cronwheel.errors import CronwheelError, InvalidInput, StoreUnavailable
from cronwheel.security.redact import mask_url, redact
from cronwheel.store import pgurl

# The database every PostgreSQL server has, where CREATE DATABASE is run from.
MAINTENANCE_DB: Final = "postgres"
CONNECT_TIMEOUT: Final = 10.0


class CreateDatabaseRefused(CronwheelError):
    """The server would not let this user create the database."""


def where(dsn: str) -> str:
    """``host:port`` of ``dsn`` (``h1:5432,h2:5432`` for several hosts), for messages."""
    try:
        return pgurl.parse(dsn).where
    except InvalidInput:
        return "?"


def database_name(dsn: str) -> str | None:
    """The database ``dsn`` names (its path), or None if it names none."""
    name = unquote(urlsplit(dsn).path.lstrip("/"))
    return name or None


def _user(dsn: str) -> str:
    try:
        return unquote(urlsplit(dsn).username or "") or "(default)"
    except ValueError:
        return "?"


def connect_error(exc: BaseException, dsn: str) -> CronwheelError:
    """The error to raise for ``exc``, met while connecting to ``dsn``."""
    at = where(dsn)
    if isinstance(exc, asyncpg.InvalidCatalogNameError):
        name = database_name(dsn) or "?"
        return StoreUnavailable(
            f'database "{name}" does not exist on {at}: create it with'
            f" `cronwheel migrate --create-database --db {mask_url(dsn)}`"
        )
    if isinstance(exc, asyncpg.InvalidPasswordError):
        return StoreUnavailable(
            f'PostgreSQL at {at} refused the password of user "{_user(dsn)}":'
            " check the user and password in the store URL (--db or CRONWHEEL_DB)"
        )
    if isinstance(exc, asyncpg.InvalidAuthorizationSpecificationError):
        return StoreUnavailable(
            f'PostgreSQL at {at} refused user "{_user(dsn)}" ({redact(str(exc))}):'
            " check the user in the store URL (--db or CRONWHEEL_DB) and the server's pg_hba.conf"
        )
    if isinstance(exc, asyncpg.TargetServerAttributeNotMatched):
        return StoreUnavailable(
            f"no PostgreSQL server among {at} is {_wanted(dsn)} now (every one that answered"
            " is not): a failover under way, or a host list without the primary"
            " (check --db or CRONWHEEL_DB)"
        )
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return StoreUnavailable(
            f"PostgreSQL at {at} did not answer within {CONNECT_TIMEOUT:g} s:"
            " check the host and port in the store URL and the network"
        )
    if isinstance(exc, socket.gaierror):
        return StoreUnavailable(
            f"cannot find the PostgreSQL host of {at} ({exc.strerror}):"
            " check the host in the store URL (--db or CRONWHEEL_DB)"
        )
    if isinstance(exc, OSError):
        reason = os.strerror(exc.errno) if exc.errno else str(exc) or exc.__class__.__name__
        return StoreUnavailable(
            f"cannot reach PostgreSQL at {at} ({redact(reason)}): is the server running,"
            " and are the host and port in the store URL (--db or CRONWHEEL_DB) right?"
        )
    if isinstance(exc, ValueError | asyncpg.ClientConfigurationError):
        return InvalidInput(
            "url", f"{mask_url(dsn)} is not a usable PostgreSQL URL: {redact(str(exc))}"
        )
    return StoreUnavailable(f"PostgreSQL at {at} refused the connection: {redact(str(exc))}")


def session_attribute(attrs: str) -> SessionAttribute:
    """asyncpg's spelling of a ``target_session_attrs`` value (checked by :mod:`pgurl`)."""
    return SessionAttribute(attrs)


def _wanted(dsn: str) -> str:
    try:
        attrs = pgurl.parse(dsn).target_session_attrs
    except InvalidInput:
        attrs = None
    if attrs in ("standby", "prefer-standby", "read-only"):
        return "a standby"
    return "the writable primary"


# What connecting may raise that is the user's setup, not a bug.
CONNECT_ERRORS: Final = (
    asyncpg.TargetServerAttributeNotMatched,
    OSError,
    TimeoutError,
    ValueError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.ClientConfigurationError,
)


def _with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + quote(name, safe="")))


async def create_database(dsn: str) -> bool:
    """Create the database ``dsn`` names if it does not exist; True if it was created.

    Connects to the server's ``postgres`` database as the URL's user; safe to run again
    and from several hosts at once. A user without the right to create databases gets
    :class:`CreateDatabaseRefused`.
    """
    name = database_name(dsn)
    if name is None:
        raise InvalidInput("url", f"{mask_url(dsn)} names no database: end it with /DBNAME")
    admin = _with_database(dsn, MAINTENANCE_DB)
    try:
        attrs = pgurl.primary_attrs(dsn)  # CREATE DATABASE on the primary, not a standby
        conn = await asyncpg.connect(
            admin,
            timeout=CONNECT_TIMEOUT,
            target_session_attrs=session_attribute(attrs),
        )
    except CONNECT_ERRORS as exc:
        raise connect_error(exc, admin) from None
    try:
        if await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            return False
        quoted = '"' + name.replace('"', '""') + '"'
        try:
            await conn.execute(f"CREATE DATABASE {quoted}")
        except asyncpg.DuplicateDatabaseError:
            return False  # another host created it meanwhile
        except asyncpg.InsufficientPrivilegeError:
            raise CreateDatabaseRefused(
                f'user "{_user(dsn)}" may not create databases on {where(dsn)}: ask an'
                f' administrator to run CREATE DATABASE "{name}" OWNER "{_user(dsn)}"'
                " (or to grant CREATEDB), then run `cronwheel migrate` again"
            ) from None
        return True
    finally:
        await conn.close()
