"""What every peer adapter shares: versions, the W5 answer, spread of instants."""

from __future__ import annotations

import sys
from importlib.metadata import version

from lib.adapter import Args, Result, not_expressible

W5_REASON = (
    "schedules are declared in code (decorators / a config dict) that every scheduler"
    " process loads at start; there is no API to create a job as data, so 1,000,000 jobs"
    " at rest and a bulk-create rate have no equivalent"
)


def w5(args: Args) -> Result:
    return not_expressible(W5_REASON, "schedules live in code, not data")


def versions(*packages: str) -> Result:
    found = {p: version(p) for p in packages}
    return {"versions": found | {"python": sys.version.split()[0]}}
