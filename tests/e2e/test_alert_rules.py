"""The shipped alert rules pass their unit tests: ``promtool test rules`` over
examples/observability/alerts.test.yml, which covers every alert of alerts.yml.

promtool comes with Debian's ``prometheus`` package (``.ci/run`` installs it when it is
missing). In CI (``CI=true``) a missing promtool fails the test; elsewhere it skips."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from tests.e2e.procs import REPO

EXAMPLES = REPO / "examples" / "observability"
INSTALL = "install it with `apt-get install prometheus` (Debian's package has promtool)"


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"promtool is missing; CI requires the alert rules' tests: {INSTALL}")
        pytest.skip(f"promtool is missing: {INSTALL}")
    return found


def _alerts() -> set[str]:
    document = yaml.safe_load((EXAMPLES / "alerts.yml").read_text())
    return {rule["alert"] for group in document["groups"] for rule in group["rules"]}


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    document = yaml.safe_load((EXAMPLES / "alerts.test.yml").read_text())
    assert document["rule_files"] == ["alerts.yml"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for test in document["tests"]:
        for case in test["alert_rule_test"]:
            (firing if case["exp_alerts"] else quiet).add(case["alertname"])
    assert firing == _alerts()
    assert quiet == _alerts()


def test_promtool_passes_the_alert_rules_unit_tests() -> None:
    promtool = _promtool()
    checked = subprocess.run(
        [promtool, "check", "rules", "alerts.yml"],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", "alerts.test.yml"],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
