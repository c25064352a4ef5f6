"""The run page and the dead-letter page in a browser, on both stores: a failing webhook's
run dies, shows on /ui/dead with its last error, is replayed from there (bulk) and from
its own page; a pending run is cancelled from its page; what a read key and another
tenant see."""

from __future__ import annotations

import threading
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import ADMIN_TOKEN, Dashboard, Tab, sign_in
from tests.browser.conftest import WebhookTarget as Target
from tests.e2e.procs import wait_until

WAIT = 60


def _run(dashboard: Dashboard, run_id: int) -> dict[str, Any]:
    answer = dashboard.api.get(f"/v1/runs/{run_id}")
    answer.raise_for_status()
    run: dict[str, Any] = answer.json()
    return run


def _dead_webhook_run(dashboard: Dashboard, target: Target, name: str) -> int:
    """An immediate webhook job whose target answers 500: its run, once dead."""
    path = f"/{dashboard.backend}/{name}"
    target.status[path] = 500
    job = dashboard.create_job(
        {
            "name": name,
            "schedule": {"kind": "immediate"},
            "action": {"type": "webhook", "url": target.url + path},
            "retry": {"max_attempts": 2, "backoff": "fixed", "initial_delay": 0.05},
        }
    )
    [run] = dashboard.api.get(f"/v1/jobs/{job['id']}/runs").json()["items"]
    wait_until(
        f"run {run['id']} is dead",
        lambda: _run(dashboard, run["id"])["state"] == "dead",
        WAIT,
        [dashboard.log],
    )
    return int(run["id"])


def _pending_run(dashboard: Dashboard, name: str) -> int:
    """A manual job in a pool no worker serves, triggered: a run that stays pending."""
    job = dashboard.create_job(
        {
            "name": name,
            "schedule": {"kind": "manual"},
            "pool": "nobody",
            "action": {"type": "handler", "name": "noop"},
        }
    )
    answer = dashboard.api.post(f"/v1/jobs/{job['id']}/trigger")
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def _wait_succeeded(dashboard: Dashboard, run_id: int) -> dict[str, Any]:
    run: dict[str, Any] = wait_until(
        f"run {run_id} succeeds after its replay",
        lambda: (r := _run(dashboard, run_id))["state"] == "succeeded" and r,
        WAIT,
        [dashboard.log],
    )
    return run


def test_dead_runs_are_listed_replayed_and_explained(
    tab: Tab, dashboard: Dashboard, target: Target
) -> None:
    first = _dead_webhook_run(dashboard, target, "hook-bulk")
    second = _dead_webhook_run(dashboard, target, "hook-single")
    sign_in(tab, dashboard, ADMIN_TOKEN, "/ui/dead?pool=default")
    page = tab.page
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=str(first), exact=True))
    expect(row).to_contain_text("hook-bulk")
    expect(row).to_contain_text("HTTP500")
    expect(row).to_contain_text("answered 500")
    tab.check("dead")

    # Bulk replay of the first run: it runs again on a fresh budget (two more attempts
    # than it had used), held by the target until the page has shown it running.
    bulk = f"/{dashboard.backend}/hook-bulk"
    target.status[bulk] = 200
    target.gates[bulk] = threading.Event()
    boxes = page.get_by_role("checkbox")
    page.get_by_role("button", name="Select all").click()
    assert all(boxes.nth(n).is_checked() for n in range(boxes.count()))
    page.get_by_role("button", name="Select all").click()  # again: none
    assert not any(boxes.nth(n).is_checked() for n in range(boxes.count()))
    page.get_by_label(f"Select run {first}").check()
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Replay selected").click()
    expect(row).to_have_count(0)
    run = wait_until(
        f"run {first} runs again",
        lambda: (r := _run(dashboard, first))["state"] == "running" and r,
        WAIT,
        [dashboard.log],
    )
    assert (run["attempt"], run["max_attempts"]) == (3, 4)
    assert _run(dashboard, second)["state"] == "dead"  # not selected: left alone
    tab.goto(f"{dashboard.url}/ui/runs/{first}")
    facts = page.locator(".run-facts")
    expect(facts).to_contain_text("running")
    expect(facts).to_contain_text("held by")
    target.gates[bulk].set()
    expect(facts).to_contain_text("succeeded", timeout=10_000)  # the live part follows
    expect(page.locator("table.attempts tbody tr")).to_have_count(3)
    assert _wait_succeeded(dashboard, first)["attempt"] == 3

    # The second run's page: its attempts, each with the webhook's status, then replay.
    tab.goto(f"{dashboard.url}/ui/runs/{second}")
    attempts = page.locator("table.attempts tbody tr")
    expect(attempts).to_have_count(2)
    for n in range(2):
        cells = attempts.nth(n)
        expect(cells).to_contain_text("failed")
        expect(cells).to_contain_text("HTTP500")
        expect(cells.locator("td").nth(6)).to_have_text("500")
        expect(cells.locator("td").first).not_to_have_text("—")  # the worker's id
    expect(page.locator(".run-facts")).to_contain_text("2 of 2")
    expect(page.locator(".run-facts")).to_contain_text("Checkpoint")
    tab.check("run-dead")
    target.status[f"/{dashboard.backend}/hook-single"] = 200
    page.once("dialog", lambda d: d.accept())
    # The page reloads itself once the replay is accepted: wait for that reload, or the
    # test's own navigation below can collide with it.
    with page.expect_navigation():
        page.get_by_role("button", name="Replay").click()
    run = _wait_succeeded(dashboard, second)
    assert (run["attempt"], run["max_attempts"]) == (3, 4)
    tab.goto(f"{dashboard.url}/ui/runs/{second}")
    expect(page.locator("table.attempts tbody tr").nth(2)).to_contain_text("succeeded")
    expect(page.locator("table.attempts tbody tr").nth(2).locator("td").nth(6)).to_have_text("200")


def test_a_pending_run_is_cancelled_from_its_page(tab: Tab, dashboard: Dashboard) -> None:
    run_id = _pending_run(dashboard, "waits-for-nobody")
    sign_in(tab, dashboard, ADMIN_TOKEN, f"/ui/runs/{run_id}")
    page = tab.page
    facts = page.locator(".run-facts")
    expect(facts).to_contain_text("pending")
    expect(facts).to_contain_text("nobody")
    assert page.locator("[data-live]").count() == 1
    tab.check("run-pending")
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Cancel run").click()
    expect(facts).to_contain_text("cancelled")
    assert _run(dashboard, run_id)["state"] == "cancelled"
    expect(page.get_by_role("button", name="Cancel run")).to_have_count(0)


def test_a_read_key_sees_no_buttons(phone_tab: Tab, dashboard: Dashboard, target: Target) -> None:
    dead = _dead_webhook_run(dashboard, target, "hook-read")
    pending = _pending_run(dashboard, "read-pending")
    sign_in(phone_tab, dashboard, dashboard.key("read"), "/ui/dead")
    page = phone_tab.page
    expect(page.get_by_role("link", name=str(dead), exact=True)).to_be_visible()
    assert page.get_by_role("button", name="Replay selected").count() == 0
    assert page.get_by_role("checkbox").count() == 0
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a phone"
    phone_tab.check("dead-phone")
    for run_id in (dead, pending):
        phone_tab.goto(f"{dashboard.url}/ui/runs/{run_id}")
        expect(page.locator(".run-facts")).to_be_visible()
        assert page.locator(".actions button").count() == 0
    phone_tab.check("run-phone")


def test_another_tenants_run_is_not_found(tab: Tab, dashboard: Dashboard) -> None:
    run_id = _pending_run(dashboard, "not-yours")
    sign_in(tab, dashboard, dashboard.key("write", tenant="elsewhere"))
    for path in (f"/ui/runs/{run_id}", "/ui/runs/nonsense", "/ui/runs/0"):
        response = tab.goto(f"{dashboard.url}{path}")
        assert response.status == 404, path
        expect(tab.page.get_by_role("heading", level=1)).to_have_text("Not found")
    tab.errors.clear()  # chromium logs the 404 answers themselves: expected
    tab.check("run-404")
    tab.goto(f"{dashboard.url}/ui/dead")
    expect(tab.page.get_by_text("No dead run")).to_be_visible()


def test_a_running_runs_progress_and_checkpoint_follow_its_heartbeats(
    tab: Tab, dashboard: Dashboard
) -> None:
    """A remote worker (over HTTP) holds the run and reports: the page shows the
    progress bar and the checkpoint, and follows the next report without a reload."""
    job = dashboard.create_job(
        {
            "name": "long-import",
            "schedule": {"kind": "manual"},
            "pool": "remote-browser",
            "action": {"type": "handler", "name": "import"},
        }
    )
    dashboard.api.post(f"/v1/jobs/{job['id']}/trigger").raise_for_status()
    worker = {"Authorization": f"Bearer {dashboard.key('worker')}"}
    body = {"worker_id": "browser-w", "pools": ["remote-browser"]}
    [claimed] = dashboard.api.post("/v1/workers/claim", json=body, headers=worker).json()["runs"]
    run = claimed["run"]

    def report(fraction: float, message: str, state: Any) -> None:
        lease = {
            "run_id": run["id"],
            "fence": run["fence"],
            "progress": {"fraction": fraction, "message": message},
            "checkpoint": {"state": state},
        }
        beat = dashboard.api.post(
            "/v1/workers/heartbeat",
            json={"worker_id": "browser-w", "leases": [lease]},
            headers=worker,
        )
        assert beat.json()["extended"] == [run["id"]], beat.text

    report(0.25, "250 of 1000 rows", {"row": 250})
    sign_in(tab, dashboard, ADMIN_TOKEN, f"/ui/runs/{run['id']}")
    page = tab.page
    bar = page.get_by_role("progressbar", name="Progress")
    expect(bar).to_have_attribute("value", "0.25")
    expect(page.locator(".run-progress")).to_contain_text("25 % · 250 of 1000 rows")
    expect(page.get_by_label("Checkpoint")).to_contain_text('"row": 250')
    tab.check("run-progress")
    report(0.75, "750 of 1000 rows", {"row": 750})
    expect(bar).to_have_attribute("value", "0.75", timeout=10_000)  # the live part follows
    expect(page.locator(".run-progress")).to_contain_text("75 % · 750 of 1000 rows")
    expect(page.get_by_label("Checkpoint")).to_contain_text('"row": 750')
