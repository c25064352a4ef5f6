"""A job as a person names it: its id, the start of its id, or its name.

A whole id is used as it is. Anything else is looked up both ways, by exact name and
by id prefix (``GET /v1/jobs?name=`` and ``?id_prefix=``); a live job of that name wins
over cancelled ones of the same name (cancelled jobs keep their names for the record).
One job found: that one. None: exit 3. Several: exit 2 — the name given does not say
which, so it is bad input — with the candidates listed (see
docs/decisions/0011-naming-jobs-and-tables.md).
"""

from __future__ import annotations

import re
import sys

from cronwheel.cli._logs import fail, say
from cronwheel.core.ids import is_uuid
from cronwheel.observability.logs import json_lines
from cronwheel.sdk import Client, JobInfo

_HEX = re.compile(r"^[0-9a-f-]{1,36}$")
SHOWN = 10
EXIT_NOT_FOUND = 3
EXIT_AMBIGUOUS = 2


def job_id(client: Client, ref: str) -> str:
    """The id of the one job ``ref`` names; exits 3 (none) or 2 (several) otherwise."""
    ref = ref.strip()
    if is_uuid(ref.lower()):
        return ref.lower()
    # Each answer is checked again here: a server older than these filters ignores them
    # and answers with every job, which must not read as "this name is ambiguous".
    named = [j for j in client.list_jobs(name=ref, limit=SHOWN + 1).items if j.name == ref]
    live = [job for job in named if job.state != "cancelled"]
    found = {job.id: job for job in live or named}
    digits = ref.lower().replace("-", "")
    if _HEX.match(ref.lower()) and digits:
        for job in client.list_jobs(id_prefix=ref, limit=SHOWN + 1).items:
            if job.id.replace("-", "").startswith(digits):
                found.setdefault(job.id, job)
    if len(found) == 1:
        return next(iter(found))
    if not found:
        fail(f"no job is named {ref!r} and no job id starts with it", EXIT_NOT_FOUND)
    _ambiguous(ref, sorted(found.values(), key=lambda job: job.id))
    raise AssertionError("unreachable")  # pragma: no cover


def _ambiguous(ref: str, jobs: list[JobInfo]) -> None:
    more = " or more" if len(jobs) > SHOWN else ""
    message = f"{ref!r} names {len(jobs)}{more} jobs; give the whole id or more of it"
    if json_lines():
        shown = [{"id": job.id, "name": job.name, "state": job.state} for job in jobs[:SHOWN]]
        fail(message, EXIT_AMBIGUOUS, candidates=shown)
    say(f"error: {message}:", err=True)
    for job in jobs[:SHOWN]:
        say(f"  {job.id}  {job.name}  {job.state}", err=True)
    sys.exit(EXIT_AMBIGUOUS)
