"""``--webhook-allow``: each entry checked before anything starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cronwheel.cli import main


@pytest.mark.parametrize("command", ["worker", "api", "dev"])
def test_a_bad_entry_is_a_usage_error_naming_the_option(command: str) -> None:
    args = [command, "--db", "sqlite:///:memory:", "--webhook-allow", "10.0.0.0/33"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "--webhook-allow" in result.output and "10.0.0.0/33" in result.output
