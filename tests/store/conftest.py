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


@pytest.fixture
async def full_claim_store(pg_store: Any) -> Any:
    """A PostgreSQL store that claims with the full statement only, never the lean one:
    the contracts of claims run through both (decision 0047)."""
    pg_store._lean_claims = False
    return pg_store
