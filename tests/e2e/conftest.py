"""Each end-to-end test gets a store URL that several processes can share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pg
from tests.conftest import BACKENDS


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'e2e.db'}"
        return
    request.getfixturevalue("pg_dsn")  # fails in CI, skips elsewhere, if PostgreSQL is down
    name, dsn = pg.create_database("cronwheel_e2e")
    try:
        yield dsn
    finally:
        pg.drop_database(name)


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    folder = tmp_path / "marks"
    folder.mkdir()
    return folder
