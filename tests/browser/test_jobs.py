"""The jobs pages in a browser, on both stores: the list (search, filters, order, pages,
bulk pause and resume), a job's page (definition, next fires with DST marks, live run
timeline, its buttons), what a read key sees, and another tenant's job."""

from __future__ import annotations

import re
from typing import Any

from tests.browser.conftest import ADMIN_TOKEN, Dashboard, Tab, WebhookTarget, sign_in

LIVE_TIMEOUT = 30_000
"""Milliseconds to wait for something the worker does (a run finishing)."""


def _spec(name: str, **changes: Any) -> dict[str, Any]:
    return {
        "name": name,
        "schedule": {"kind": "cron", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
        "action": {"type": "handler", "name": "noop"},
    } | changes


def _state(dashboard: Dashboard, job_id: str) -> str:
    state: str = dashboard.api.get(f"/v1/jobs/{job_id}").json()["state"]
    return state


def _names(tab: Tab) -> list[str]:
    return [n.strip() for n in tab.page.locator("table.jobs tbody th").all_inner_texts()]


def test_list_searches_filters_orders_pages_and_bulk_pauses(tab: Tab, dashboard: Dashboard) -> None:
    jobs = [dashboard.create_job(_spec(f"lst-{i}")) for i in range(4)]
    every = {"kind": "interval", "every_seconds": 600}
    dashboard.create_job(_spec("lst-iv", schedule=every, pool="reports"))
    dashboard.create_job(_spec("other-name"))
    sign_in(tab, dashboard, ADMIN_TOKEN, "/ui/jobs?q=lst-&limit=2")
    page = tab.page
    assert _names(tab) == ["lst-0", "lst-1"]
    assert "0 3 * * *" in page.locator("table.jobs tbody tr").first.inner_text()
    tab.check("list")
    page.get_by_role("link", name="Next page").click()
    page.wait_for_load_state("networkidle")
    assert "q=lst-" in page.url and "limit=2" in page.url  # the filters stay
    assert _names(tab) == ["lst-2", "lst-3"]
    page.get_by_role("link", name="Next page").click()
    page.wait_for_load_state("networkidle")
    assert _names(tab) == ["lst-iv"]
    assert page.get_by_role("link", name="Next page").count() == 0

    page.get_by_label("Schedule").select_option("interval")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_load_state("networkidle")
    assert _names(tab) == ["lst-iv"]
    tab.goto(f"{dashboard.url}/ui/jobs?q=lst-&order=-created&outcome=none")
    assert _names(tab) == ["lst-iv", "lst-3", "lst-2", "lst-1", "lst-0"]

    page.get_by_label("Select lst-1").check()
    page.get_by_label("Select lst-2").check()
    page.get_by_role("button", name="Pause selected").click()
    page.locator("table.jobs .badge.s-paused").nth(1).wait_for()
    assert [_state(dashboard, j["id"]) for j in jobs] == ["active", "paused", "paused", "active"]
    tab.goto(f"{dashboard.url}/ui/jobs?q=lst-&state=paused")
    assert _names(tab) == ["lst-1", "lst-2"]
    page.get_by_role("button", name="Select all").click()
    page.get_by_role("button", name="Resume selected").click()
    page.get_by_text("No job matches these filters.").wait_for()
    assert {_state(dashboard, j["id"]) for j in jobs} == {"active"}


def test_header_links_sort_the_list_by_keyboard_and_keep_the_filters(
    tab: Tab, dashboard: Dashboard
) -> None:
    for name, at in (
        ("hdr-b", "2031-01-02T00:00:00Z"),
        ("hdr-c", "2031-01-01T00:00:00Z"),
        ("hdr-a", "2031-01-03T00:00:00Z"),
    ):
        dashboard.create_job(_spec(name, schedule={"kind": "once", "at": at}))
    sign_in(tab, dashboard, ADMIN_TOKEN, "/ui/jobs?q=hdr-&limit=2")
    page = tab.page
    assert _names(tab) == ["hdr-b", "hdr-c"]
    page.get_by_role("link", name="Next page").click()
    page.wait_for_load_state("networkidle")
    assert _names(tab) == ["hdr-a"]

    name_header = page.locator("table.jobs thead th", has_text="Name")
    assert name_header.get_attribute("aria-sort") is None
    # By keyboard: focus the header's link, then Enter.
    name_header.get_by_role("link").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"order=name"))
    assert "order=name" in page.url and "q=hdr-" in page.url and "limit=2" in page.url
    assert "cursor=" not in page.url  # back to the first page of the new order
    assert _names(tab) == ["hdr-a", "hdr-b"]
    assert name_header.get_attribute("aria-sort") == "ascending"
    page.get_by_role("link", name="Next page").click()
    page.wait_for_load_state("networkidle")
    assert "order=name" in page.url and _names(tab) == ["hdr-c"]  # the order stays
    tab.check("list-by-name")

    name_header.get_by_role("link").click()  # a sorted column: the other way round
    page.wait_for_url(re.compile(r"order=-name"))
    assert _names(tab) == ["hdr-c", "hdr-b"]
    assert name_header.get_attribute("aria-sort") == "descending"

    fire_header = page.locator("table.jobs thead th", has_text="Next fire")
    fire_header.get_by_role("link").click()
    page.wait_for_url(re.compile(r"order=next_fire"))
    assert _names(tab) == ["hdr-c", "hdr-b"]
    assert fire_header.get_attribute("aria-sort") == "ascending"
    assert name_header.get_attribute("aria-sort") is None
    assert page.get_by_label("Order").input_value() == "next_fire"
    tab.check("list-by-next-fire")


def test_job_page_shows_the_definition_and_fires_with_dst_marks(
    tab: Tab, phone_tab: Tab, dashboard: Dashboard
) -> None:
    schedule = {
        "kind": "cron",
        "cron": "30 2 * * *",
        "timezone": "Europe/Paris",
        "start_at": "2027-03-26T00:00:00+01:00",
    }
    action = {
        "type": "webhook",
        "url": "https://example.invalid/hook",
        "headers": {"Authorization": "Bearer very-secret-value"},
    }
    job = dashboard.create_job(
        _spec("dst-paris", schedule=schedule, action=action, payload={"report": "daily"})
    )
    sign_in(tab, dashboard, ADMIN_TOKEN, f"/ui/jobs/{job['id']}")
    page = tab.page
    assert page.get_by_role("heading", level=1).inner_text() == "Job dst-paris"
    body = page.locator("main").inner_text()
    assert "very-secret-value" not in body and "***" in body
    assert "Europe/Paris" in body and "gap_end:" in body and '"report": "daily"' in body
    rows = page.locator("table.fires tbody tr")
    assert rows.count() == 10
    first, third = rows.nth(0).inner_text(), rows.nth(2).inner_text()
    assert "2027-03-26 02:30:00 +01:00" in first and "01:30:00 UTC" in first
    assert "2027-03-28 03:00:00 +02:00" in third and "01:00:00 UTC" in third
    assert "moved" in third and "offset changed from +01:00 to +02:00" in third
    assert "+02:00" in rows.nth(3).inner_text() and "moved" not in rows.nth(3).inner_text()
    tab.check("job")

    sign_in(phone_tab, dashboard, ADMIN_TOKEN, f"/ui/jobs/{job['id']}")
    _fits_a_phone(phone_tab)
    phone_tab.check("job-phone")
    phone_tab.goto(f"{dashboard.url}/ui/jobs?q=dst-")
    _fits_a_phone(phone_tab)
    phone_tab.check("list-phone")


def _fits_a_phone(tab: Tab) -> None:
    width = tab.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"{tab.page.url} is {width} px wide on a phone"


def test_a_run_appears_live_then_trigger_pause_resume_and_cancel_buttons(
    tab: Tab, dashboard: Dashboard, target: WebhookTarget
) -> None:
    target.status["/hook"] = 200
    hook = {"type": "webhook", "url": f"{target.url}/hook"}
    job = dashboard.create_job(_spec("live-hook", schedule={"kind": "manual"}, action=hook))
    sign_in(tab, dashboard, ADMIN_TOKEN, f"/ui/jobs/{job['id']}")
    page = tab.page
    page.get_by_text("No run yet.").wait_for()
    run = dashboard.api.post(f"/v1/jobs/{job['id']}/trigger").json()
    row = page.locator("ol.timeline li.run").filter(has_text=f"Run #{run['id']}")
    row.wait_for(timeout=LIVE_TIMEOUT)  # no reload: the live fragment brought it
    row.locator(".badge.s-succeeded").wait_for(timeout=LIVE_TIMEOUT)
    assert "succeeded" in row.inner_text()
    tab.check("job-live")

    page.get_by_role("button", name="Trigger now").click()
    page.wait_for_url(re.compile(r"/ui/runs/\d+$"))
    new_id = int(page.url.rsplit("/", 1)[1])
    runs = dashboard.api.get(f"/v1/jobs/{job['id']}/runs").json()["items"]
    assert [r["id"] for r in runs] == [new_id, run["id"]]
    tab.errors.clear()  # the run page is another helper's: here it may be a 404

    tab.goto(f"{dashboard.url}/ui/jobs/{job['id']}")
    page.on("dialog", lambda dialog: dialog.accept())
    assert page.get_by_role("link", name="Edit").get_attribute("href") == (
        f"/ui/jobs/{job['id']}/edit"
    )
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Resume with catch-up").wait_for()
    assert _state(dashboard, job["id"]) == "paused"
    assert "Paused: no fire" in page.locator("main").inner_text()
    page.get_by_role("button", name="Resume with catch-up").click()
    page.get_by_role("button", name="Pause").wait_for()
    assert _state(dashboard, job["id"]) == "active"
    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Resume", exact=True).click()
    page.get_by_role("button", name="Pause").wait_for()
    assert _state(dashboard, job["id"]) == "active"
    page.get_by_role("button", name="Cancel job").click()
    page.locator(".job-summary .badge.s-cancelled").wait_for()
    assert _state(dashboard, job["id"]) == "cancelled"
    assert page.locator("[data-action]").count() == 0


def test_a_read_key_sees_no_buttons_and_another_tenants_job_is_not_found(
    tab: Tab, dashboard: Dashboard
) -> None:
    job = dashboard.create_job(_spec("read-only"))
    other = dashboard.create_job(_spec("theirs"), dashboard.key("write", tenant="other"))
    sign_in(tab, dashboard, dashboard.key("read"), "/ui/jobs?q=read-only")
    page = tab.page
    assert _names(tab) == ["read-only"]
    assert page.locator('input[name="id"]').count() == 0
    assert page.locator("[data-bulk-action]").count() == 0
    assert page.get_by_role("link", name="New job").count() == 0
    tab.goto(f"{dashboard.url}/ui/jobs/{job['id']}")
    assert page.locator("[data-action]").count() == 0
    assert page.get_by_role("link", name="Edit").count() == 0
    tab.check("job-read")

    for bad in (other["id"], "not-a-job"):
        response = tab.goto(f"{dashboard.url}/ui/jobs/{bad}")
        assert response.status == 404
        assert page.get_by_role("heading", level=1).inner_text() == "Not found"
    assert "theirs" not in page.locator("main").inner_text()
    tab.errors.clear()  # chromium logs the 404 answer itself
    tab.check("job-404")
