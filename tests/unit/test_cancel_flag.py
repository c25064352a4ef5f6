"""The cancellation flag handlers see: set from the worker, read or waited on in a thread."""

from __future__ import annotations

import asyncio
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


async def test_an_awaiting_handler_resumes_when_the_loop_sets_the_flag() -> None:
    flag = CancelFlag()
    waiter = asyncio.ensure_future(_await(flag))
    await asyncio.sleep(0)  # the waiter is parked on the flag now
    assert not waiter.done()
    flag.set()
    assert await asyncio.wait_for(waiter, 30) == "woken"


async def test_an_awaiting_handler_resumes_when_another_thread_sets_the_flag() -> None:
    flag = CancelFlag()
    waiter = asyncio.ensure_future(_await(flag))
    await asyncio.sleep(0)
    thread = threading.Thread(target=flag.set)
    thread.start()
    assert await asyncio.wait_for(waiter, 30) == "woken"
    thread.join(30)


async def test_awaiting_a_set_flag_returns_at_once_and_twice_is_fine() -> None:
    flag = CancelFlag()
    flag.set()
    assert await _await(flag) == "woken"
    assert await _await(flag) == "woken"


async def _await(flag: CancelFlag) -> str:
    await flag
    return "woken"
