"""Which requests may read lists and history from a read replica (decision 0030)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from cronwheel.store.replica import stale_reads

READ_ONLY_METHODS = frozenset({"GET", "HEAD"})


class ReplicaReadsForGets:
    """ASGI middleware: a GET or HEAD request runs under :func:`stale_reads`, so an API
    over a :class:`~cronwheel.store.replica.ReplicaReads` store may serve its lists from
    the replica; every other request (each write, and what it reads first) reads the
    primary. Over any other store it changes nothing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in READ_ONLY_METHODS:
            with stale_reads():
                await self.app(scope, receive, send)
            return
        await self.app(scope, receive, send)
