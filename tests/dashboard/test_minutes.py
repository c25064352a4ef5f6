"""The overview's hour read a minute at a time: settled minutes are read once, and the
answer is the same as reading the whole window every time (both stores)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from cronwheel.dashboard.minutes import SettledMinutes
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at
from cronwheel.store.conformance.history.history import FAIL, OK, _finish


def _key(buckets: Any) -> list[tuple[str, int, int, int]]:
    return sorted((b.pool, b.bucket, b.finished, b.failures) for b in buckets)


def _watch(store: Store) -> list[datetime]:
    """The ``since`` of every attempt_history call on ``store``."""
    seen: list[datetime] = []
    original = store.attempt_history

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["since"])
        return await original(*args, **kwargs)

    store.attempt_history = wrapper  # type: ignore[method-assign]
    return seen


async def test_settled_minutes_are_read_once_and_the_answer_stays_whole(store: Store) -> None:
    await _finish(store, "default", "email", [(30, OK), (90, FAIL), (150, OK), (400, OK)])
    calls = _watch(store)
    minutes = SettledMinutes()

    async def both(now: datetime) -> tuple[Any, Any]:
        cached = await minutes.read(store, "default", since=at(0), now=now)
        calls.pop()  # the reference read below is not the cache's
        whole = await store.attempt_history("default", since=at(0), now=now, bucket_seconds=60)
        calls.pop()
        return _key(cached), _key(whole)

    cached, whole = await both(at(200))
    assert cached == whole and len(whole) == 3
    first = await minutes.read(store, "default", since=at(0), now=at(200))
    # Minutes 0 and 1 ended more than a minute before 200 s: only minute 2 on is read again.
    assert calls[-1] == at(120) and _key(first) == whole
    cached, whole = await both(at(420))
    assert cached == whole and sum(b[2] for b in whole) == 4
    await minutes.read(store, "default", since=at(0), now=at(420))
    assert calls[-1] == at(360)  # every minute that ended by 360 s is settled, quiet ones too


async def test_an_attempt_written_late_into_an_unsettled_minute_is_counted(store: Store) -> None:
    minutes = SettledMinutes()
    assert await minutes.read(store, "default", since=at(0), now=at(100)) == []
    await _finish(store, "default", "email", [(50, OK)])  # minute 0, written after the read
    later = await minutes.read(store, "default", since=at(0), now=at(110))
    assert [(b.pool, b.bucket, b.finished) for b in later] == [("email", 0, 1)]
