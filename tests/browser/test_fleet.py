"""The overview and the workers page in a browser, on both stores: pools with their
counts and hour charts, updating live; the dev process's worker, a sharded scheduler
with its shards and epochs and the maintenance owner for a system admin; another
tenant's read key sees none of the default tenant's workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ADMIN_TOKEN, Dashboard, Tab, WebhookTarget, sign_in
from tests.e2e.procs import REPO

WAIT = 20_000


def _manual_job(dashboard: Dashboard, name: str, url: str, pool: str, runs: int) -> None:
    """A manual webhook job of the default tenant in ``pool``, and ``runs`` runs of it."""
    job = dashboard.create_job(
        {
            "name": name,
            "schedule": {"kind": "manual"},
            "action": {"type": "webhook", "url": url},
            "pool": pool,
            "retry": {"max_attempts": 1},
        }
    )
    answer = dashboard.api.post(f"/v1/jobs/{job['id']}/runs", json={"payloads": [None] * runs})
    assert answer.status_code == 201, answer.text


def test_the_overview_shows_pools_with_their_hour_and_updates_live(
    tab: Tab, dashboard: Dashboard, target: WebhookTarget, scheduler: None
) -> None:
    page = tab.page
    target.status["/ok"] = 200  # and /fail answers 500
    _manual_job(dashboard, "fleet-ok", f"{target.url}/ok", "default", 3)
    _manual_job(dashboard, "fleet-fail", f"{target.url}/fail", "default", 2)
    sign_in(tab, dashboard, ADMIN_TOKEN)
    expect(page.get_by_role("heading", level=1)).to_have_text("Overview")
    row = page.locator('tr[data-pool="default"]')
    # The dev worker serves pool default: all five finish, two of them failed (dead).
    expect(row.locator('[data-field="finished"]')).to_have_text("5", timeout=WAIT)
    expect(row.locator('[data-field="failures"]')).to_have_text("2", timeout=WAIT)
    expect(row.locator('[data-field="dead"]')).to_have_text("2", timeout=WAIT)
    expect(row.locator('[data-field="due"]')).to_have_text("0")
    expect(row.locator('[data-field="running"]')).to_have_text("0")
    charts = row.locator('svg[role="img"]')
    expect(charts).to_have_count(2)
    expect(charts.nth(0)).to_have_attribute(
        "aria-label",
        re.compile(r"^Pool default: 5 attempts finished in the last 60 minutes, at most [1-5] in"),
    )
    expect(charts.nth(1).locator("title")).to_have_text(
        re.compile(r"^Pool default: 2 failed attempts in the last 60 minutes, at most [12] in")
    )
    expect(charts.nth(0).locator("rect:not(.chart-base)")).not_to_have_count(0)
    expect(page.locator("#sum-active")).to_have_text("2")
    expect(page.locator("#sum-dead")).to_have_text("2")
    tab.check("overview")

    # Runs in a pool no worker serves: due, and shown without a reload.
    page.evaluate("window.__marker = 'same page'")
    _manual_job(dashboard, "fleet-waiting", f"{target.url}/ok", "fleet-unserved", 4)
    waiting = page.locator('tr[data-pool="fleet-unserved"]')
    expect(waiting.locator('[data-field="due"]')).to_have_text("4", timeout=WAIT)
    expect(page.locator("#sum-due")).to_have_text("4")
    expect(page.locator("#sum-active")).to_have_text("3")
    assert page.evaluate("window.__marker") == "same page"
    tab.check("overview-live")


def _remote_worker(dashboard: Dashboard) -> None:
    """A remote worker of the default tenant, registered by its first claim."""
    token = dashboard.key("worker")
    answer = httpx.post(
        f"{dashboard.url}/v1/workers/claim",
        json={"worker_id": "fleet-remote", "pools": ["remote-pool"], "capacity": 2},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def scheduler(dashboard: Dashboard) -> Iterator[None]:
    """A sharded ``cronwheel scheduler`` on the dashboard's store, for the module: the
    first test starts it, so it has its shards by the time the workers page looks."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CRONWHEEL_LOG_LEVEL": "warning"}
    args = ["scheduler", "--db", dashboard.store_url, "--shards", "4", "--duration", "300"]
    with open(dashboard.log.with_name("scheduler.log"), "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cronwheel", *args],
            cwd=dashboard.log.parent,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_the_workers_page_shows_the_fleet_as_each_viewer_may_see_it(
    tab: Tab, phone_tab: Tab, dashboard: Dashboard, scheduler: None
) -> None:
    _remote_worker(dashboard)
    page = tab.page
    sign_in(tab, dashboard, ADMIN_TOKEN, "/ui/workers")
    expect(page.get_by_role("heading", level=1)).to_have_text("Workers and schedulers")
    dev = page.locator("#workers tbody tr").filter(
        has=page.locator('[data-field="pools"]', has_text="default")
    )
    expect(dev).to_have_count(1, timeout=WAIT)
    expect(dev.locator('[data-field="capacity"]')).to_have_text("4")
    expect(dev).to_contain_text("shared")
    expect(page.locator('tr[data-worker="default/fleet-remote"]')).to_contain_text("remote-pool")
    # The scheduler registers and takes its shards while the page is open: no reload.
    sched = page.locator("#schedulers tbody tr")
    expect(sched).to_have_count(1, timeout=WAIT)
    expect(sched.locator('[data-field="shard-count"]')).to_have_text("4", timeout=WAIT)
    expect(sched.locator(".shard")).to_have_text(["0 (1)", "1 (1)", "2 (1)", "3 (1)"], timeout=WAIT)
    expect(page.locator("#shards-held")).to_have_text("4 of 4 shards held under a live lease.")
    expect(page.locator('#maintenance [data-field="owner"]')).to_contain_text("maintenance-")
    tab.check("workers-admin")

    # Another tenant's read key: the shared worker without host or load, none of the
    # default tenant's workers, and the schedulers without their names.
    other = dashboard.key("read", "fleet-other")
    phone = phone_tab.page
    sign_in(phone_tab, dashboard, other, "/ui/workers")
    rows = phone.locator("#workers tbody tr")
    expect(rows).to_have_count(1, timeout=WAIT)
    expect(rows.locator('[data-field="pools"]')).to_have_text("default")
    expect(rows.locator('[data-field="in-flight"]')).to_have_text("hidden")
    expect(phone.locator("#workers-live")).not_to_contain_text("fleet-remote")
    expect(phone.locator("#schedulers tbody tr")).to_have_count(1)
    expect(phone.locator("#schedulers")).not_to_contain_text("scheduler-")
    expect(phone.locator("#maintenance")).to_contain_text("A process holds the maintenance lease")
    # A keyboard user scrolling the table keeps their place and focus across refreshes.
    wrap = phone.locator("#workers-live .table-wrap").first
    wrap.focus()
    scrolled = wrap.evaluate("w => { w.scrollLeft = 120; return w.scrollLeft; }")
    assert scrolled > 0, "the workers table fits a phone: nothing to scroll"
    after = phone.evaluate(
        """() => new Promise(resolve => {
            const live = document.querySelector('#workers-live');
            live.addEventListener('cronwheel:live', () => {
                const w = live.querySelector('.table-wrap');
                resolve([w.scrollLeft, document.activeElement === w]);
            }, {once: true});
        })"""
    )
    assert after == [scrolled, True]
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    phone_tab.check("workers-phone")
