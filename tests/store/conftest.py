"""Fixtures of the PostgreSQL-only store tests (history, vacuum)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import open_store


@pytest.fixture
async def pg_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A migrated, empty PostgreSQL store."""
    s = await open_store("postgres", request, tmp_path)
    try:
        yield s
    finally:
        await s.close()
