"""The store: the source of truth. ``open_store(url)`` picks the backend from the URL.

Store URLs: ``postgresql://user:password@host:port/dbname`` (or ``postgres://``), and
SQLite files as SQLAlchemy writes them, ``sqlite:///relative/path.db`` (three slashes:
relative to the working directory) and ``sqlite:////absolute/path.db`` (four). A bare
path (``dev.db``, ``./data/dev.db``, ``/var/lib/cronwheel.db``) is an SQLite file too.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from cronwheel.errors import InvalidInput, StoreUnavailable
from cronwheel.security.redact import mask_url
from cronwheel.store.base import Store

DEFAULT_URL = "sqlite:///cronwheel.db"
ACCEPTED_FORMS = (
    "postgresql://user@host:5432/dbname, sqlite:///relative/path.db,"
    " sqlite:////absolute/path.db, or a file path such as dev.db"
)


def store_url(value: str) -> str:
    """``value`` as a store URL: a bare file path becomes its ``sqlite:///`` URL; a URL
    of an unknown kind is refused, naming the forms accepted."""
    value = value.strip()
    if not value:
        raise InvalidInput("url", f"is empty: use {ACCEPTED_FORMS}")
    if value == ":memory:":
        return "sqlite:///:memory:"
    if "://" not in value:
        if ":" in value.split("/", 1)[0] and not value.startswith("."):
            # "postgresql:/host/db", "sqlite:file.db": a URL mistyped, not a file name.
            raise InvalidInput(
                "url", f"{mask_url(value)!r} is not a store URL: use {ACCEPTED_FORMS}"
            )
        return f"sqlite:///{value}"
    scheme = urlsplit(value).scheme
    if scheme == "sqlite":
        sqlite_path(value)
        return value
    if scheme in ("postgresql", "postgres"):
        from cronwheel.store import pgurl

        pgurl.primary_attrs(value)  # a host, port or session attribute that cannot work
        return value
    raise InvalidInput(
        "url", f"unknown store {scheme!r} in {mask_url(value)!r}: use {ACCEPTED_FORMS}"
    )


def sqlite_path(url: str) -> Path:
    """``sqlite:///relative.db`` and ``sqlite:////absolute/path.db``, as SQLAlchemy reads them."""
    path = url.removeprefix("sqlite://")
    if not path.startswith("/") or path == "/":
        raise InvalidInput(
            "url",
            f"{url!r} names no file: write sqlite:///relative/path.db"
            " or sqlite:////absolute/path.db",
        )
    return Path(path[1:])


def _sqlite_file(url: str) -> Path:
    """The file of an SQLite URL, refused (as unavailable) if its folder does not exist:
    SQLite would only say "unable to open database file"."""
    path = sqlite_path(url)
    folder = path.parent
    if not folder.is_dir():
        shown = folder if str(folder) else Path(".")
        raise StoreUnavailable(
            f"cannot open the SQLite file {path}: the folder {shown} does not exist"
            f" (create it with `mkdir -p {shown}`, or choose another path)"
        )
    return path


async def open_store(url: str = DEFAULT_URL) -> Store:
    """Open the store at ``url``: ``sqlite:///file.db`` or ``postgresql://user@host/db``.

    A bare path is an SQLite file (see the module's docstring). The store is not
    migrated; call :meth:`Store.migrate` (or ``cronwheel migrate``). Raises
    :class:`InvalidInput` (field ``url``) for a malformed URL and
    :class:`StoreUnavailable`, with a sentence saying what to do, when it cannot be opened.
    """
    url = store_url(url)
    if urlsplit(url).scheme == "sqlite":
        from cronwheel.store.sqlite import SqliteStore

        return await SqliteStore.open(_sqlite_file(url))
    from cronwheel.store.postgres import PostgresStore

    return await PostgresStore.connect(url)


__all__ = ["ACCEPTED_FORMS", "DEFAULT_URL", "Store", "open_store", "sqlite_path", "store_url"]
