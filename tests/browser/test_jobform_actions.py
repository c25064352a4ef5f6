"""Command and publish jobs made through the dashboard's form (decision 0053): the command
line split into argv by the rule the CLI's --command follows, shown as it is typed; the
API's refusals (a command no live worker allows, a broker none names, PATH in env) beside
their fields; the job the API then holds."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Dashboard, Tab, sign_in
from tests.e2e.procs import wait_until

JOB_URL = re.compile(r"/ui/jobs/([0-9a-f-]{36})$")
TIMEOUT = 15_000

dev_options = ["--allow-command", "df", "--broker", "events=nats://127.0.0.1:4222"]
"""The dashboard's ``cronwheel dev`` (tests/browser/conftest.py): its worker, of pool
``default``, runs ``df`` and names the broker ``events``."""


def _field(tab: Tab, label: str) -> Any:
    return tab.page.get_by_label(label, exact=True)


def _new_form(tab: Tab, dashboard: Dashboard, name: str, action_type: str) -> None:
    # The API refuses a command or a broker only for a pool a live worker serves (a pool
    # no worker serves is not refused: its runs wait); the dev process's worker announces
    # itself after its API answers, later on a busy machine (a CI run saw a refusal the
    # test expected accepted).
    wait_until(
        "the dev process's worker is live",
        lambda: dashboard.api.get("/v1/workers").json()["items"],
        60,
        [dashboard.log],
    )
    sign_in(tab, dashboard, dashboard.key("write"), "/ui/jobs/new")
    _field(tab, "Name").fill(name)
    _field(tab, "Kind").select_option("manual")
    _field(tab, "Type").select_option(action_type)


def _create(tab: Tab, dashboard: Dashboard) -> dict[str, Any]:
    tab.page.get_by_role("button", name="Create job").click()
    tab.page.wait_for_url(JOB_URL, timeout=TIMEOUT)
    found = JOB_URL.search(tab.page.url)
    assert found is not None
    job: dict[str, Any] = dashboard.api.get(f"/v1/jobs/{found.group(1)}").json()
    return job


def test_a_command_job_is_created_through_the_form_and_runs(tab: Tab, dashboard: Dashboard) -> None:
    _new_form(tab, dashboard, "disk-usage", "command")
    page = tab.page
    _field(tab, "Command line").fill("df -P '/'")
    # The words the line makes, as the dashboard split them (the CLI's rule).
    expect(page.locator("#argv-words")).to_have_text('argv: ["df","-P","/"]', timeout=TIMEOUT)
    _field(tab, "Environment (NAME=VALUE, one a line)").fill("LANGUAGE=C\nAPI_TOKEN=s3cr=et\n")
    _field(tab, "Directory").fill("/tmp")
    _field(tab, "Command timeout (seconds)").fill("60")
    _field(tab, "Exit codes no retry fixes").fill("2 64")
    tab.check("new-command")
    job = _create(tab, dashboard)
    assert job["action"] == {
        "type": "command",
        "argv": ["df", "-P", "/"],
        "env": {"LANGUAGE": "C", "API_TOKEN": "***"},
        "cwd": "/tmp",
        "timeout_seconds": 60.0,
        "permanent_exit_codes": [2, 64],
    }
    assert job["timeout_seconds"] == 60.0  # the command's, as the job gives none

    # The dev worker allows df: a triggered run succeeds, its output kept.
    run = dashboard.api.post(f"/v1/jobs/{job['id']}/trigger").json()

    def done() -> bool:
        return dashboard.api.get(f"/v1/runs/{run['id']}").json()["state"] == "succeeded"

    wait_until("the command run succeeds", done, 60, [dashboard.log])

    # Its edit page writes the argv back as a line that splits to the same words, and
    # the secret variable masked.
    tab.goto(f"{dashboard.url}/ui/jobs/{job['id']}/edit")
    expect(_field(tab, "Command line")).to_have_value("df -P /")
    expect(_field(tab, "Environment (NAME=VALUE, one a line)")).to_have_value(
        "LANGUAGE=C\nAPI_TOKEN=***"
    )
    assert "s3cr=et" not in page.content()
    tab.check("edit-command")

    # A masked secret is kept for the same command line only (decision 0048): pointed at
    # another line, the form must be given it again, and says so beside the variables.
    _field(tab, "Command line").fill("df -P /tmp")
    expect(page.locator("#argv-words")).to_have_text('argv: ["df","-P","/tmp"]', timeout=TIMEOUT)
    page.get_by_role("button", name="Save changes").click()
    env_error = page.locator("#e-action-env")
    expect(env_error).to_contain_text("API_TOKEN", timeout=TIMEOUT)
    tab.errors.clear()  # chromium logs the 422 answer: expected
    _field(tab, "Environment (NAME=VALUE, one a line)").fill("LANGUAGE=C\nAPI_TOKEN=n3w")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url(JOB_URL, timeout=TIMEOUT)
    after = dashboard.api.get(f"/v1/jobs/{job['id']}").json()
    assert after["action"]["argv"] == ["df", "-P", "/tmp"]
    assert after["action"]["env"] == {"LANGUAGE": "C", "API_TOKEN": "***"}
    assert after["version"] == 2


def test_a_command_the_form_or_the_api_refuses_is_shown_beside_its_field(
    tab: Tab, dashboard: Dashboard
) -> None:
    _new_form(tab, dashboard, "refused-command", "command")
    page = tab.page
    line = _field(tab, "Command line")
    argv_error = page.locator("#e-action-argv")
    # A shell's pipe, which no shell would see: refused before the API, with the way out.
    line.fill("df -P / | tail -1")
    page.get_by_role("button", name="Create job").click()
    expect(argv_error).to_contain_text("'|' is shell syntax", timeout=TIMEOUT)
    expect(argv_error).to_contain_text("sh -c 'df -P / | tail -1'")
    expect(line).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#argv-words")).to_have_text("")

    # What only the API knows: PATH is the operator's...
    line.fill("df -P /")
    env = _field(tab, "Environment (NAME=VALUE, one a line)")
    env.fill("PATH=/tmp/evil")
    page.get_by_role("button", name="Create job").click()
    expect(page.locator("#e-action-env")).to_contain_text("PATH", timeout=TIMEOUT)
    expect(argv_error).to_be_hidden()
    # ... and the live worker of the pool allows df, not rm.
    env.fill("")
    line.fill("rm -rf /tmp/nothing-here")
    page.get_by_role("button", name="Create job").click()
    expect(argv_error).to_contain_text(
        "no live worker of pool 'default' would run 'rm'", timeout=TIMEOUT
    )
    expect(page.locator("#e-action-env")).to_be_hidden()
    # An env line that is not NAME=VALUE is caught before the API.
    env.fill("JUST_A_NAME")
    page.get_by_role("button", name="Create job").click()
    expect(page.locator("#e-action-env")).to_contain_text('"JUST_A_NAME": expected NAME=VALUE')
    listed = dashboard.api.get("/v1/jobs", params={"name": "refused-command"}).json()
    assert listed["items"] == []
    tab.errors.clear()  # chromium logs the 422 answers: expected
    tab.check("refused-command")


def test_a_publish_job_is_created_through_the_form(tab: Tab, dashboard: Dashboard) -> None:
    _new_form(tab, dashboard, "order-created", "publish")
    page = tab.page
    _field(tab, "Broker").fill("nope")
    _field(tab, "To").fill("orders.created")
    page.get_by_role("button", name="Create job").click()
    # The live worker of the pool names the broker "events", not "nope".
    broker_error = page.locator("#e-action-broker")
    expect(broker_error).to_contain_text(
        "no live worker of pool 'default' names a broker 'nope' (they name: events)",
        timeout=TIMEOUT,
    )
    _field(tab, "Broker").fill("events")
    _field(tab, "To").fill("orders.*")
    page.get_by_role("button", name="Create job").click()
    expect(page.locator("#e-action-to")).to_contain_text("no wildcard", timeout=TIMEOUT)
    expect(broker_error).to_be_hidden()
    tab.errors.clear()  # chromium logs the 422 answers: expected

    _field(tab, "To").fill("orders.created")
    _field(tab, "Body (JSON, optional)").fill('{"order": 42}')
    tab.check("new-publish")
    job = _create(tab, dashboard)
    assert job["action"] == {
        "type": "publish",
        "broker": "events",
        "to": "orders.created",
        "body": {"order": 42},
    }


def test_the_command_fields_fit_a_phone(phone_tab: Tab, dashboard: Dashboard) -> None:
    _new_form(phone_tab, dashboard, "phone-command", "command")
    long_line = "df " + " ".join(f"/srv/volumes/volume-{i:03d}/data" for i in range(12))
    _field(phone_tab, "Command line").fill(long_line)
    expect(phone_tab.page.locator("#argv-words")).to_contain_text("volume-011", timeout=TIMEOUT)
    width = phone_tab.page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width} px wide on a 390 px screen"
    phone_tab.check("new-command-phone")
