"""Signing in and out, what each role sees, and changes that did not come from our pages."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from playwright.sync_api import expect

from tests.browser.conftest import ADMIN_TOKEN, Dashboard, Tab, sign_in

FORGE = """async ([url, csrf]) => {
  const headers = {"Content-Type": "application/json"};
  if (csrf !== null) headers["X-CSRF-Token"] = csrf;
  const r = await fetch(url, {method: "POST", headers, body: "{}", credentials: "same-origin"});
  return [r.status, await r.text()];
}"""


def test_sign_in_shows_the_overview_and_the_keys_tenant(tab: Tab, dashboard: Dashboard) -> None:
    sign_in(tab, dashboard, ADMIN_TOKEN)
    page = tab.page
    assert page.get_by_role("heading", level=1).inner_text() == "Overview"
    assert "tenant default" in page.locator(".who").inner_text()
    nav = page.get_by_role("navigation", name="Main").inner_text()
    assert "Tenants & keys" in nav  # an admin's navigation
    tab.check("overview")


def test_a_wrong_key_is_refused_with_a_message(tab: Tab, dashboard: Dashboard) -> None:
    tab.goto(f"{dashboard.url}/ui/?from=test")
    assert "next=/ui/%3Ffrom%3Dtest" in tab.page.url
    tab.page.get_by_label("API key").fill("cw_nope_notakey")
    tab.page.get_by_role("button", name="Sign in").click()
    tab.page.wait_for_load_state("networkidle")
    assert "unknown or revoked" in tab.page.get_by_role("alert").first.inner_text()
    assert "/ui/signin" in tab.page.url
    tab.errors.clear()  # the 401 answer of the form post is logged by chromium: expected
    tab.check("signin-refused")


def test_sign_out_forgets_the_key(tab: Tab, dashboard: Dashboard) -> None:
    sign_in(tab, dashboard, dashboard.key("read"))
    tab.page.get_by_role("button", name="Sign out").click()
    tab.page.wait_for_load_state("networkidle")
    assert "/ui/signin" in tab.page.url
    tab.goto(f"{dashboard.url}/ui/")
    assert "/ui/signin" in tab.page.url
    assert not [c for c in tab.page.context.cookies() if c["name"] == "cronwheel_session"]


def test_the_session_cookie_is_http_only_and_strict(tab: Tab, dashboard: Dashboard) -> None:
    sign_in(tab, dashboard, dashboard.key("read"))
    [cookie] = [c for c in tab.page.context.cookies() if c["name"] == "cronwheel_session"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert tab.page.evaluate("document.cookie") == ""  # no script can read the key


def _forge(tab: Tab, url: str, csrf: str | None) -> Any:
    return tab.page.evaluate(FORGE, [url, csrf])


def test_a_change_without_the_pages_token_is_refused(tab: Tab, dashboard: Dashboard) -> None:
    token = dashboard.key("write")
    job = dashboard.create_job(
        {
            "name": "forgery-target",
            "schedule": {"kind": "manual"},
            "action": {"type": "handler", "name": "noop"},
        }
    )
    sign_in(tab, dashboard, token)
    status, body = _forge(tab, f"/v1/jobs/{job['id']}/pause", None)
    assert status == 403 and "X-CSRF-Token" in body
    status, _ = _forge(tab, f"/v1/jobs/{job['id']}/pause", "0" * 64)
    assert status == 403
    assert dashboard.api.get(f"/v1/jobs/{job['id']}").json()["state"] == "active"
    csrf = tab.page.locator('meta[name="csrf-token"]').get_attribute("content")
    status, body = _forge(tab, f"/v1/jobs/{job['id']}/pause", csrf)
    assert status == 200, body  # the page's own token: the write key may pause
    assert dashboard.api.get(f"/v1/jobs/{job['id']}").json()["state"] == "paused"


def test_a_read_key_cannot_change_anything_even_with_the_token(
    tab: Tab, dashboard: Dashboard
) -> None:
    job = dashboard.create_job(
        {
            "name": "read-only-target",
            "schedule": {"kind": "manual"},
            "action": {"type": "handler", "name": "noop"},
        }
    )
    sign_in(tab, dashboard, dashboard.key("read"))
    csrf = tab.page.locator('meta[name="csrf-token"]').get_attribute("content")
    status, body = _forge(tab, f"/v1/jobs/{job['id']}/pause", csrf)
    assert status == 403 and "read key" in body
    nav = tab.page.get_by_role("navigation", name="Main").inner_text()
    assert "Tenants & keys" not in nav


def test_the_dev_dashboard_is_open_on_loopback(tab: Tab, open_dashboard: Dashboard) -> None:
    tab.goto(f"{open_dashboard.url}/ui")
    assert tab.page.url.endswith("/ui/")
    assert tab.page.get_by_role("heading", level=1).inner_text() == "Overview"
    assert tab.page.get_by_role("button", name="Sign out").count() == 0
    tab.check("open-overview")


def test_the_overview_fits_a_phone(phone_tab: Tab, dashboard: Dashboard) -> None:
    sign_in(phone_tab, dashboard, ADMIN_TOKEN)
    width = phone_tab.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    phone_tab.check("overview-phone")


def test_times_show_in_the_browsers_zone_with_utc_on_hover(tab: Tab, dashboard: Dashboard) -> None:
    job = dashboard.create_job(
        {
            "name": "zone-shown",
            "schedule": {"kind": "manual"},
            "action": {"type": "handler", "name": "noop"},
        }
    )
    sign_in(tab, dashboard, ADMIN_TOKEN, f"/ui/jobs/{job['id']}")
    shown = tab.page.locator("time[datetime]").first
    iso = shown.get_attribute("datetime")
    instant = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    local = instant.astimezone(ZoneInfo("Europe/Paris"))  # the tab's zone (conftest)
    assert shown.inner_text().startswith(local.strftime("%Y-%m-%d %H:%M:%S"))
    assert shown.get_attribute("title") == instant.strftime("%Y-%m-%d %H:%M:%S UTC")


def test_the_keyboard_reaches_the_content_and_the_actions(tab: Tab, dashboard: Dashboard) -> None:
    job = dashboard.create_job(
        {
            "name": "by-keyboard",
            "schedule": {"kind": "manual"},
            "action": {"type": "handler", "name": "noop"},
        }
    )
    sign_in(tab, dashboard, dashboard.key("write"), f"/ui/jobs/{job['id']}")
    page = tab.page
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    for _ in range(80):  # from the content on, Tab reaches the job's buttons
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent") == "Pause":
            break
    else:
        raise AssertionError("Tab never reached the Pause button")
    page.keyboard.press("Enter")
    page.wait_for_load_state("networkidle")
    expect(page.get_by_role("button", name="Resume", exact=True)).to_be_visible(timeout=15_000)
    assert dashboard.api.get(f"/v1/jobs/{job['id']}").json()["state"] == "paused"
