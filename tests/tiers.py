"""The test tiers, by folder: what a test may touch and what it costs.

- ``unit``: pure code, no I/O beyond reading the repository's files. A guard refuses
  sockets and subprocesses to them (tests/conftest.py).
- ``contract``: the store conformance suite and the backends' own tests, on every
  backend.
- ``service``: the API, the engine's loops and the dashboard over a real store. They test
  HTTP and loops, not SQL, so they run on one store (SQLite) unless a test is about a
  store difference (marked ``both_stores``) or ``CRONWHEEL_TEST_STORE`` says otherwise.
- ``process``: real processes (end to end, the docs' code blocks, the browser, the
  cluster), with the same store rule as ``service``.

``pytest -m "unit or contract"`` is the inner loop; CI runs every tier.
"""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).parent

TIERS = ("unit", "contract", "service", "process")

_FOLDERS = {
    "unit": "unit",
    "schedule": "unit",
    "store": "contract",
    "api": "service",
    "engine": "service",
    "dashboard": "service",
    "e2e": "process",
    "docs": "process",
    "browser": "process",
    "cluster": "process",
}

_FILES = {
    # Parses the docs' Markdown: pure, unlike the rest of tests/docs, which runs it.
    "docs/test_blocks.py": "unit",
}

STORE_PARAMS = ("store", "store_url", "dashboard", "api_store")
"""The fixtures parametrised by backend (tests/conftest.py, e2e, browser)."""

BACKENDS = ("sqlite", "postgres")


def tier_of(path: Path) -> str:
    """The tier of the test file at PATH (a file in no tier's folder is an error)."""
    relative = path.relative_to(TESTS).as_posix()
    if relative in _FILES:
        return _FILES[relative]
    folder = relative.split("/", 1)[0]
    if folder not in _FOLDERS:
        raise LookupError(
            f"{relative} is in no test tier: add its folder to _FOLDERS in tests/tiers.py"
        )
    return _FOLDERS[folder]


def stores_for_one_store_tiers() -> tuple[str, ...]:
    """The backends the service and process tiers run a test on when it is not marked
    ``both_stores``: ``CRONWHEEL_TEST_STORE`` (sqlite, postgres or both), SQLite by
    default."""
    chosen = os.environ.get("CRONWHEEL_TEST_STORE", "sqlite").strip().lower()
    if chosen == "both":
        return BACKENDS
    if chosen not in BACKENDS:
        raise ValueError(f"CRONWHEEL_TEST_STORE={chosen!r}: expected sqlite, postgres or both")
    return (chosen,)
