"""The store: the source of truth. ``open_store(url)`` picks the backend from the URL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from cronwheel.errors import InvalidInput
from cronwheel.store.base import Store

DEFAULT_URL = "sqlite:///cronwheel.db"


def sqlite_path(url: str) -> Path:
    """``sqlite:///relative.db`` and ``sqlite:////absolute/path.db``, as SQLAlchemy reads them."""
    path = url.removeprefix("sqlite://")
    if not path.startswith("/") or path == "/":
        raise InvalidInput("url", f"{url!r} names no file: write sqlite:///path/to/file.db")
    return Path(path[1:])


async def open_store(url: str = DEFAULT_URL) -> Store:
    """Open the store at ``url``: ``sqlite:///file.db`` or ``postgresql://user@host/db``.

    The store is not migrated; call :meth:`Store.migrate` (or ``cronwheel migrate``).
    """
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        from cronwheel.store.sqlite import SqliteStore

        return await SqliteStore.open(sqlite_path(url))
    if scheme in ("postgresql", "postgres"):
        from cronwheel.store.postgres import PostgresStore

        return await PostgresStore.connect(url)
    raise InvalidInput(
        "url", f"unknown store {scheme!r}: use sqlite:///file.db or postgresql://host/db"
    )


__all__ = ["DEFAULT_URL", "Store", "open_store", "sqlite_path"]
