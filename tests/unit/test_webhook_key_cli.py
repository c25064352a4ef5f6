"""``cronwheel webhook-key``: a tenant's signing key, derived locally from the secret."""

from __future__ import annotations

from click.testing import CliRunner

from cronwheel.cli import main
from cronwheel.security.signing import tenant_key


def test_it_prints_the_key_the_workers_sign_the_tenants_webhooks_with() -> None:
    env = {"CRONWHEEL_WEBHOOK_SECRET": "the operator's secret"}
    result = CliRunner().invoke(main, ["webhook-key", "acme"], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == tenant_key(b"the operator's secret", "acme").hex()


def test_without_the_secret_it_says_what_to_set() -> None:
    result = CliRunner().invoke(main, ["webhook-key", "acme"], env={"CRONWHEEL_WEBHOOK_SECRET": ""})
    assert result.exit_code == 2
    assert "CRONWHEEL_WEBHOOK_SECRET is not set" in result.output
