"""Job ids: UUIDv7 strings, strictly increasing within a process, one or many at a time."""

from __future__ import annotations

import uuid

import pytest

from cronwheel.core import model
from cronwheel.core.model import new_id, new_ids


def _check(ids: list[str]) -> None:
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text  # lowercase, hyphenated: the form the stores read back
        assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)


def test_ids_one_or_many_at_a_time_keep_increasing() -> None:
    ids = [new_id(), *new_ids(5000), new_id(), *new_ids(1), *new_ids(0), new_id()]
    assert len(ids) == 5004
    _check(ids)


def test_a_millisecond_holds_4096_ids_then_the_next_one_is_borrowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stopped = 1_900_000_000_000  # ms: the clock stands still
    monkeypatch.setattr(model.time, "time_ns", lambda: stopped * 1_000_000)
    monkeypatch.setattr(model, "_last_seq", 0)
    ids = [*new_ids(4096), new_id()]
    _check(ids)
    stamps = [uuid.UUID(i).int >> 80 for i in ids]
    counters = [uuid.UUID(i).int >> 64 & 0xFFF for i in ids]
    assert stamps[:4096] == [stopped] * 4096 and counters[:4096] == list(range(4096))
    assert (stamps[4096], counters[4096]) == (stopped + 1, 0)


def test_the_random_part_differs() -> None:
    tails = {i[-12:] for i in new_ids(1000)}
    assert len(tails) == 1000
