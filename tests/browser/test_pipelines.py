"""The pipelines pages in a browser, on both stores, against ``cronwheel dev``'s own
worker and webhook tasks to a local target: a pipeline run whose middle task fails for
good shows its graph (a column per step, each task's state, the skipped task's reason),
its dead task is retried from the page and the page follows the run to its end; a run
started from the pipeline's page is cancelled from its own; a phone scrolls the graph,
not the page."""

from __future__ import annotations

import threading
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import ADMIN_TOKEN, Dashboard, Tab, sign_in
from tests.browser.conftest import WebhookTarget as Target
from tests.e2e.procs import wait_until

WAIT = 60


def _webhook(target: Target, path: str, **extra: Any) -> dict[str, Any]:
    return {"action": {"type": "webhook", "url": target.url + path}, **extra}


def _pipeline(dashboard: Dashboard, target: Target, name: str) -> tuple[dict[str, Any], str]:
    """fetch → publish → notify, webhooks to ``target``: publish answers 500 (one
    attempt), so it dies and notify is skipped; fetch and notify answer 200."""
    base = f"/{dashboard.backend}/{name}"
    target.status[f"{base}/fetch"] = 200
    target.status[f"{base}/publish"] = 500
    target.status[f"{base}/notify"] = 200
    once = {"max_attempts": 1}
    definition = {
        "name": name,
        "tasks": {
            "fetch": _webhook(target, f"{base}/fetch"),
            "publish": _webhook(target, f"{base}/publish", retry=once),
            "notify": _webhook(target, f"{base}/notify"),
        },
        "edges": [{"from": "fetch", "to": "publish"}, {"from": "publish", "to": "notify"}],
    }
    made = dashboard.api.post("/v1/pipelines", json=definition)
    assert made.status_code == 201, made.text
    pipeline: dict[str, Any] = made.json()
    return pipeline, base


def _pipeline_run(dashboard: Dashboard, run_id: str) -> dict[str, Any]:
    answer = dashboard.api.get(f"/v1/pipeline-runs/{run_id}")
    answer.raise_for_status()
    run: dict[str, Any] = answer.json()
    return run


def _ended(dashboard: Dashboard, run_id: str, state: str) -> dict[str, Any]:
    run: dict[str, Any] = wait_until(
        f"pipeline run {run_id} is {state}",
        lambda: (r := _pipeline_run(dashboard, run_id))["state"] == state and r,
        WAIT,
        [dashboard.log],
    )
    return run


def test_a_failed_pipeline_run_is_read_retried_and_followed_to_its_end(
    tab: Tab, dashboard: Dashboard, target: Target
) -> None:
    pipeline, base = _pipeline(dashboard, target, "ledger")
    started = dashboard.api.post(f"/v1/pipelines/{pipeline['id']}/runs")
    assert started.status_code == 201, started.text
    run_id = started.json()["id"]
    failed = _ended(dashboard, run_id, "failed")
    publish_run = next(t["run_id"] for t in failed["tasks"] if t["task"] == "publish")

    # From the navigation to the pipeline, its runs, and the run.
    sign_in(tab, dashboard, ADMIN_TOKEN)
    page = tab.page
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Pipelines").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Pipelines")
    expect(page.get_by_role("link", name=run_id)).to_be_visible()  # among the latest runs
    tab.check("pipelines")
    page.get_by_role("link", name="ledger", exact=True).first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Pipeline ledger")
    page.get_by_role("link", name=run_id).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Pipeline run of ledger")
    steps = page.locator("ol.pipeline-graph > li.layer")
    expect(steps).to_have_count(3)
    expect(steps.nth(0)).to_contain_text("fetch")
    expect(page.locator("#task-fetch")).to_contain_text("succeeded")
    expect(page.locator("#task-publish")).to_contain_text("dead")
    expect(page.locator("#task-notify")).to_contain_text("skipped")
    expect(page.locator("#task-notify")).to_contain_text("upstream_failed")
    expect(page.locator(".pipeline-run-facts")).to_contain_text("failed")
    assert page.locator("[data-live]").count() == 0  # it has ended
    tab.check("pipeline-run-failed")

    # Retry the dead task from its card: the page reloads, then follows the run live.
    target.status[f"{base}/publish"] = 200
    target.gates[f"{base}/notify"] = threading.Event()  # held until the page shows it running
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        page.get_by_role("button", name="Retry publish").click()
    expect(page.locator("#task-notify")).to_contain_text("running", timeout=20_000)
    assert page.locator("[data-live]").count() == 1
    tab.check("pipeline-run-retried")
    target.gates[f"{base}/notify"].set()
    expect(page.locator("#task-notify")).to_contain_text("succeeded", timeout=20_000)
    expect(page.locator(".pipeline-run-facts")).to_contain_text("succeeded")
    _ended(dashboard, run_id, "succeeded")

    # A task links to its run's page, which links back.
    page.locator("#task-publish").get_by_role("link", name=f"Run {publish_run}").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Run {publish_run}")
    page.get_by_role("link", name=f"pipeline run {run_id}").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Pipeline run of ledger")

    # The list of every pipeline run, filtered by state.
    tab.goto(f"{dashboard.url}/ui/pipeline-runs?state=succeeded")
    expect(page.get_by_role("link", name=run_id)).to_be_visible()
    tab.check("pipeline-runs")


def test_a_run_started_from_the_page_is_cancelled_from_its_own(
    tab: Tab, dashboard: Dashboard, target: Target
) -> None:
    pipeline, base = _pipeline(dashboard, target, "held")
    target.gates[f"{base}/fetch"] = threading.Event()  # fetch runs until the test ends
    sign_in(tab, dashboard, ADMIN_TOKEN, f"/ui/pipelines/{pipeline['id']}")
    page = tab.page
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation(url="**/ui/pipeline-runs/*"):
        page.get_by_role("button", name="Start a run").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Pipeline run of held")
    expect(page.locator("#task-fetch")).to_contain_text("running", timeout=20_000)
    expect(page.locator("#task-notify")).to_contain_text("waiting")
    tab.check("pipeline-run-running")
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        page.get_by_role("button", name="Cancel pipeline run").click()
    run_id = page.url.rsplit("/", 1)[-1]
    _ended(dashboard, run_id, "cancelled")
    expect(page.locator(".pipeline-run-facts")).to_contain_text("cancelled", timeout=20_000)
    expect(page.locator("#task-publish")).to_contain_text("skipped")
    expect(page.get_by_role("button", name="Cancel pipeline run")).to_have_count(0)
    target.gates[f"{base}/fetch"].set()


def test_on_a_phone_the_graph_scrolls_and_a_read_key_sees_no_button(
    phone_tab: Tab, dashboard: Dashboard, target: Target
) -> None:
    pipeline, _ = _pipeline(dashboard, target, "phone")
    run_id = dashboard.api.post(f"/v1/pipelines/{pipeline['id']}/runs").json()["id"]
    _ended(dashboard, run_id, "failed")
    sign_in(phone_tab, dashboard, dashboard.key("read"), f"/ui/pipeline-runs/{run_id}")
    page = phone_tab.page
    expect(page.locator("#task-publish")).to_contain_text("dead")
    assert page.get_by_role("button", name="Retry publish").count() == 0
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a phone"
    phone_tab.check("pipeline-run-phone")
    phone_tab.goto(f"{dashboard.url}/ui/pipelines/{pipeline['id']}")
    assert page.get_by_role("button", name="Start a run").count() == 0
    phone_tab.check("pipeline-phone")
