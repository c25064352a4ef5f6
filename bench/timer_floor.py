"""The floor under W3: how late a bare asyncio timer fires on this machine.

W3's schedule (2,000 instants, 10 ms apart) on an idle event loop that does nothing but
record ``time.time()`` when each ``loop.call_at`` callback runs, measured against the
same wall clock W3 uses. No store, no other process: what is left is the loop's own
rounding (``epoll_wait`` takes whole milliseconds, rounded up) and the machine's
scheduling jitter. Measured twice: on asyncio's stock loop (which rounds some waits up
twice) and on ``cronwheel.engine.eventloop``'s (once), which cronwheel's processes run on. A
scheduler's W3 percentiles cannot be much below the second.

    python bench/timer_floor.py            # 2,000 timers over 20 s, like W3
    python bench/timer_floor.py --n 100    # quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from cronwheel.engine import eventloop

from lib.stats import lag_summary


async def measure(n: int, spacing: float) -> dict[str, float | int | None]:
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    done = asyncio.Event()

    def fired(instant: float) -> None:
        lags.append(time.time() - instant)
        if len(lags) == n:
            done.set()

    offset = time.time() - loop.time()  # one reading: wall instants onto the loop's clock
    start_wall = time.time() + 1.0
    for i in range(n):
        instant = start_wall + i * spacing
        loop.call_at(instant - offset, fired, instant)
    await done.wait()
    return lag_summary(lags)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--spacing", type=float, default=0.01, help="seconds between instants")
    a = p.parse_args()
    stock = asyncio.run(measure(a.n, a.spacing))
    ours = eventloop.run(measure(a.n, a.spacing))
    print(json.dumps({"asyncio's loop": stock, "cronwheel.eventloop": ours}))


if __name__ == "__main__":
    main()
