"""``/docs`` works without the internet: the page names no other host, and the app
serves every file it loads (issue 13, item 10)."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

import httpx

from cronwheel.api.docs_ui import ASSETS_URL

TYPES = {
    ".js": ("text/javascript", "application/javascript"),
    ".css": ("text/css",),
    ".png": ("image/png",),
}


class _References(HTMLParser):
    """Every URL a page loads: script src, link href, img src."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.inline_scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for name in ("src", "href"):
            if tag in ("script", "link", "img") and found.get(name):
                self.urls.append(str(found[name]))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline_scripts.append(data)


async def test_docs_load_nothing_from_another_host(client: httpx.AsyncClient) -> None:
    page = await client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    refs = _References()
    refs.feed(page.text)
    assert len(refs.urls) >= 3, refs.urls  # the script, the stylesheet, the icon
    for url in refs.urls:
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc) == ("", ""), f"{url} is on another host"
        assert url.startswith(ASSETS_URL + "/"), url
    # The inline script that starts Swagger UI fetches only this app's schema.
    assert all("http://" not in s and "https://" not in s for s in refs.inline_scripts)
    assert any("'/openapi.json'" in s for s in refs.inline_scripts)

    for url in refs.urls:
        asset = await client.get(url)
        assert asset.status_code == 200, url
        kind = asset.headers["content-type"]
        suffix = url[url.rindex(".") :]
        assert kind.split(";")[0] in TYPES[suffix], (url, kind)
        assert len(asset.content) > 500, url
    bundle = await client.get(f"{ASSETS_URL}/swagger-ui-bundle.js")
    assert "SwaggerUIBundle" in bundle.text
    schema = await client.get("/openapi.json")
    assert schema.status_code == 200 and schema.json()["openapi"].startswith("3.1")


async def test_only_the_pages_assets_are_served_and_redoc_is_off(
    client: httpx.AsyncClient,
) -> None:
    for path in (f"{ASSETS_URL}/index.html", f"{ASSETS_URL}/swagger-initializer.js", "/redoc"):
        assert (await client.get(path)).status_code == 404, path
    assert (await client.get(f"{ASSETS_URL}/..%2Fpyproject.toml")).status_code == 404
