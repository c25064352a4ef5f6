"""The tenants and keys pages in-process, on both stores: who may see which tenant, and
the usage they show. (tests/browser/test_admin.py clicks through them in a browser.)"""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.store.base import Store
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, new_tenant, spec


@pytest.fixture
def app(store: Store) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))


async def _page(app: FastAPI, token: str, path: str) -> httpx.Response:
    """``path`` as the dashboard's session of ``token`` sees it."""
    async with connect(app, cookies={SESSION_COOKIE: token}) as browser:
        return await browser.get(path)


def _tenant_links(html: str) -> list[str]:
    return re.findall(r'href="/ui/admin/tenants/([^"]+)"', html)


async def test_a_system_admin_sees_every_tenant_with_its_usage(app: FastAPI) -> None:
    async with connect(app, ADMIN_TOKEN) as api:
        await new_tenant(api, "t2", max_jobs=7)
        key = await new_key(api, "write", "t2")
        await new_key(api, "read", "t2")
        for _ in range(2):
            created = await api.post("/v1/jobs", json=spec(), headers={"Cronwheel-Tenant": "t2"})
            assert created.status_code == 201, created.text
        assert (await api.delete(f"/v1/keys/{key['id']}")).status_code == 204

    listing = await _page(app, ADMIN_TOKEN, "/ui/admin")
    assert listing.status_code == 200
    assert _tenant_links(listing.text) == ["default", "t2"]
    assert 'id="tenant-create"' in listing.text

    one = await _page(app, ADMIN_TOKEN, "/ui/admin/tenants/t2")
    assert one.status_code == 200
    assert "2 of at most 7" in one.text  # live jobs of the quota
    assert "1 in use, 1 revoked" in one.text
    assert 'id="tenant-edit"' in one.text
    assert key["token"] not in one.text  # the store has its hash only, but still
    assert one.headers["cache-control"] == "no-store"


async def test_a_tenant_admin_sees_only_their_own_tenant(app: FastAPI) -> None:
    async with connect(app, ADMIN_TOKEN) as api:
        await new_tenant(api, "t2")
        token = (await new_key(api, "admin", "t2"))["token"]

    listing = await _page(app, token, "/ui/admin")
    assert listing.status_code == 200
    assert _tenant_links(listing.text) == ["t2"]
    assert 'id="tenant-create"' not in listing.text
    own = await _page(app, token, "/ui/admin/tenants/t2")
    assert own.status_code == 200
    assert 'id="tenant-edit"' not in own.text  # quotas are a system admin's
    assert 'id="key-create"' in own.text
    for other in ("default", "nobody", "-bad-", "t2%2F..", "x" * 100):
        response = await _page(app, token, f"/ui/admin/tenants/{other}")
        assert response.status_code == 404, other
        assert "Not found" in response.text


@pytest.mark.parametrize("role", ["read", "write", "worker"])
async def test_other_roles_get_the_not_allowed_page(app: FastAPI, role: str) -> None:
    async with connect(app, ADMIN_TOKEN) as api:
        token = (await new_key(api, role))["token"]
    for path in ("/ui/admin", "/ui/admin/tenants/default"):
        response = await _page(app, token, path)
        assert response.status_code == 403, path
        assert f"this is a {role} key" in response.text
        assert "Tenants &amp; keys" not in response.text  # nor in the navigation


async def test_without_a_session_the_pages_ask_to_sign_in(app: FastAPI) -> None:
    async with connect(app) as browser:
        response = await browser.get("/ui/admin/tenants/default")
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/signin?next=/ui/admin/tenants/default"
