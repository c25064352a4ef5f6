"""How far ahead the scheduler materialises runs: its horizon, stretched for a herd.

The horizon (2 s by default) is enough for the runs of an ordinary tick, but not for a
herd: 10,000 jobs due at one instant take seconds to materialise, batch after batch, and
a 2 s lead lets the last batches start late. So before each tick the scheduler counts the
jobs due within ``max_lead`` and, from the pace it has measured on its own batches,
works out how long they would take to materialise; it starts that much earlier (twice
that, for safety), never more than ``max_lead`` ahead. Decision 0009 records why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SAFETY = 2.0
"""The lead covers twice the time the herd is expected to take: the pace is measured
while the machine does other work too, and a worker shares it in the embedded shape."""

MIN_SAMPLE = 100
"""Batches smaller than this are not measured: their fixed cost per round trip would
pass for a cost per job and make every future herd look slower than it is."""

WEIGHT = 0.3
"""The weight of the newest measurement in the moving average."""

DEFAULT_SECONDS_PER_JOB = 0.0005
"""The pace assumed before any batch was measured: 2,000 jobs/s, slower than measured
on a slow machine (SQLite, 3,300 jobs/s), so the first herd is not late either."""


@dataclass(slots=True)
class Pace:
    """The scheduler's measured cost per job (fetch, plan and write), a moving average."""

    seconds_per_job: float = DEFAULT_SECONDS_PER_JOB

    def observe(self, jobs: int, seconds: float) -> None:
        """Add one batch's measurement: ``jobs`` materialised in ``seconds``."""
        if jobs < MIN_SAMPLE or seconds <= 0:
            return
        sample = seconds / jobs
        self.seconds_per_job += WEIGHT * (sample - self.seconds_per_job)

    def lead(self, due: int, *, horizon: float, max_lead: float) -> float:
        """Seconds ahead to materialise when ``due`` jobs fall due within ``max_lead``:
        at least ``horizon``, plus the time they take (with the safety factor), at most
        ``max_lead``."""
        return min(horizon + SAFETY * due * self.seconds_per_job, max_lead)

    def count_limit(self, *, horizon: float, max_lead: float) -> int:
        """The number of due jobs past which :meth:`lead` is ``max_lead`` anyway: no
        count needs to go further."""
        if max_lead <= horizon:
            return 0
        return math.ceil((max_lead - horizon) / (SAFETY * self.seconds_per_job)) + 1
