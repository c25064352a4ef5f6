"""An outage is logged once, backs off, and its end is logged."""

from __future__ import annotations

import logging

import pytest

from cronwheel.engine._outage import Outage


def test_one_line_per_outage_and_exponential_backoff(caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage(logging.getLogger("t"), "claim", first_delay=0.1, max_delay=0.5)
    with caplog.at_level(logging.WARNING):
        delays = [outage.failed(ConnectionError("down")) for _ in range(5)]
        assert outage.ongoing
        outage.ok()
        outage.ok()
    assert delays == [0.1, 0.2, 0.4, 0.5, 0.5]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert messages[0].startswith("claim failed")
    assert "works again" in messages[1] and "5 failed tries" in messages[1]
    assert not outage.ongoing and outage.failed(OSError()) == 0.1
