"""How a long-running loop lives through an unreachable store: log once, back off, resume.

A PostgreSQL restart makes every loop fail for a few seconds. Logging each failure would
bury the one line that matters; instead the first failure is logged with its traceback,
the loop retries with exponential backoff, and the recovery is logged with how long the
outage lasted.
"""

from __future__ import annotations

import logging
import time


class Outage:
    def __init__(
        self, log: logging.Logger, what: str, *, first_delay: float = 0.1, max_delay: float = 5.0
    ) -> None:
        self.log = log
        self.what = what
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.delay = first_delay
        self._since: float | None = None
        self.failures = 0

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def failed(self, exc: BaseException) -> float:
        """Record a failure; return how long to wait before the next try."""
        self.failures += 1
        if self._since is None:
            self._since = time.monotonic()
            self.log.warning(
                "%s failed; retrying with backoff until it works again", self.what, exc_info=exc
            )
            self.delay = self.first_delay
        else:
            self.delay = min(self.delay * 2, self.max_delay)
        return self.delay

    def ok(self) -> None:
        """Record a success; log the recovery if there was an outage."""
        if self._since is not None:
            lasted = time.monotonic() - self._since
            self.log.warning(
                "%s works again after %.1f s (%d failed tries)", self.what, lasted, self.failures
            )
            self._since = None
            self.failures = 0
