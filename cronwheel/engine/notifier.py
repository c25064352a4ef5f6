"""The notifier: delivers completion notifications from the outbox, at least once.

The hot paths only write outbox rows (one per event and target, in the statement that
changes the run's state: see :class:`cronwheel.store.base.Store`); this service claims
the due rows in batches under a lease, POSTs each one's envelope to its target, signed
like a webhook action, and records the outcome in one write per batch: delivered, due
again after an exponential backoff, or, after ``max_tries``, dead (the notifications'
own dead letter: ``GET /v1/notifications?state=dead``, ``POST /v1/notifications/replay``).
Targets are subject to the workers' egress policy (cronwheel.security.egress:
``--webhook-allow``): a refused one is dead at once, as it would be refused again.
A notifier that dies holding rows leaves them due again when their lease ends; many
notifiers may run at once (PostgreSQL: ``SKIP LOCKED``), and a row is delivered again
only when its delivery was not recorded: receivers deduplicate on the event id
(``Cronwheel-Event-Id``, the body's ``id``).

In-process hooks (:meth:`Notifier.on`) see the same envelopes: each is called once a
target took a notification, before the delivery is recorded, so they are at least once
too. See docs/workflows.md#notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from cronwheel._version import installed_version
from cronwheel.actions.handler import HandlerRegistry
from cronwheel.core.clock import Clock, SystemClock, sync_to
from cronwheel.core.model import JSON, Notification, NotifyEvent
from cronwheel.core.records import NotificationResult
from cronwheel.engine._aio import sleep_or_stop
from cronwheel.engine._outage import Outage
from cronwheel.security import signing
from cronwheel.security.egress import REFUSED, EgressPolicy, EgressRefused
from cronwheel.security.redact import mask_url, redact, url_secrets
from cronwheel.store.base import Outbox, StoreClock

_SEALED_URL = "cwsealed1."  # cronwheel.security.sealing.URL_PREFIX, without importing it
_SECRETS_ENV = "CRONWHEEL_SECRETS_KEY"

if TYPE_CHECKING:
    import httpx

    from cronwheel.security.sealing import Sealer

log = logging.getLogger("cronwheel.notifier")


class NotifierStore(StoreClock, Outbox, Protocol):
    """What the notifier needs of a store: the outbox, nothing else."""


EVENT_ID_HEADER = "Cronwheel-Event-Id"
EVENT_HEADER = "Cronwheel-Event"
MAX_ERROR = 500
"""Characters of a failed delivery's error kept on the row."""

Hook = Callable[[dict[str, JSON]], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class NotifierConfig:
    interval_seconds: float = 0.5
    """How long an idle notifier waits before it looks for due notifications again."""
    batch: int = 100
    """Notifications claimed (and delivered concurrently) per round."""
    lease_seconds: float = 60.0
    """How long a claimed notification is held: longer than a round of deliveries."""
    timeout_seconds: float = 10.0
    """One delivery's HTTP timeout."""
    max_tries: int = 10
    """Deliveries tried before a notification is dead."""
    initial_delay: float = 1.0
    """The wait after the first failed delivery; it doubles after each further one."""
    max_delay: float = 300.0
    busy_pause_seconds: float = 1.0
    """While the process's worker is saturated (``busy``), the pause between two full
    batches: notifications never take the hot path's CPU, and still go out, a batch a
    pause, catching up at full speed once the worker has room."""


class Notifier:
    """Delivers due notifications until stopped (a :class:`cronwheel.engine.runtime.Service`)."""

    def __init__(
        self,
        store: NotifierStore,
        *,
        config: NotifierConfig | None = None,
        clock: Clock | None = None,
        secret: bytes | None = None,
        egress: EgressPolicy | None = None,
        hooks: HandlerRegistry | None = None,
        sealer: Sealer | str | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        self.store = store
        self._busy = busy
        """True while the worker this notifier shares a process with is saturated: then a
        full batch is followed by a pause instead of the next batch at once."""
        self._sealer_given = sealer
        """Opens targets' sealed URL passwords (cronwheel.security.sealing): a Sealer or its keys'
        text; None: CRONWHEEL_SECRETS_KEY's. Made with the first sealed URL (most
        processes never import the cryptography package)."""
        self._sealer: Sealer | None = None
        self.config = config or NotifierConfig()
        self.clock: Clock = clock or SystemClock()
        self._secret = secret or os.environ.get("CRONWHEEL_WEBHOOK_SECRET", "").encode()
        if not self._secret:
            self._secret = os.urandom(32)  # the worker warns about it; signatures then fail
        self.egress = egress or EgressPolicy.from_env()
        self._keys: dict[str, bytes] = {}
        self._shared: httpx.AsyncClient | None = None
        """The pooled client :meth:`run` delivers over, made with the first batch."""
        self._running = False
        self._hooks: dict[NotifyEvent, list[Hook]] = {e: [] for e in NotifyEvent}
        for events, fn in hooks.notification_hooks if hooks is not None else ():
            self.on(*events)(fn)

    def on(self, *events: NotifyEvent | str) -> Callable[[Hook], Hook]:
        """Register an in-process hook for some events (all four without any):
        ``@notifier.on("dead")``. It is called with the envelope a target took (sync or
        async), at least once per delivered notification: deduplicate on ``id``. A hook
        that raises is logged; the delivery still counts."""
        chosen = [NotifyEvent(e) for e in events] or list(NotifyEvent)

        def register(fn: Hook) -> Hook:
            for event in chosen:
                self._hooks[event].append(fn)
            return fn

        return register

    def retry_delay(self, tries: int) -> float:
        """Seconds to wait after the ``tries``-th failed delivery: exponential, bounded."""
        exponent = min(tries - 1, 60)  # 2**60 seconds is past any max_delay
        return float(min(self.config.max_delay, self.config.initial_delay * 2**exponent))

    async def run(self, stop: asyncio.Event) -> None:
        outage = Outage(log, "delivering notifications")
        self._running = True
        with contextlib.suppress(Exception):  # a failed sync keeps the clock as it is
            await sync_to(self.clock, self.store.now)
        try:
            while not stop.is_set():
                try:
                    claimed = await self.run_once(self._shared)
                except Exception as exc:
                    await sleep_or_stop(stop, outage.failed(exc))
                    continue
                outage.ok()
                if claimed < self.config.batch:
                    await sleep_or_stop(stop, self.config.interval_seconds)
                elif self._busy is not None and self._busy():
                    await sleep_or_stop(stop, self.config.busy_pause_seconds)
        finally:
            self._running = False
            if self._shared is not None:
                await self._shared.aclose()
                self._shared = None

    def _client(self) -> httpx.AsyncClient:
        # The HTTP stack is imported with the first notification, not at start: a worker
        # whose jobs notify nobody never loads it (tests/e2e/test_cli_imports.py).
        import httpx

        from cronwheel.actions.transport import checked_transport

        # The workers' egress policy, checked on the address connected to; no redirect
        # is followed and no proxy taken from the environment (as for webhook actions).
        limits = httpx.Limits(max_connections=self.config.batch, max_keepalive_connections=50)
        return httpx.AsyncClient(
            timeout=self.config.timeout_seconds,
            transport=checked_transport(self.egress, limits=limits),
            follow_redirects=False,
        )

    async def run_once(self, client: httpx.AsyncClient | None = None) -> int:
        """One round: claim a batch of due notifications, deliver them, record how each
        went. Returns how many were claimed. Within :meth:`run`, over one pooled client
        made with the first batch; alone, over a client of its own."""
        claimed = await self.store.claim_notifications(
            now=self.clock.now(), limit=self.config.batch, lease_seconds=self.config.lease_seconds
        )
        if not claimed:
            return 0
        if client is None and self._running:
            client = self._shared = self._client()
        if client is None:
            async with self._client() as own:
                results = await self._deliver_all(own, claimed)
        else:
            results = await self._deliver_all(client, claimed)
        await self.store.finish_notifications(results, now=self.clock.now())
        return len(claimed)

    async def _deliver_all(
        self, client: httpx.AsyncClient, claimed: Sequence[Notification]
    ) -> list[NotificationResult]:
        errors = await asyncio.gather(*(self._deliver(client, n) for n in claimed))
        results = []
        for n, error in zip(claimed, errors, strict=True):
            if error is None:
                results.append(NotificationResult(n.id, n.tries, delivered=True))
                continue
            retry_at = None
            # A refused target, or a key this process lacks: trying again cannot help.
            hopeless = error.endswith(REFUSED) or _SECRETS_ENV in error
            if n.tries < self.config.max_tries and not hopeless:
                retry_at = self.clock.now() + timedelta(seconds=self.retry_delay(n.tries))
            else:
                log.warning(
                    "notification %s (%s) to %s is dead after %d tries: %s",
                    n.id,
                    n.event_id,
                    mask_url(n.url),
                    n.tries,
                    error,
                )
            results.append(NotificationResult(n.id, n.tries, False, error, retry_at))
        return results

    def _url_of(self, n: Notification) -> str:
        """The URL to post to: a sealed password opened (SecretsKeyMissing and
        SecretUnreadable from cronwheel.security.sealing otherwise)."""
        if _SEALED_URL not in n.url:
            return n.url
        from cronwheel.security.sealing import Sealer, open_url

        if self._sealer is None:
            given = self._sealer_given
            self._sealer = Sealer.from_text(given) if isinstance(given, str) else given
            self._sealer = self._sealer or Sealer.from_env()
        return open_url(n.url, n.tenant_id, self._sealer)

    async def _deliver(self, client: httpx.AsyncClient, n: Notification) -> str | None:
        """POST one notification; None if the target took it, else why not."""
        envelope = n.envelope()
        body = json.dumps(envelope, separators=(",", ":")).encode()
        shown = mask_url(n.url)  # the error is stored and listed: never a URL's password
        import httpx  # loaded by the client already

        url = n.url
        if _SEALED_URL in url:
            from cronwheel.security.sealing import SecretsKeyMissing, SecretUnreadable

            try:
                url = self._url_of(n)
            except (SecretsKeyMissing, SecretUnreadable) as exc:
                return f"POST {shown}: {exc}"[:MAX_ERROR]
        try:
            response = await client.post(url, content=body, headers=self._headers(n, body))
        except EgressRefused:
            return f"POST {shown}: {REFUSED}"
        except httpx.HTTPError as exc:
            error = f"POST {shown} failed: {type(exc).__name__}: {exc}"
            return redact(error, url_secrets(url))[:MAX_ERROR]
        if not 200 <= response.status_code < 300:
            # A target may echo the request's Authorization (Basic, from the URL's
            # password): redacted whole, before it is cut.
            snippet = redact(response.text, url_secrets(url))[:200]
            return f"POST {shown} answered {response.status_code}: {snippet}"[:MAX_ERROR]
        await self._call_hooks(n.event, envelope)
        return None

    def _headers(self, n: Notification, body: bytes) -> dict[str, str]:
        # Signed as a webhook action's request is, with the tenant's key
        # (cronwheel.security.signing.verify checks both): the event id stands for the
        # idempotency key, and a notification has no fence (0).
        return {
            "Content-Type": "application/json",
            "User-Agent": f"cronwheel/{installed_version()}",  # as webhook actions say
            EVENT_ID_HEADER: n.event_id,
            EVENT_HEADER: n.event.value,
            signing.TENANT_ID_HEADER: n.tenant_id,
            signing.IDEMPOTENCY_HEADER: n.event_id,
            signing.RUN_ID_HEADER: str(n.run_id),
            signing.JOB_ID_HEADER: n.job_id,
            signing.ATTEMPT_HEADER: str(n.attempt),
            signing.FENCE_HEADER: "0",
            signing.SCHEDULED_FOR_HEADER: n.scheduled_for.isoformat(),
            signing.SIGNATURE_HEADER: self._sign(n, body),
        }

    def _sign(self, n: Notification, body: bytes) -> str:
        """The one place notifications are signed."""
        key = self._keys.get(n.tenant_id)
        if key is None:
            key = self._keys[n.tenant_id] = signing.tenant_key(self._secret, n.tenant_id)
        return signing.sign(
            key,
            tenant_id=n.tenant_id,
            job_id=n.job_id,
            run_id=n.run_id,
            attempt=n.attempt,
            fence=0,
            idempotency_key=n.event_id,
            body=body,
        )

    async def _call_hooks(self, event: NotifyEvent, envelope: dict[str, Any]) -> None:
        for hook in self._hooks[event]:
            try:
                result = hook(envelope)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("notification hook %r failed on %s", hook, envelope["id"])
