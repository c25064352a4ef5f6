"""The replication mode ``cronwheel status`` shows (issue 31 item 2, decision 0050), from
the server's settings and its standbys' ``sync_state``."""

from __future__ import annotations

import pytest

from cronwheel.cli.remote.status import replication_text, summary
from cronwheel.core.records import Replication


@pytest.mark.parametrize(
    ("names", "commit", "states", "mode"),
    [
        ("", "on", [], "none"),
        ("", "on", ["async"], "asynchronous"),
        ("standby1", "on", ["sync"], "synchronous"),
        ("ANY 1 (a, b)", "remote_apply", ["quorum", "quorum"], "synchronous"),
        ("FIRST 1 (a, b)", "on", ["sync", "potential"], "synchronous"),
        # the setting says synchronous, the session's commits do not wait
        ("standby1", "local", ["sync"], "asynchronous"),
        ("standby1", "off", [], "none"),
        # synchronous configured, its standby gone: commits hang until it is back
        ("standby1", "on", [], "waiting"),
        ("standby1", "on", ["async"], "waiting"),
    ],
)
def test_the_mode_from_the_settings_and_the_standbys(
    names: str, commit: str, states: list[str], mode: str
) -> None:
    found = Replication.of(names, commit, states)
    assert (found.mode, found.standbys) == (mode, len(states))


def test_status_says_the_mode_beside_the_store() -> None:
    report = {
        "store": {"reachable": True, "answered_in_ms": 1.5, "schema_version": 30, "error": None},
        "replication": {"mode": "synchronous", "standbys": 1, "synchronous_commit": "on"},
        "scope": "system",
        "tenant_id": None,
        "healthy": True,
        "version": "1.0",
        "window_minutes": 5,
        "now": "2030-01-01T00:00:00Z",
    }
    line = summary(report)[1]
    assert "replication: synchronous (1 standby, synchronous_commit=on)" in line
    none = {"mode": "none", "standbys": 0, "synchronous_commit": "on"}
    assert replication_text(none) == "none (no standby)"
    assert "loses" in replication_text({"mode": "asynchronous", "standbys": 2})
