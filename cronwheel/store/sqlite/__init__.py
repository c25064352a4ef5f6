"""The embedded SQLite store."""

from cronwheel.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
