"""The API over a real store of each backend, reached through httpx's ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.security.sealing import Sealer
from cronwheel.store.base import Store
from tests.api.helpers import ADMIN_TOKEN, SECRETS_KEY


@pytest.fixture
def app(store: Store) -> FastAPI:
    """The API with a secrets key, as an operator runs it (docs/security.md)."""
    sealer = Sealer([SECRETS_KEY])
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN), sealer=sealer)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client authenticated as a system admin (the bootstrap token)."""
    async with connect(app, ADMIN_TOKEN) as c:
        yield c


def connect(app: FastAPI, token: str | None = None, **kwargs: Any) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers=headers, **kwargs
    )
