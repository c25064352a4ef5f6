"""The cancellation flag handlers see: set from the worker, read or waited on in a thread."""

from __future__ import annotations

import threading

from cronwheel.actions import CancelFlag


def test_set_is_seen_and_wait_returns_at_once_afterwards() -> None:
    flag = CancelFlag()
    assert not flag.is_set()
    assert flag.wait(0.01) is False
    flag.set()
    assert flag.is_set() and flag.wait() is True


def test_a_waiting_thread_is_woken_by_set() -> None:
    flag = CancelFlag()
    woke = threading.Event()
    started = threading.Event()

    def waiter() -> None:
        started.set()
        if flag.wait(30):
            woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    started.wait(30)
    flag.set()
    thread.join(30)
    assert woke.is_set()
