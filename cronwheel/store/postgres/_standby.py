"""A standby reached where the primary should be: recognised, said once, left.

With ``target_session_attrs=read-write`` (the default, decision 0050) a new connection
never lands on a standby. One may still: a URL that says ``any``, or a connection opened
to a primary that was demoted under it. Its first write fails with SQLSTATE 25006
(read-only transaction); the connection is then closed, so that the pool opens the next
one afresh (to the primary, wherever it is now), and the store reports an outage, which
the caller's loop rides out with its backoff. The warning is logged once per server: a
process left on a standby for an hour says so once, not at every retry.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from cronwheel.store import pgurl

if TYPE_CHECKING:
    import asyncpg

_WHERE_TIMEOUT = 2.0


class StandbyLog:
    """Which standbys a store has met, and the one line said about each."""

    def __init__(self, log: logging.Logger, dsn: str) -> None:
        self._log = log
        try:
            self._hosts = pgurl.parse(dsn).where
        except Exception:  # checked when opened; never fail an error path on it
            self._hosts = "?"
        self.met: set[str] = set()
        self._last = "?"

    async def left(self, conn: Any, exc: asyncpg.PostgresError) -> str:
        """Close ``conn`` (to a standby), logging the first time its server is met;
        return its ``host:port``."""
        where = "?"
        with contextlib.suppress(Exception):  # the server may be going away meanwhile
            row = await conn.fetchrow(
                "SELECT host(inet_server_addr()) AS host, inet_server_port() AS port",
                timeout=_WHERE_TIMEOUT,
            )
            if row is not None and row["host"] is not None:
                where = f"{row['host']}:{row['port']}"
            elif row is not None:
                where = "(a local socket)"
        conn.terminate()
        self._last = where
        if where not in self.met:
            self.met.add(where)
            self._log.warning(
                "%s: left it, and cronwheel reconnects to the writable primary among %s"
                " (said once per server)",
                self.message(exc),
                self._hosts,
            )
        return where

    def message(self, exc: asyncpg.PostgresError) -> str:
        """The outage's reason, for the caller."""
        return (
            f"PostgreSQL at {self._last} is a read-only standby ({exc.sqlstate}), not the"
            " primary: use target_session_attrs=read-write in the store URL (the default)"
            " and list every host of the cluster"
        )
