"""The ``Idempotency-Key`` header: a retried create answers what the first one did.

The key is scoped to the tenant. The request is fingerprinted by a SHA-256 of its method,
path and canonical JSON body: the same key with the same request replays the stored
status and body; the same key with another request is a 409. Only successes are kept: a
refused request changed nothing, so sending it again is already safe. Two identical
requests racing each other both run, and the first one stored wins the replay (the job
name, unique among live jobs, keeps the loser from creating a second job).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any

import anyio.to_thread
from fastapi import Header, Request

from cronwheel.api.guards import OFF_LOOP_BYTES, StrictJsonRequest
from cronwheel.core.clock import Clock
from cronwheel.core.model import StoredResponse
from cronwheel.store.base import Store
from cronwheel.web.problems import ApiProblem, FieldError
from cronwheel.web.state import ApiState

HEADER = "Idempotency-Key"
RETENTION = timedelta(hours=24)
"""How long a response is kept for replay."""

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias=HEADER,
        min_length=1,
        max_length=255,
        pattern=r"^[\x21-\x7e]+$",
        description="Makes a retried request safe: the same key and body replay the answer.",
    ),
]


@dataclass(frozen=True, slots=True)
class Replay:
    status: int
    body: Any


@dataclass(slots=True)
class Idempotency:
    """One request's view of its key: look up first, remember the answer after."""

    store: Store
    clock: Clock
    tenant_id: str
    key: str | None
    fingerprint: str

    @classmethod
    async def begin(
        cls, request: Request, state: ApiState, tenant_id: str, key: str | None
    ) -> Idempotency:
        digest = ""
        if key is not None:  # only then is the request worth fingerprinting
            raw = await request.body()
            body = None
            if isinstance(request, StrictJsonRequest) and raw:
                body = await request.parsed()  # the JSON, not the model it validated into
            elif raw:
                body = await request.json()
            args = (request.method, request.url.path, body)
            if len(raw) > OFF_LOOP_BYTES:  # a batch's canonical JSON takes a while
                digest = await anyio.to_thread.run_sync(fingerprint, *args)
            else:
                digest = fingerprint(*args)
        return cls(state.store, state.clock, tenant_id, key, digest)

    async def replay(self) -> Replay | None:
        """The stored answer to this request, if it was made before; 409 if the key was
        used for another request."""
        if self.key is None:
            return None
        stored = await self.store.get_response(self.tenant_id, self.key)
        if stored is None:
            return None
        if stored.request_hash != self.fingerprint:
            reason = "was used for another request; use a new key for a new request"
            raise ApiProblem(
                409, f"{HEADER}: {reason}", field=HEADER, errors=[FieldError(HEADER, reason)]
            )
        return Replay(stored.status, stored.body)

    async def remember(self, status: int, body: Any) -> Replay:
        """Keep a success under the key; return what is kept (the first one wins)."""
        if self.key is None:
            return Replay(status, body)
        kept = await self.store.save_response(
            StoredResponse(
                tenant_id=self.tenant_id,
                key=self.key,
                request_hash=self.fingerprint,
                status=status,
                body=body,
                created_at=self.clock.now(),
            )
        )
        return Replay(kept.status, kept.body)


def fingerprint(method: str, path: str, body: Any) -> str:
    """SHA-256 of the request; the body as canonical JSON, so key order and spacing do
    not count as a different request."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


async def prune(store: Store, now: datetime) -> int:
    """Forget responses older than the retention."""
    return await store.delete_responses(before=now - RETENTION)
