"""The dashboard in a real browser: Debian's chromium driven by Playwright, against a
real ``cronwheel dev`` process (API, scheduler and worker) on each store.

In CI (``CI=true``) these tests must run: ``.ci/run`` installs chromium when it is
missing, and a missing browser fails the run. Elsewhere they skip with a line that says
how to enable them. Every page a test visits is checked for JavaScript console errors
and accessibility (axe-core: no serious or critical violation), and saved as a
screenshot under ``test-output/browser/``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import pg
from tests.e2e.procs import REPO, free_port, wait_until

CHROMIUM = os.environ.get("CRONWHEEL_CHROMIUM", "/usr/bin/chromium")
REQUIRED = os.environ.get("CI", "").lower() == "true"
ENABLE = (
    "browser tests need Debian's chromium and Playwright for Python: "
    "`sudo apt-get install chromium` and `pip install -e '.[test]'` (or set CRONWHEEL_CHROMIUM)"
)
SHOTS = REPO / "test-output" / "browser"
AXE = Path(__file__).parent / "vendor" / "axe.min.js"
ADMIN_TOKEN = "cw-browser-admin-token-0123456789"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def _missing() -> str | None:
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        return f"no chromium at {CHROMIUM}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium per module. Not per session: Playwright's sync API keeps an
    event loop running in the main thread while it is started, and every async test that
    pytest runs after a browser module (tests/cluster, tests/engine…) would then fail with
    "Runner.run() cannot be called from a running event loop"."""
    reason = _missing()
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"{reason}; CI requires the browser tests to run. {ENABLE}", pytrace=False)
        pytest.skip(f"{reason}: {ENABLE}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@dataclass
class Dashboard:
    """A running ``cronwheel dev`` with auth on, and a client to set the scene over its API."""

    url: str
    backend: str
    store_url: str
    log: Path
    api: httpx.Client

    def key(self, role: str, tenant: str | None = None) -> str:
        """A new API key's token, of ``tenant`` (created if missing; default: default)."""
        body: dict[str, Any] = {"name": f"{role} key", "role": role}
        if tenant is not None:
            if self.api.get(f"/v1/tenants/{tenant}").status_code == 404:
                self.api.post("/v1/tenants", json={"id": tenant, "name": tenant}).raise_for_status()
            body["tenant_id"] = tenant
        answer = self.api.post("/v1/keys", json=body)
        answer.raise_for_status()
        token: str = answer.json()["token"]
        return token

    def create_job(self, spec: dict[str, Any], token: str | None = None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        answer = self.api.post("/v1/jobs", json=spec, headers=headers)
        assert answer.status_code == 201, answer.text
        job: dict[str, Any] = answer.json()
        return job


def _start(
    store_url: str, folder: Path, *, auth: bool, extra: tuple[str, ...] = ()
) -> Iterator[Dashboard]:
    port = free_port()
    log = folder / "dev.log"
    args = ["dev", "--db", store_url, "--port", str(port), "--pool", "default=4", *extra]
    if auth:
        args += ["--admin-token", ADMIN_TOKEN]
    env = {**os.environ, "PYTHONPATH": str(REPO), "CRONWHEEL_LOG_LEVEL": "warning"}
    # Secret webhook headers need a key on PostgreSQL (dev on SQLite makes its own).
    env["CRONWHEEL_SECRETS_KEY"] = "t3QxM0VYbZ8p2m5Jc7uF1dR9sW4yK6hL0aN8eG2vB5o="
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cronwheel", *args],
            cwd=folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"} if auth else {}
        client = httpx.Client(base_url=url, headers=headers, timeout=10)
        try:
            wait_until(
                "cronwheel dev answers",
                lambda: proc.poll() is None and client.get("/readyz").status_code == 200,
                60,
                [log],
            )
            backend = "sqlite" if store_url.startswith("sqlite") else "postgres"
            yield Dashboard(url, backend, store_url, log, client)
        finally:
            client.close()
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def dashboard(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dashboard]:
    """``cronwheel dev --admin-token`` on a fresh store of each backend, for a module.
    A module may give its ``cronwheel dev`` more options with a ``dev_options`` list
    (tests/browser/test_jobform_actions.py: a worker that allows a command, a broker)."""
    folder = tmp_path_factory.mktemp(f"dashboard-{request.param}")
    extra = tuple(getattr(request.module, "dev_options", ()))
    if request.param == "sqlite":
        yield from _start(f"sqlite:///{folder / 'dev.db'}", folder, auth=True, extra=extra)
        return
    request.getfixturevalue("pg_dsn")  # fails in CI, skips elsewhere, if PostgreSQL is down
    name, dsn = pg.create_database("cronwheel_ui")
    try:
        yield from _start(dsn, folder, auth=True, extra=extra)
    finally:
        pg.drop_database(name)


@pytest.fixture(scope="module")
def open_dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """``cronwheel dev`` without a token (open on loopback, as the API), on SQLite."""
    folder = tmp_path_factory.mktemp("dashboard-open")
    yield from _start(f"sqlite:///{folder / 'dev.db'}", folder, auth=False)


@dataclass
class Tab:
    """A browser page that remembers the console errors and failed requests it saw."""

    page: Any
    name: str
    errors: list[str] = field(default_factory=list)

    def goto(self, url: str) -> Any:
        response = self.page.goto(url)
        self.page.wait_for_load_state("networkidle")
        return response

    def check(self, shot: str) -> None:
        """The page as it is now: a screenshot, no console error, no serious or
        critical accessibility violation."""
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{self.name}-{shot}.png"), full_page=True)
        assert not self.errors, f"JavaScript errors on {self.page.url}: {self.errors}"
        violations = axe_violations(self.page)
        assert not violations, f"accessibility violations on {self.page.url}: {violations}"


def axe_violations(page: Any) -> list[str]:
    """axe-core's serious and critical violations of the page, one line each.
    Evaluated through the DevTools protocol, so the page's CSP does not block it."""
    page.evaluate(AXE.read_text())
    result = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => v.id + ': ' + v.help + ' @ ' + v.nodes.map(n => n.target.join(' ')).join(', '))"
    )
    return list(result)


@pytest.fixture
def tab(browser: Any, request: pytest.FixtureRequest) -> Iterator[Tab]:
    """A fresh browser context (no cookies) at desktop size, in a fixed zone."""
    context = browser.new_context(viewport=DESKTOP, timezone_id="Europe/Paris")
    yield from _tab(context, request)


@pytest.fixture
def phone_tab(browser: Any, request: pytest.FixtureRequest) -> Iterator[Tab]:
    """A fresh browser context the size of a phone."""
    context = browser.new_context(viewport=PHONE, timezone_id="America/New_York", is_mobile=True)
    yield from _tab(context, request)


def _tab(context: Any, request: pytest.FixtureRequest) -> Iterator[Tab]:
    context.set_default_timeout(15_000)
    page = context.new_page()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    tab = Tab(page, name)
    page.on("console", lambda m: tab.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: tab.errors.append(str(e)))
    try:
        yield tab
    finally:
        context.close()


def sign_in(tab: Tab, dashboard: Dashboard, token: str, path: str = "/ui/") -> None:
    """Sign in through the form, as a person does."""
    tab.goto(f"{dashboard.url}{path}")
    assert "/ui/signin" in tab.page.url
    tab.page.get_by_label("API key").fill(token)
    tab.page.get_by_role("button", name="Sign in").click()
    tab.page.wait_for_load_state("networkidle")
    assert "/ui/signin" not in tab.page.url, tab.page.content()[:2000]


class WebhookTarget:
    """A local webhook target: each path answers the status it is told (``default``
    until then), once its gate, if it has one, is opened."""

    def __init__(self, default: int = 500) -> None:
        self.status: dict[str, int] = {}
        self.gates: dict[str, threading.Event] = {}
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                gate = target.gates.get(self.path)
                if gate is not None:
                    gate.wait(60)
                code = target.status.get(self.path, default)
                body = b"ok" if code < 300 else b"target is down"
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # quiet test output
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def target() -> Iterator[WebhookTarget]:
    """A webhook target for a module's tests: every path answers 500 unless told."""
    found = WebhookTarget()
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        for gate in found.gates.values():
            gate.set()
        found.server.shutdown()
        found.server.server_close()
