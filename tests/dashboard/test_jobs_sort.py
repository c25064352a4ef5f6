"""The jobs list's sort links in-process, on both stores: the Name and Next fire headers
sort the list (aria-sort on the sorted one, the filters kept, the cursor reset), and the
order stays while paging. (tests/browser/test_jobs.py clicks them in a browser.)"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.store.base import Store
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, spec


@pytest.fixture
def app(store: Store) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))


@pytest.fixture
async def browser(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with connect(app, ADMIN_TOKEN) as api:
        for name, at in (
            ("srt-b", "2031-01-02T00:00:00Z"),
            ("srt-c", "2031-01-01T00:00:00Z"),
            ("srt-a", "2031-01-03T00:00:00Z"),
        ):
            made = await api.post("/v1/jobs", json=spec(name, schedule={"kind": "once", "at": at}))
            assert made.status_code == 201, made.text
        await api.post("/v1/jobs", json=spec("other"))
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as c:
        yield c


def _names(page: str) -> list[str]:
    return re.findall(r'<th scope="row"><a href="/ui/jobs/[^"]+">([^<]+)</a>', page)


def _header(page: str, label: str) -> tuple[str, dict[str, list[str]], str | None]:
    """The sort header ``label``: its th's attributes, its link's query, its aria-sort."""
    [(attrs, href)] = re.findall(
        rf'<th scope="col"([^>]*)><a class="sort" href="([^"]+)">{label}<', page
    )
    sort = re.search(r'aria-sort="([^"]+)"', attrs)
    url = urlsplit(html.unescape(href))
    assert url.path == "/ui/jobs"
    return attrs, parse_qs(url.query), sort.group(1) if sort else None


async def test_headers_sort_keep_the_filters_and_reset_the_cursor(
    browser: httpx.AsyncClient,
) -> None:
    first = await browser.get("/ui/jobs", params={"q": "srt-", "kind": "once", "limit": "2"})
    assert first.status_code == 200, first.text
    assert _names(first.text) == ["srt-b", "srt-c"]  # creation order
    [cursor] = re.findall(r'href="([^"]+)" rel="next"', first.text)
    later = (await browser.get(html.unescape(cursor))).text
    _, query, sort = _header(later, "Name")
    assert sort is None
    assert query == {"q": ["srt-"], "kind": ["once"], "limit": ["2"], "order": ["name"]}
    _, fire_query, _ = _header(later, "Next fire")
    assert fire_query["order"] == ["next_fire"] and "cursor" not in fire_query

    by_name = await browser.get("/ui/jobs", params={"q": "srt-", "order": "name"})
    assert _names(by_name.text) == ["srt-a", "srt-b", "srt-c"]
    _, query, sort = _header(by_name.text, "Name")
    assert sort == "ascending" and query["order"] == ["-name"]  # a second click reverses
    assert _header(by_name.text, "Next fire")[2] is None
    assert "Name, A to Z" in by_name.text  # the caption says the order

    reversed_ = await browser.get("/ui/jobs", params={"q": "srt-", "order": "-name"})
    assert _names(reversed_.text) == ["srt-c", "srt-b", "srt-a"]
    _, query, sort = _header(reversed_.text, "Name")
    assert sort == "descending" and query["order"] == ["name"]

    soonest = await browser.get("/ui/jobs", params={"q": "srt-", "order": "next_fire"})
    assert _names(soonest.text) == ["srt-c", "srt-b", "srt-a"]
    assert _header(soonest.text, "Next fire")[2] == "ascending"


async def test_the_order_stays_while_paging(browser: httpx.AsyncClient) -> None:
    seen: list[str] = []
    url = "/ui/jobs?order=-next_fire&limit=1&q=srt-"
    for _ in range(10):
        page = await browser.get(url)
        assert page.status_code == 200, page.text
        seen += _names(page.text)
        assert _header(page.text, "Next fire")[2] == "descending"
        nexts = re.findall(r'href="([^"]+)" rel="next"', page.text)
        if not nexts:
            break
        url = html.unescape(nexts[0])
        assert parse_qs(urlsplit(url).query)["order"] == ["-next_fire"]
    assert seen == ["srt-a", "srt-b", "srt-c"]


async def test_a_cursor_of_another_order_is_a_page_naming_it(browser: httpx.AsyncClient) -> None:
    page = await browser.get("/ui/jobs", params={"order": "name", "limit": "1"})
    [link] = re.findall(r'href="([^"]+)" rel="next"', page.text)
    cursor = parse_qs(urlsplit(html.unescape(link)).query)["cursor"][0]
    wrong = await browser.get("/ui/jobs", params={"order": "next_fire", "cursor": cursor})
    assert wrong.status_code == 422 and "cursor" in wrong.text and "<html" in wrong.text
