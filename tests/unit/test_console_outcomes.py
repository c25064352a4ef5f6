"""Every attempt outcome has its word in the console: a PermanentError in
``cronwheel dev`` once stopped the whole process with a KeyError."""

from __future__ import annotations

from cronwheel.console.lines import _OUTCOME, STYLE
from cronwheel.core.model import AttemptOutcome


def test_every_attempt_outcome_has_a_console_word_and_style() -> None:
    assert set(_OUTCOME) == set(AttemptOutcome)
    assert all(word in STYLE for word in _OUTCOME.values())
    assert _OUTCOME[AttemptOutcome.PERMANENT] == "failed permanently"
