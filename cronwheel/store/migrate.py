"""Where each backend's migrations live, and how they are named.

Each backend owns its SQL: ``migrations/<backend>/NNNN_name.sql`` are the steps, numbered
in step across backends, and ``schema.sql`` is the fresh-install schema that a test keeps
equal to the result of applying every step in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations(backend: str) -> list[Migration]:
    """The numbered migrations of ``backend`` ("sqlite" or "postgres"), in order."""
    folder = resources.files("cronwheel.store") / "migrations" / backend
    found = []
    for entry in folder.iterdir():
        stem, _, ext = entry.name.partition(".")
        number, _, name = stem.partition("_")
        if ext == "sql" and number.isdigit():
            found.append(Migration(int(number), name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{backend} migrations are not numbered 1..N without gaps")
    return found


def fresh_schema(backend: str) -> str:
    """The schema a fresh install gets in one step."""
    path = resources.files("cronwheel.store") / "migrations" / backend / "schema.sql"
    return path.read_text(encoding="utf-8")
