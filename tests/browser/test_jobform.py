"""Creating and editing a job through the form, with the schedule previewed as it is
typed; the API's field errors next to their fields; a stale edit; a read key's 403."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Dashboard, Tab, sign_in

JOB_URL = re.compile(r"/ui/jobs/([0-9a-f-]{36})$")
TIMEOUT = 15_000


def _field(tab: Tab, label: str) -> Any:
    return tab.page.get_by_label(label, exact=True)


def test_a_cron_job_is_created_through_the_form_with_its_preview(
    tab: Tab, dashboard: Dashboard
) -> None:
    sign_in(tab, dashboard, dashboard.key("write"), "/ui/jobs/new")
    page = tab.page
    assert page.url.endswith("/ui/jobs/new")
    expect(page.locator("#preview-status")).to_contain_text("Type a cron expression")
    _field(tab, "Name").fill("paris-nightly")
    _field(tab, "Cron expression").fill("30 2 * * *")
    _field(tab, "Timezone").fill("Europe/Paris")
    # From 20 March 2027, the next ten fires cross the spring-forward night of the 28th.
    _field(tab, "Not before (optional)").fill("2027-03-20T00:00:00+01:00")
    rows = page.locator("#preview-rows tr")
    expect(rows).to_have_count(10, timeout=TIMEOUT)
    description = page.locator("#preview-description")
    expect(description).to_contain_text("At 02:30, every day, in Europe/Paris")
    expect(description).to_contain_text("fires when the gap ends")
    moved = rows.filter(has=page.locator(".badge.dst"))
    expect(moved).to_have_count(1)
    expect(moved).to_contain_text("Sun 2027-03-28 03:00:00")
    expect(moved).to_contain_text("+02:00 (changed)")
    expect(moved).to_contain_text("moved")
    expect(rows.first).to_contain_text("Sat 2027-03-20 02:30:00")
    tab.check("new-job-preview")

    _field(tab, "Handler name").fill("nightly-report")
    page.get_by_role("button", name="Create job").click()
    page.wait_for_url(JOB_URL, timeout=TIMEOUT)
    found = JOB_URL.search(page.url)
    assert found is not None
    job = dashboard.api.get(f"/v1/jobs/{found.group(1)}").json()
    assert job["name"] == "paris-nightly"
    assert job["schedule"] == {
        "kind": "cron",
        "cron": "30 2 * * *",
        "timezone": "Europe/Paris",
        "start_at": "2027-03-19T23:00:00+00:00",
    }
    assert job["action"] == {"type": "handler", "name": "nightly-report"}
    assert (job["retry"]["max_attempts"], job["timeout_seconds"]) == (3, 300.0)
    assert job["next_fire_at"] == "2027-03-20T01:30:00+00:00"


def test_a_bad_cron_shows_its_error_beside_the_field(tab: Tab, dashboard: Dashboard) -> None:
    sign_in(tab, dashboard, dashboard.key("write"), "/ui/jobs/new")
    page = tab.page
    _field(tab, "Name").fill("bad-cron")
    _field(tab, "Cron expression").fill("61 * * * *")
    _field(tab, "Handler name").fill("report")
    expect(page.locator("#preview-errors")).to_contain_text(
        "schedule.cron: minute: 61 is out of range 0-59", timeout=TIMEOUT
    )
    expect(page.locator("#preview-table")).to_be_hidden()
    page.get_by_role("button", name="Create job").click()
    error = page.locator("#e-schedule-cron")
    expect(error).to_have_text("minute: 61 is out of range 0-59", timeout=TIMEOUT)
    cron = _field(tab, "Cron expression")
    expect(cron).to_have_attribute("aria-invalid", "true")
    assert "e-schedule-cron" in (cron.get_attribute("aria-describedby") or "")
    expect(page.locator("#flash")).to_contain_text("schedule.cron: minute: 61")
    assert page.url.endswith("/ui/jobs/new")

    # A webhook: JSON that does not parse is caught before the API; the API's errors
    # land beside the nearest field (a header's value, at the headers).
    _field(tab, "Cron expression").fill("0 9 * * *")
    page.get_by_label("Type", exact=True).select_option("webhook")
    _field(tab, "URL").fill("ftp://example.com/hook")
    _field(tab, "Headers (a JSON object)").fill("{not json")
    page.get_by_role("button", name="Create job").click()
    headers_error = page.locator("#e-action-headers")
    expect(headers_error).to_contain_text("is not valid JSON")
    expect(error).to_be_hidden()
    _field(tab, "Headers (a JSON object)").fill('{"X-Id": 5}')
    page.get_by_role("button", name="Create job").click()
    expect(page.locator("#e-action-url")).to_have_text(
        "must be an absolute http:// or https:// URL", timeout=TIMEOUT
    )
    expect(headers_error).to_contain_text("X-Id: ")
    assert dashboard.api.get("/v1/jobs", params={"name": "bad-cron"}).json()["items"] == []
    tab.errors.clear()  # chromium logs the 422 answers (preview and create): expected
    tab.check("bad-cron")


def test_an_edit_after_someone_else_changed_the_job_is_refused_plainly(
    tab: Tab, dashboard: Dashboard
) -> None:
    token = dashboard.key("write")
    job = dashboard.create_job(
        {
            "name": "edited-twice",
            "schedule": {"kind": "interval", "every_seconds": 3600},
            "action": {
                "type": "webhook",
                "url": "https://example.com/h",
                "headers": {"X-Api-Key": "s3cret"},
            },
        }
    )
    sign_in(tab, dashboard, token, f"/ui/jobs/{job['id']}/edit")
    page = tab.page
    expect(_field(tab, "Every (seconds)")).to_have_value("3600")
    expect(page.locator("#preview-rows tr")).to_have_count(10, timeout=TIMEOUT)
    tab.check("edit")
    meanwhile = dashboard.api.patch(
        f"/v1/jobs/{job['id']}", json={"priority": "high"}, headers={"If-Match": "1"}
    )
    assert meanwhile.status_code == 200, meanwhile.text
    _field(tab, "Pool").fill("reports")
    page.get_by_role("button", name="Save changes").click()
    stale = page.locator("#stale")
    expect(stale).to_be_visible(timeout=TIMEOUT)
    expect(stale).to_contain_text("Someone changed this job since this page was loaded")
    expect(page.locator("#flash")).to_contain_text("Someone changed this job")
    assert dashboard.api.get(f"/v1/jobs/{job['id']}").json()["pool"] == "default"
    tab.errors.clear()  # chromium logs the 412 answer: expected
    tab.check("edit-stale")

    stale.get_by_role("link", name="Reload the page").click()
    page.wait_for_load_state("networkidle")
    _field(tab, "Pool").fill("reports")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url(JOB_URL, timeout=TIMEOUT)
    after = dashboard.api.get(f"/v1/jobs/{job['id']}").json()
    assert (after["pool"], after["priority"], after["version"]) == ("reports", "high", 3)
    # The action was not sent back masked: a worker still gets the stored secret header.
    trigger = dashboard.api.post(f"/v1/jobs/{job['id']}/trigger")
    assert trigger.status_code == 201, trigger.text
    claimed = dashboard.api.post(
        "/v1/workers/claim", json={"worker_id": "peek", "pools": ["reports"]}
    ).json()["runs"]
    assert [c["action"]["headers"] for c in claimed] == [{"X-Api-Key": "s3cret"}]


def test_a_read_key_gets_no_form(tab: Tab, dashboard: Dashboard) -> None:
    job = dashboard.create_job(
        {
            "name": "read-only-form",
            "schedule": {"kind": "manual"},
            "action": {"type": "handler", "name": "noop"},
        }
    )
    sign_in(tab, dashboard, dashboard.key("read"), "/ui/jobs/new")
    page = tab.page
    for path in ("/ui/jobs/new", f"/ui/jobs/{job['id']}/edit"):
        response = tab.goto(f"{dashboard.url}{path}")
        assert response.status == 403
        assert page.locator("#jobform").count() == 0
        assert page.get_by_role("button", name=re.compile("Create job|Save changes")).count() == 0
        expect(page.locator("main")).to_contain_text("sign in with a write or admin key")
    tab.errors.clear()  # chromium logs the 403 answer: expected
    tab.check("read-key")


def test_the_form_fits_a_phone(phone_tab: Tab, dashboard: Dashboard) -> None:
    sign_in(phone_tab, dashboard, dashboard.key("write"), "/ui/jobs/new")
    _field(phone_tab, "Cron expression").fill("*/5 9-17 * * MON-FRI")
    expect(phone_tab.page.locator("#preview-rows tr")).to_have_count(10, timeout=TIMEOUT)
    width = phone_tab.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    phone_tab.check("new-job-phone")
