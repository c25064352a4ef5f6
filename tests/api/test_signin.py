"""Signing in to the dashboard: only from this site's own sign-in form (issue 29, item 10).

A page on another site that posts the attacker's key to ``/ui/signin`` would otherwise
sign the visitor's browser in as the attacker (login CSRF): what they then create or
type lands in the attacker's tenant."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN

FORM = {"token": ADMIN_TOKEN, "next": "/ui/jobs"}


async def sign_in(app: FastAPI, headers: dict[str, str]) -> httpx.Response:
    async with connect(app) as browser:
        return await browser.post("/ui/signin", data=FORM, headers=headers)


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "same-origin", "Origin": "http://test"},
        {"Sec-Fetch-Site": "none"},
        {"Origin": "http://test"},  # a browser without Fetch Metadata, from our page
        {},  # not a browser: curl, a script
    ],
)
async def test_signing_in_from_our_own_page_sets_the_session(
    app: FastAPI, headers: dict[str, str]
) -> None:
    answer = await sign_in(app, headers)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/ui/jobs"
    assert SESSION_COOKIE in answer.cookies


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://other.test"},
        {"Origin": "https://evil.example"},  # no Fetch Metadata: Origin decides
        {"Origin": "null"},  # a sandboxed frame, a data: page
        {"Origin": "http://test.evil.example"},
    ],
)
async def test_a_sign_in_from_another_sites_page_is_403_and_sets_nothing(
    app: FastAPI, headers: dict[str, str]
) -> None:
    answer = await sign_in(app, headers)
    assert answer.status_code == 403, answer.text
    assert "set-cookie" not in answer.headers
    assert "another site" in answer.text
