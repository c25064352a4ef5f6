"""Tenants and keys: a system admin creates a tenant and a key for it (the token shown
once), revokes it; a tenant admin sees only their tenant; other roles are refused."""

from __future__ import annotations

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import ADMIN_TOKEN, Dashboard, Tab, sign_in

WAIT = 15_000


def _api_status(dashboard: Dashboard, token: str) -> int:
    """What the API answers a read with ``token`` (200, or 401 once it is revoked)."""
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.get(f"{dashboard.url}/v1/jobs", headers=headers, timeout=10).status_code


def test_a_system_admin_creates_a_tenant_and_a_key_shown_once(
    tab: Tab, dashboard: Dashboard
) -> None:
    page = tab.page
    sign_in(tab, dashboard, ADMIN_TOKEN, "/ui/admin")
    expect(page.get_by_role("heading", level=1)).to_have_text("Tenants & keys")
    expect(page.get_by_role("row", name="default")).to_be_visible()
    tab.check("tenants")

    # A negative quota: the API's reason next to the field, and nothing created.
    form = page.locator("#tenant-create")
    form.get_by_label("Tenant id").fill("acme")
    form.get_by_label("Name").fill("Acme Corp")
    form.get_by_label("Max live jobs").fill("-3")
    form.get_by_role("button", name="Create tenant").click()
    error = page.locator("#tenant-create-max_jobs-error")
    expect(error).to_contain_text("greater than or equal to 0", timeout=WAIT)
    expect(form.get_by_label("Max live jobs")).to_have_attribute("aria-invalid", "true")
    assert dashboard.api.get("/v1/tenants/acme").status_code == 404
    expect(page.locator("#flash")).to_have_text(
        "Nothing was saved: a field needs a fix (marked below)."
    )

    # An id in use: the conflict is shown at the id.
    form.get_by_label("Tenant id").fill("default")
    form.get_by_label("Max live jobs").fill("50")
    form.get_by_role("button", name="Create tenant").click()
    expect(page.locator("#tenant-create-id-error")).to_contain_text("exists", timeout=WAIT)
    expect(error).to_be_hidden()
    form.get_by_label("Tenant id").fill("acme")
    tab.errors.clear()  # chromium logs the 422 answer: expected
    tab.check("tenant-invalid")

    form.get_by_label("Max job creations per second").fill("2.5")
    form.get_by_role("button", name="Create tenant").click()
    page.wait_for_url("**/ui/admin/tenants/acme", timeout=WAIT)
    tenant = dashboard.api.get("/v1/tenants/acme").json()
    assert (tenant["name"], tenant["max_jobs"], tenant["max_creates_per_second"]) == (
        "Acme Corp",
        50,
        2.5,
    )
    expect(page.get_by_text("This tenant has no API key yet")).to_be_visible()

    # A quota changed from the page.
    edit = page.locator("#tenant-edit")
    edit.get_by_label("Max live jobs").fill("")
    edit.get_by_role("button", name="Save quotas").click()
    expect(page.locator("dl.facts")).to_contain_text("(no limit)", timeout=WAIT)
    assert dashboard.api.get("/v1/tenants/acme").json()["max_jobs"] is None

    # A write key for the tenant: its token once, in the dialog.
    create = page.locator("#key-create")
    create.get_by_label("Name").fill("billing service")
    create.get_by_label("Role").select_option("write")
    create.get_by_role("button", name="Create key").click()
    dialog = page.get_by_role("dialog", name="Key created: copy its token now")
    expect(dialog).to_be_visible(timeout=WAIT)
    expect(dialog).to_contain_text("You will not see this token again")
    token = page.locator("#new-key-token").inner_text()
    assert token.startswith("cw_")
    assert token not in page.url
    dialog.get_by_role("button", name="Copy token").click()
    expect(page.locator("#new-key-copied")).not_to_be_empty()
    # Without a clipboard (plain http on another host): no error, the token is selected.
    page.evaluate("Object.defineProperty(navigator, 'clipboard', {value: undefined})")
    dialog.get_by_role("button", name="Copy token").click()
    expect(page.locator("#new-key-copied")).to_contain_text("copy it by hand")
    assert page.evaluate("String(window.getSelection())") == token
    tab.check("new-key")
    assert _api_status(dashboard, token) == 200
    [key] = dashboard.api.get("/v1/keys", params={"tenant_id": "acme"}).json()["items"]
    assert (key["name"], key["role"], key["tenant_id"]) == ("billing service", "write", "acme")

    dialog.get_by_role("button", name="Done").click()
    row = page.get_by_role("row", name="billing service")
    expect(row).to_be_visible(timeout=WAIT)
    page.reload()
    expect(row).to_be_visible()
    assert token not in page.content()
    assert token not in page.url
    tab.check("tenant")

    # Revoked from the page (after confirming): the API refuses the token at once.
    page.once("dialog", lambda d: d.accept())
    row.get_by_role("button", name="Revoke key billing service").click()
    expect(row.locator(".s-revoked")).to_have_text("revoked", timeout=WAIT)
    assert _api_status(dashboard, token) == 401
    expect(row.get_by_role("button")).to_have_count(0)


def test_a_tenant_admin_sees_only_their_tenant(tab: Tab, dashboard: Dashboard) -> None:
    page = tab.page
    sign_in(tab, dashboard, dashboard.key("admin", tenant="t2"), "/ui/admin")
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("t2")
    expect(page.locator("#tenant-create")).to_have_count(0)  # only a system admin creates
    tab.check("tenant-admin")

    rows.first.get_by_role("link", name="t2").click()
    page.wait_for_url("**/ui/admin/tenants/t2")
    expect(page.get_by_role("row", name="admin key you")).to_be_visible()
    expect(page.locator("#tenant-edit")).to_have_count(0)  # quotas: a system admin's
    expect(page.locator("#key-create")).to_be_visible()
    tab.check("tenant-admin-tenant")

    for other in ("default", "acme", "no-such-tenant"):
        response = tab.goto(f"{dashboard.url}/ui/admin/tenants/{other}")
        assert response.status == 404, other
        expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    tab.errors.clear()  # chromium logs the 404 answers: expected
    tab.check("tenant-admin-other")


def test_write_and_read_keys_are_not_admins(tab: Tab, dashboard: Dashboard) -> None:
    page = tab.page
    for role in ("write", "read"):
        page.context.clear_cookies()
        sign_in(tab, dashboard, dashboard.key(role))
        nav = page.get_by_role("navigation", name="Main")
        expect(nav).to_be_visible()
        expect(nav.get_by_role("link", name="Tenants & keys")).to_have_count(0)
        for path in ("/ui/admin", "/ui/admin/tenants/default"):
            response = tab.goto(f"{dashboard.url}{path}")
            assert response.status == 403, (role, path)
            expect(page.get_by_role("heading", level=1)).to_have_text("Not allowed")
            expect(page.locator("main")).to_contain_text(f"this is a {role} key")
    tab.errors.clear()  # chromium logs the 403 answers: expected
    tab.check("not-admin")


def test_the_tenant_page_fits_a_phone(phone_tab: Tab, dashboard: Dashboard) -> None:
    sign_in(phone_tab, dashboard, ADMIN_TOKEN, "/ui/admin/tenants/default")
    expect(phone_tab.page.get_by_role("heading", level=1)).to_have_text("Tenant default")
    width = phone_tab.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    phone_tab.check("tenant-phone")
