"""The worker: claim → fire on time → execute → complete, with heartbeats and a drain.

A worker claims runs of its pools that are due within a short prefetch window, then
starts each at its exact instant from an in-memory timer, so start lag does not depend on
a polling interval. One batched heartbeat extends every lease it holds; completions are
fenced and written in batches. Its clock is the store's: it measures its offset to the
store at start and then regularly, so a skewed node neither fires early nor late.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import os
import random
import socket
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from cronwheel.actions.context import RunCancelled, RunContext
from cronwheel.actions.handler import Handler, HandlerRegistry, PermanentError, call_handler
from cronwheel.core.brokers import BROKER_NAME, kind_of_url
from cronwheel.core.clock import Clock, SystemClock, sync_to
from cronwheel.core.lifecycle import (
    SUCCEEDED,
    Outcome,
    OutcomeKind,
    completion_for,
    fallback_completion,
    result_outcome,
)
from cronwheel.core.model import (
    REASON_AT_MOST_ONCE_STOPPED,
    SHARED_WORKERS,
    ClaimedRun,
    Delivery,
    NotifyEvent,
    Overlap,
    WorkerInfo,
    new_id,
)
from cronwheel.core.pipelines.model import PipelineRunStart
from cronwheel.core.records import Completion, HeartbeatResult, Release, RunReport, Start
from cronwheel.engine import eventloop
from cronwheel.engine._aio import first_of, sleep_or_stop
from cronwheel.engine._outage import Outage
from cronwheel.engine.eventloop import URGENT, plain_context, urgent_context
from cronwheel.engine.fairslots import FairSlots, Lane, Lanes
from cronwheel.observability import metrics as _metrics
from cronwheel.observability import tracing
from cronwheel.observability.attempt_log import log_attempt_end
from cronwheel.observability.logs import current_run, run_fields
from cronwheel.security.egress import EgressPolicy, origin_of
from cronwheel.store.base import Leases, Pipelines, Queue, Registry, RunControl, StoreClock

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from cronwheel.actions.command import CommandAction
    from cronwheel.actions.publish import PublishAction
    from cronwheel.actions.webhook import WebhookAction
    from cronwheel.security.sealing import Sealer

log = logging.getLogger("cronwheel.worker")


class WorkerStore(StoreClock, Queue, Leases, Registry, Pipelines, RunControl, Protocol):
    """What a worker needs of a store: the queue's claiming half, pool rate tokens, the
    registry it heartbeats into, and for a pipeline action the definition it starts a run
    of."""


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    pools: Mapping[str, int] = field(default_factory=lambda: {"default": 10})
    """Pool name → how many of its runs execute at once."""
    lease_seconds: float = 30.0
    heartbeat_seconds: float = 5.0
    prefetch_seconds: float = 2.0
    """Claim runs due this soon, and start each from a local timer at its instant."""
    prefetch_factor: int = 4
    """A pool holds at most concurrency times this many claimed runs (running or waiting).
    Runs due now are claimed only for slots no claimed run waits for (backpressure); the
    rest of this room is for runs due within the prefetch window, such as a herd due at
    one instant, which then start from their timers."""
    poll_seconds: float = 0.5
    grace_seconds: float = 30.0
    """On shutdown, how long in-flight runs may finish before they are released."""
    clock_sync_seconds: float = 60.0
    completion_batch: int = 1000
    webhook_connections: int = 100
    """Webhook requests this worker has in flight at most, all pools together: its HTTP
    client opens no more connections. A webhook run beyond it waits, holding no slot of
    its pool (decision 0036)."""
    webhook_connections_per_target: int = 50
    """Of those, how many one target (scheme, host and port) may hold: one slow or busy
    target cannot take every connection."""
    webhook_allow: tuple[str, ...] = ()
    """Internal webhook targets allowed beyond the public internet: CIDRs and host names
    (``("10.1.0.0/16", "billing.svc")``; :data:`~cronwheel.security.egress.LOOPBACK` for
    this machine), added to env ``CRONWHEEL_WEBHOOK_ALLOW``. See docs/security.md."""
    brokers: Mapping[str, str] = field(default_factory=dict)
    """Broker name → URL (``{"events": "nats://127.0.0.1:4222"}``): where this worker's
    publish runs go (docs/actions.md#publish). The names, never the URLs, are announced."""
    allow_commands: tuple[str, ...] = ()
    """The executables this worker may run for command actions (patterns, see
    :class:`cronwheel.actions.command.AllowList`); none: it runs no command."""
    command_grace_seconds: float = 10.0
    """How long a command being stopped has between SIGTERM and SIGKILL."""

    def __post_init__(self) -> None:
        for name, url in self.brokers.items():
            if not BROKER_NAME.match(name):
                raise ValueError(f"brokers: {name!r} is not a broker name")
            try:
                kind_of_url(url)
            except ValueError as exc:
                raise ValueError(f"brokers: {name}: {exc}") from None
        if self.allow_commands:  # (a worker of handlers imports no command machinery)
            from cronwheel.security.commands import pattern_problem

            for pattern in self.allow_commands:
                why = pattern_problem(pattern)
                if why is not None:
                    raise ValueError(f"allow_commands: {pattern!r}: {why}")
        if not 0 <= self.command_grace_seconds <= 3600:
            raise ValueError("command_grace_seconds: must be between 0 and 3600")
        try:
            EgressPolicy.parse(self.webhook_allow)
        except ValueError as exc:
            raise ValueError(f"webhook_allow: {exc}") from None
        if not self.pools:
            raise ValueError("pools: a worker needs at least one pool")
        for pool, concurrency in self.pools.items():
            if concurrency < 1:
                raise ValueError(f"pools: concurrency of {pool!r} must be at least 1")
        if self.webhook_connections < 1:
            raise ValueError("webhook_connections: must be at least 1")
        if self.webhook_connections_per_target < 1:
            raise ValueError("webhook_connections_per_target: must be at least 1")
        if self.heartbeat_seconds * 2 > self.lease_seconds:
            raise ValueError("heartbeat_seconds: must be at most half of lease_seconds")
        if self.poll_seconds > self.prefetch_seconds:
            raise ValueError("poll_seconds: must not exceed prefetch_seconds")


PEEK_CLAIM = 32
"""Runs a peek claims (:meth:`Worker._peek_loop`): enough for the fair claim to take
the first run of every tenant that just started waiting, beside a saturating tenant's."""
PEEK_OVERFLOW = 256
"""How far past a pool's limit peeks may take what it holds: a stream of enqueues
cannot grow a full worker's claimed runs without bound."""
WATCHDOG_GRANULARITY = 0.005
"""Timeouts are enforced by one watchdog that wakes at most this often (seconds), not by
a timer per run: a run is stopped at most this much after its timeout."""
DUE_BUFFER = 2
"""A pool holds runs due now for up to this many times its concurrency: its slots' worth
begin at once, one more waits claimed ahead (see claim)."""
REFILL_FRACTION = 10
"""A saturated pool claims again once a tenth of its slots are free, not at every run's
end: one statement per batch of runs. A run enqueued meanwhile is taken by a peek."""
LOOP_TICK = 0.1
"""How often the worker checks that its event loop turns (seconds)."""
LOOP_STALL = 1.0
"""A turn of the loop later than this is logged: heartbeats, claims and the stop signal
waited that long (no loop of the worker may stall a second while it holds runs)."""
POOL_RATES_REFRESH = 5.0
"""Seconds between two reads of which pools are rate limited (decision 0033): a new or
changed limit reaches every worker within this."""


@dataclass(slots=True)
class _InFlight:
    claimed: ClaimedRun
    ctx: RunContext
    task: asyncio.Task[None] | None = None
    """None until the run's instant has come: runs waiting for it hold no task."""
    lost: bool = False
    deadline: float = math.inf
    """Loop time by which the running action must be done (``timeout_seconds``)."""
    timed_out: bool = False
    started: bool = False
    """Set just before the action begins: a release then cannot give an at-most-once
    run a second start."""
    error: BaseException | None = None
    """A handler's unexpected exception: its traceback goes with the attempt's log line."""
    forgotten: bool = False
    """The worker is done with this claim (:meth:`Worker._forget`)."""
    due: bool = False
    """Counted in the worker's runs due per pool (see :meth:`Worker._begin`)."""
    ahead: bool = False
    """Claimed without a start (it could wait before it begins): its start is stored
    just before it begins (:meth:`Worker._mark`)."""


class Worker:
    """Executes runs of its pools. Any number may run, anywhere, on one store."""

    def __init__(
        self,
        store: WorkerStore | None = None,
        config: WorkerConfig | None = None,
        *,
        worker_id: str | None = None,
        clock: Clock | None = None,
        handlers: HandlerRegistry | None = None,
        webhook_secret: bytes | None = None,
        sealer: Sealer | str | None = None,
        rng: random.Random | None = None,
        metrics: _metrics.Metrics | None = None,
    ) -> None:
        self._store = store
        self.config = config or WorkerConfig()
        self.id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{new_id()[-6:]}"
        self.clock: Clock = clock or SystemClock()
        self.handlers = handlers or HandlerRegistry()
        secret = webhook_secret or os.environ.get("CRONWHEEL_WEBHOOK_SECRET", "").encode()
        self.signs_verifiably = bool(secret)
        """False: no secret was given, webhooks are signed with a random one (see run)."""
        self.metrics = metrics or _metrics.default()
        self.egress = EgressPolicy.from_env(*self.config.webhook_allow)
        """Where this worker's webhooks may go (docs/security.md)."""
        self._webhook_secret = secret or os.urandom(32)
        self._sealer = sealer
        """Opens secret webhook headers: a Sealer, or its keys' text (``KEY,OLDER``);
        None: CRONWHEEL_SECRETS_KEY's, if set. Made with the first webhook run (a worker
        of handlers never imports the cryptography package)."""
        self._webhooks: WebhookAction | None = None
        self._publisher: PublishAction | None = None
        if self.config.brokers:
            from cronwheel.actions.publish.base import check_installed

            check_installed(self.config.brokers)  # a missing library: say so at the start
        self._commands: CommandAction | None = None
        self.rng = rng or random.Random()
        self._inflight: dict[int, _InFlight] = {}
        self._rates: dict[str, float] = {}
        self._rates_read_at: datetime | None = None
        self._topics = [f"runs:{p}" for p in self.config.pools]
        """What a worker waits on for new runs: one wake-up topic per pool it serves."""
        self._held: Counter[str] = Counter()
        """Claimed runs per pool: a claim asks for the room left, without a scan."""
        self._held_by_tenant: Counter[str] = Counter()
        """Claimed runs per tenant: a tenant's only run begins first (see _begin)."""
        self._refill = {p: max(1, n // REFILL_FRACTION) for p, n in self.config.pools.items()}
        """Free slots that wake a saturated claim loop (see REFILL_FRACTION)."""
        self._due: Counter[str] = Counter()
        """Claimed runs per pool whose instant has come and whose action is not over:
        running, or waiting for a slot or a connection. Runs due now are claimed only
        for the rest of the pool's concurrency (backpressure)."""
        self._instants: dict[datetime, list[_InFlight]] = {}
        """Runs waiting for their instant, grouped so that every run due at one instant
        costs one timer, and all of them start in one pass of the loop."""
        self._watchdog: asyncio.TimerHandle | None = None
        self._watchdog_at = math.inf
        # Claimed runs wait for a slot round robin by tenant, not first come first served:
        # a run of one tenant is not held back by another's prefetched backlog (0028).
        # A webhook run also waits for a connection lane (its target's), holding no slot.
        self._lanes = Lanes(
            self.config.webhook_connections, self.config.webhook_connections_per_target
        )
        self._slots = {p: FairSlots(n, self._lanes) for p, n in self.config.pools.items()}
        self._threads = ThreadPoolExecutor(
            max_workers=sum(self.config.pools.values()), thread_name_prefix="cronwheel-handler"
        )
        self._completions: asyncio.Queue[Completion] = asyncio.Queue()
        self._starts: dict[int, tuple[Start, asyncio.Future[bool]]] = {}
        """Starts of runs claimed ahead to store before they begin (see _mark)."""
        self._starting = asyncio.Event()
        self._writes_done = asyncio.Event()  # set while no batch of completions is in flight
        self._writes_done.set()
        self._completion_outage = Outage(log, "writing completions")
        self._news = asyncio.Event()
        """Set by the peek loop when runs were enqueued (it may have taken the
        notification the idle claim loop waits for)."""
        self._room = asyncio.Event()
        """Set when runs leave the in-flight set: a full worker claims again at once."""
        self._started_at: datetime | None = None
        self.completed = 0
        self.max_loop_lag = 0.0
        """The longest the event loop was late to turn, in seconds (see _loop_watch)."""
        self._tracer: Tracer | None = None
        """Looked up once per claimed batch: None while tracing is off."""
        self._reporting: set[int] = set()
        """Runs whose report a heartbeat is writing now: if such a run completes
        meanwhile, its completion carries the report too (the heartbeat may land after
        the completion, when the run is no longer running, and store nothing)."""

    @property
    def store(self) -> WorkerStore:
        if self._store is None:
            raise RuntimeError(
                "this worker has no store: start it with `cronwheel worker --app module:worker`"
                " or give Worker(store) one"
            )
        return self._store

    def handler(self, name: str, *, pool: str = "default") -> Callable[[Handler], Handler]:
        """Register a handler: ``@worker.handler("send_report", pool="reports")``."""

        def register(fn: Handler) -> Handler:
            self.handlers.register(name, fn, pool=pool)
            return fn

        return register

    def on_notification(self, *events: str) -> Callable[[Any], Any]:
        """Register an in-process notification hook for some events (all without any):
        ``@worker.on_notification("dead")``. The notifier of the process serving this
        worker (``cronwheel worker --app``, ``cronwheel dev --app``) calls it with each
        envelope a target took, at least once: see :meth:`cronwheel.engine.notifier.Notifier.on`."""
        chosen = tuple(NotifyEvent(e).value for e in events)  # a bad name fails here

        def register(fn: Any) -> Any:
            self.handlers.notification_hooks.append((chosen, fn))
            return fn

        return register

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    def _opener(self) -> Sealer | None:
        """The sealer that opens jobs' secret values (made at the first use)."""
        from cronwheel.security.sealing import Sealer

        if isinstance(self._sealer, str):
            self._sealer = Sealer.from_text(self._sealer)
        elif self._sealer is None:
            self._sealer = Sealer.from_env()
        return self._sealer

    @property
    def commands(self) -> CommandAction:
        """The command runner, made with the first command run."""
        if self._commands is None:
            from cronwheel.actions.command import CommandAction

            self._commands = CommandAction(
                self.config.allow_commands,
                sealer=self._opener(),
                grace_seconds=self.config.command_grace_seconds,
                worker_id=self.id,
            )
        return self._commands

    @property
    def webhooks(self) -> WebhookAction:
        """The webhook sender, made with the first webhook run: a worker of Python
        handlers never imports the HTTP stack (it starts sooner)."""
        if self._webhooks is None:
            from cronwheel.actions import webhook

            self._webhooks = webhook.WebhookAction(
                self._webhook_secret,
                metrics=self.metrics,
                egress=self.egress,
                connections=self.config.webhook_connections,
                sealer=self._opener(),
            )
        return self._webhooks

    @property
    def publisher(self) -> PublishAction:
        """The broker clients, made with the first publish run (each connects when it
        first publishes); they sign as webhooks do, with the same secret."""
        if self._publisher is None:
            from cronwheel.actions.publish import PublishAction

            self._publisher = PublishAction(self.config.brokers, self._webhook_secret)
        return self._publisher

    # -- the loops ---------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then drain: finish or release in-flight runs."""
        if not self.signs_verifiably:
            log.warning(
                "CRONWHEEL_WEBHOOK_SECRET is not set: worker %s signs webhooks with a random"
                " secret of its own, so targets cannot check the Cronwheel-Signature header;"
                " set the same secret on every worker and on your targets",
                self.id,
            )
        await self.sync_clock()
        self._started_at = self.clock.now()
        with contextlib.suppress(Exception):  # the claim loop reports a store outage
            # Announced at once, not at the first heartbeat: the API tells users whether a
            # live worker serves a pool (their runs wait otherwise).
            await self.store.register_worker(self._announcement())
        background = [
            asyncio.create_task(self._heartbeat_loop(stop), name="heartbeat"),
            asyncio.create_task(self._completion_loop(), name="completions"),
            asyncio.create_task(self._start_loop(), name="starts"),
            asyncio.create_task(self._clock_loop(stop), name="clock"),
            asyncio.create_task(self._loop_watch(stop), name="loop-watch"),
        ]
        # Urgent (eventloop.URGENT): a peek's notification and its claim's answer go
        # before the work in flight on this module's loop (what it claims begins urgently
        # only as _begin decides).
        peeks = asyncio.create_task(self._peek_loop(stop), name="peeks", context=urgent_context())
        try:
            await self._claim_loop(stop)
            await asyncio.gather(peeks, return_exceptions=True)  # no claim after the drain
            await self._drain()
        finally:
            for task in [*background, peeks]:
                task.cancel()
            if self._watchdog is not None:
                self._watchdog.cancel()
            await asyncio.gather(*background, peeks, return_exceptions=True)
            await self._flush_all()
            if self._webhooks is not None:
                await self._webhooks.close()
            if self._publisher is not None:
                await self._publisher.close()
            with contextlib.suppress(Exception):  # a crash leaves a stale record: it ages out
                await self.store.remove_worker(self.id)
            self._threads.shutdown(wait=False, cancel_futures=True)

    async def run_once(self) -> int:
        """Claim what is due now, execute it, write the completions; return how many ran.
        For tests and scripts: the long-running shape is :meth:`run`."""
        starts = asyncio.create_task(self._start_loop(), name="starts")
        try:
            claimed = await self.claim()
            while self._instants:  # runs claimed ahead of their instant: wait for it
                soonest = min(self._instants)
                await asyncio.sleep(max(0.0, (soonest - self.clock.now()).total_seconds()))
            tasks = [f.task for f in list(self._inflight.values()) if f.task is not None]
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._flush_all()
        finally:
            starts.cancel()
            await asyncio.gather(starts, return_exceptions=True)
        return claimed

    async def claim(self, *, peek: bool = False, tenants: Collection[str] | None = None) -> int:
        """One claim per pool that has room; each claimed run gets its start timer.

        ``peek``: a small claim for runs just enqueued, made beside the others (at most
        :data:`PEEK_CLAIM` runs, and past the pool's limit by :data:`PEEK_OVERFLOW` at
        most); see :meth:`_peek_loop`. ``tenants``: the peek's runs are these tenants'
        (its notifications said so): one claim for each, in place of the fair claim over
        every tenant."""
        now = self.clock.now()
        until = now + timedelta(seconds=self.config.prefetch_seconds)
        total = 0
        self._tracer = tracing.tracer()
        for pool, concurrency in self.config.pools.items():
            ahead = concurrency * self.config.prefetch_factor - self._held[pool]
            if peek:
                room = min(PEEK_CLAIM, ahead + PEEK_OVERFLOW)
                # A tenant's claim is the lean statement where that tenant uses no claim
                # policy, however many other tenants wait: beside another tenant's
                # backlog, the fair claim over both (None) is the heaviest statement a
                # peek can make (W6: 16-20 ms, against 2.5 alone; decision 0037).
                for tenant in (None,) if tenants is None else sorted(tenants):
                    if room <= 0:
                        break
                    got = await self._claim_pool(
                        pool, room, now, until, ahead=True, urgent=True, tenant_id=tenant
                    )
                    total += got
                    room -= got
                continue
            # Backpressure: runs due now are claimed for the slots no claimed run needs,
            # and one pool's worth more (claimed ahead: they begin as slots free up, so
            # that the next batch is in hand when the last one ends, and are charged
            # nothing if this worker dies first). Past that a saturated worker leaves the
            # backlog to the others and to its own next claims, which are fair across
            # tenants. Runs due later, within the prefetch window, are claimed ahead for
            # their instant once nothing due is left: their timers start them on time.
            free = concurrency - self._due[pool]
            room = min(concurrency * DUE_BUFFER - self._due[pool], ahead)
            if room <= 0:
                continue
            asked, claimed, got = 0, 0, 0
            if free > 0:
                asked = min(free, room)
                claimed = await self._claim_pool(pool, asked, now, now, ahead=False)
                got += claimed
            if claimed == asked and room - got > 0:
                asked = room - got
                claimed = await self._claim_pool(pool, asked, now, now, ahead=True)
                got += claimed
            # Nothing due is left: the prefetch. Only after a claim that found nothing due,
            # so that a busy worker makes one claim statement per turn, not two.
            if claimed < asked and got == 0 and ahead > 0:
                got += await self._claim_pool(pool, ahead, now, until, ahead=True)
            total += got
        return total

    async def _claim_pool(
        self,
        pool: str,
        room: int,
        now: datetime,
        until: datetime,
        *,
        ahead: bool,
        urgent: bool = False,
        tenant_id: str | None = None,
    ) -> int:
        """One claim of up to ``room`` runs of ``pool`` due by ``until`` (of
        ``tenant_id``'s alone if given). ``ahead``: the runs may wait (for their instant,
        or past the free slots) before they begin, and are claimed without a start (see
        _fire); otherwise they begin at once, and the claim records their start."""
        limited = pool in await self._pool_rates(now)
        if limited:
            # A rate-limited pool (decision 0033): claim only what its cluster-wide
            # bucket grants, and due now (a prefetched run would start a burst later).
            if until > now:
                return 0
            granted = await self.store.take_pool_tokens(pool, room, now=now)
            if granted is not None:
                if granted <= 0:
                    return 0
                room = granted
        claimed = await self.store.claim_runs(
            self.id,
            [pool],
            limit=room,
            now=now,
            prefetch_until=until,
            lease_seconds=self.config.lease_seconds,
            started=not ahead,
            urgent=urgent,
            tenant_id=tenant_id,
        )
        if limited and len(claimed) < room:
            await self.store.take_pool_tokens(pool, len(claimed) - room, now=now)
        self.metrics.runs_skipped("overlap", claimed.overlap_skipped)
        # One reading of both clocks: every timer of the batch is set on the loop's
        # clock from it, so the time spent starting the batch does not delay them.
        origin = (self.clock.now(), asyncio.get_running_loop().time())
        # Counted before any begins: a tenant's first run of a claim that brings several
        # is not its only one (_begin).
        self._held_by_tenant.update(c.run.tenant_id for c in claimed)
        for i, c in enumerate(claimed):
            if i and not i % eventloop.TURN_HANDLES:
                # A claim of thousands begun in one step would be one callback of tens of
                # milliseconds, which no bounded turn splits (eventloop): a turn's worth
                # at a time, the sockets read between.
                await asyncio.sleep(0)
            self._start(c, origin, ahead)
        return len(claimed)

    async def _pool_rates(self, now: datetime) -> dict[str, float]:
        """The rate-limited pools, read again every few seconds: a pool without a limit
        costs its claims no statement more."""
        if self._rates_read_at is None or (now - self._rates_read_at).total_seconds() >= (
            POOL_RATES_REFRESH
        ):
            self._rates = await self.store.pool_rates()
            self._rates_read_at = now
        return self._rates

    async def _claim_loop(self, stop: asyncio.Event) -> None:
        outage = Outage(log, "claiming runs")
        while not stop.is_set():
            try:
                claimed = await self.claim()
            except Exception as exc:
                await sleep_or_stop(stop, outage.failed(exc))
                continue
            outage.ok()
            if self._full():
                # Full: the next claim is worth making as soon as a run is done.
                self._room.clear()
                await first_of(
                    self._room.wait(), stop.wait(), asyncio.sleep(self.config.poll_seconds)
                )
            elif claimed == 0:
                self._news.clear()
                # The wait is urgent as the peek's is: whichever opens the store's LISTEN
                # connection opens it in an urgent context, so a notification is read
                # before the work in flight (its callbacks inherit the context).
                waiting = asyncio.create_task(
                    self.store.wait(self._topics, timeout=self.config.poll_seconds),
                    context=urgent_context(),
                )
                await first_of(waiting, stop.wait(), self._news.wait())

    async def _peek_loop(self, stop: asyncio.Event) -> None:
        """Claim runs as soon as they are enqueued, beside the claim loop.

        A worker saturated by one tenant's backlog claims big batches back to back, and
        a run enqueued while one of them is in flight waits for the next: on PostgreSQL,
        one to two claims of a thousand runs (decision 0028, W6). A small claim made at
        the enqueue's notification takes it at once (the claim is fair: a newly waiting
        tenant's first run is in it), and it starts at the next free slot. Without
        notifications (SQLite written by another process) this loop only waits."""
        outage = Outage(log, "claiming new runs")
        while not stop.is_set():
            try:
                woken = asyncio.ensure_future(
                    self.store.wait(self._topics, timeout=self.config.poll_seconds)
                )
                await first_of(woken, stop.wait())
                if not _woken(woken) or stop.is_set():
                    continue
                # The claim loop may be waiting on the same notification, which woke
                # only us: tell it, in case more came than a peek takes.
                self._news.set()
                await self.claim(peek=True, tenants=self.store.notified_tenants(self._topics))
            except Exception as exc:
                await sleep_or_stop(stop, outage.failed(exc))
                continue
            outage.ok()

    def saturated(self) -> bool:
        """Every execution slot has a run (or more wait claimed): the process's other
        services (its notifier) then keep to a trickle, so they never slow the runs."""
        return len(self._inflight) >= sum(self.config.pools.values())

    def _full(self) -> bool:
        """No pool can take a run now: each has every slot promised, or holds its most."""
        factor = self.config.prefetch_factor
        return all(
            self._due[pool] >= concurrency * DUE_BUFFER or self._held[pool] >= concurrency * factor
            for pool, concurrency in self.config.pools.items()
        )

    async def _heartbeat_loop(self, stop: asyncio.Event) -> None:
        outage = Outage(log, "heartbeat")
        while not await sleep_or_stop(stop, self.config.heartbeat_seconds) or self._inflight:
            try:
                await self.heartbeat()
                outage.ok()
            except Exception as exc:
                outage.failed(exc)
            if stop.is_set():
                await asyncio.sleep(self.config.heartbeat_seconds)

    async def heartbeat(self) -> None:
        """Announce this worker, extend every lease in one write, and stop the runs that
        were lost or cancelled."""
        await self.store.register_worker(self._announcement())
        sent = dict(self._inflight)
        leases = [(run_id, f.claimed.run.fence) for run_id, f in sent.items()]
        if not leases:
            return
        # What handlers reported since the last beat rides in the same write, fenced.
        reports, reporting = [], []
        for run_id, f in self._inflight.items():
            if f.ctx.has_unsent_report:
                progress, message, checkpoint = f.ctx.take_report()
                reports.append(RunReport(run_id, progress, message, checkpoint))
                reporting.append(f)
        self._reporting.update(f.claimed.run.id for f in reporting)
        try:
            result = await self.store.heartbeat(
                self.id,
                leases,
                now=self.clock.now(),
                lease_seconds=self.config.lease_seconds,
                reports=reports,
            )
        except BaseException:
            for f, report in zip(reporting, reports, strict=True):
                f.ctx.return_report(report.progress, report.checkpoint)
            raise
        finally:
            self._reporting.difference_update(f.claimed.run.id for f in reporting)
        self._apply_heartbeat(result, sent)

    def _apply_heartbeat(self, result: HeartbeatResult, sent: dict[int, _InFlight]) -> None:
        """Stop the runs the heartbeat found lost or cancelled: the flights it was sent
        for, not whatever holds the run id now. While the write was in flight, a run's
        completion may have been written (the run is no longer running: "lost") and the
        run claimed again (its retry) under a new fence: the new flight must go on."""
        for run_id in result.lost:
            flight = self._inflight.get(run_id)
            if flight is not None and flight.task is not None and flight.task.done():
                # Finished: its completion, written or on its way, raced this write and
                # its fence decides. Nothing to abandon, nothing to warn about.
                continue
            if flight is not None and flight is sent.get(run_id):
                log.warning(
                    "run %s: lease lost; abandoning it to its new owner",
                    run_id,
                    extra=run_fields(flight.claimed.run),
                )
                flight.lost = True
                self._stop_run(flight)
        for run_id in result.cancel_requested:
            flight = self._inflight.get(run_id)
            if flight is not None:
                self._stop_run(flight)

    async def sync_clock(self) -> None:
        """Measure this node's offset to the store's clock and correct for it."""
        await sync_to(self.clock, self.store.now)

    async def _clock_loop(self, stop: asyncio.Event) -> None:
        while not await sleep_or_stop(stop, self.config.clock_sync_seconds):
            try:
                await self.sync_clock()
            except Exception:  # keep the last offset; the claim loop reports the outage
                log.debug("clock sync failed", exc_info=True)

    async def _loop_watch(self, stop: asyncio.Event) -> None:
        """Measure how late the event loop turns; say so when it stalls. A stall starves
        the heartbeat (leases expire under runs still going), the claims of other
        tenants' runs and the stop signal: whatever causes one is a defect to fix."""
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            before = loop.time()
            await asyncio.sleep(LOOP_TICK)
            lag = max(0.0, loop.time() - before - LOOP_TICK)
            self.max_loop_lag = max(self.max_loop_lag, lag)
            self.metrics.loop_lag(lag)
            if lag > LOOP_STALL:
                log.warning(
                    "worker %s: its event loop stalled for %.1f s with %d runs in hand;"
                    " heartbeats and claims waited meanwhile (a sync call in an async"
                    " handler? a machine out of CPU?)",
                    self.id,
                    lag,
                    len(self._inflight),
                )

    # -- one run -------------------------------------------------------------------------
    def _announcement(self) -> WorkerInfo:
        now = self.clock.now()
        return WorkerInfo(
            id=self.id,
            tenant_id=SHARED_WORKERS,
            host=socket.gethostname(),
            pools=tuple(self.config.pools),
            brokers={name: kind_of_url(url).name for name, url in self.config.brokers.items()},
            capacity=sum(self.config.pools.values()),
            in_flight=len(self._inflight),
            started_at=self._started_at or now,
            last_seen_at=now,
            commands=self.config.allow_commands,
        )

    def _start(self, claimed: ClaimedRun, origin: tuple[datetime, float], ahead: bool) -> None:
        run = claimed.run
        ctx = RunContext(
            run_id=run.id,
            job_id=run.job_id,
            job_name=claimed.job_name,
            scheduled_for=run.scheduled_for,
            attempt=run.attempt,
            fence=run.fence,
            payload=claimed.payload,
            checkpoint_state=run.checkpoint,
            tenant_id=run.tenant_id,
        )
        if run.pipeline_run_id is not None:
            ctx.inputs, ctx.pipeline_run_id, ctx.task = run.inputs, run.pipeline_run_id, run.task
        flight = _InFlight(claimed, ctx, ahead=ahead)
        self._inflight[run.id] = flight
        self._held[run.pool] += 1  # and the tenant's count, by _claim_pool
        loop = asyncio.get_running_loop()
        now, loop_now = origin
        if run.available_at <= now:  # due: no timer, and no arithmetic on datetimes
            self._begin(flight, loop)
            return
        when = loop_now + (run.available_at - now).total_seconds()
        if when <= loop.time():
            self._begin(flight, loop)
            return
        waiting = self._instants.get(run.available_at)
        if waiting is None:
            waiting = self._instants[run.available_at] = []
            # Not in the context of the claim that set it (a peek's is urgent): whether a
            # run begins urgently is _begin's decision, made when the instant comes.
            loop.call_at(when, self._arrive, run.available_at, context=plain_context())
        waiting.append(flight)

    def _arrive(self, instant: datetime) -> None:
        """An instant has come: start every run due at it, in claim order."""
        loop = asyncio.get_running_loop()
        for flight in self._instants.pop(instant, ()):
            if flight.task is None and self._inflight.get(flight.claimed.run.id) is flight:
                self._begin(flight, loop)

    def _begin(self, flight: _InFlight, loop: asyncio.AbstractEventLoop) -> None:
        """The run's instant has come: it goes for a slot (and its lane) and runs.

        A tenant's only run in this worker begins urgently (eventloop.URGENT), ahead of
        the steps of the runs in flight: a tenant that enqueues now and then beside one
        that saturates the worker is not made to wait for the other's batch, whichever
        claim (a peek or the claim loop's) brought its run. Any other run begins in its
        turn, also when a peek claimed it: a tenant's burst (or 200 cron runs due at one
        instant) taken urgently would be begun a turn's worth at a time with the rest of
        the loop's work between (W4), and would jump the queue of every other tenant."""
        if self._held_by_tenant[flight.claimed.run.tenant_id] == 1:
            context = None if URGENT.get() else urgent_context()
        else:
            context = plain_context() if URGENT.get() else None
        flight.task = loop.create_task(self._fire(flight), context=context)
        flight.due = True
        self._due[flight.claimed.run.pool] += 1

    def _settle(self, flight: _InFlight) -> None:
        """The run's action is over (or will never begin): its slot is free for another
        run due now (see claim)."""
        if flight.due:
            flight.due = False
            self._due[flight.claimed.run.pool] -= 1

    def _forget(self, flight: _InFlight) -> None:
        """Done with this claim. The run's entry goes only if it is still this claim's: a
        retry due at once can be claimed again by this worker while the store is still
        answering the write that completed this attempt, and the new claim keeps its
        place (its heartbeats, its start)."""
        if flight.forgotten:
            return
        flight.forgotten = True
        self._settle(flight)
        self._held[flight.claimed.run.pool] -= 1
        tenant = flight.claimed.run.tenant_id
        self._held_by_tenant[tenant] -= 1
        if not self._held_by_tenant[tenant]:
            del self._held_by_tenant[tenant]  # bounded by the tenants with runs held
        if self._inflight.get(flight.claimed.run.id) is flight:
            del self._inflight[flight.claimed.run.id]

    async def _fire(self, flight: _InFlight) -> None:
        run = flight.claimed.run
        # This task's own context: every record logged while the run executes carries
        # its ids (a sync handler's thread gets a copy, see call_handler).
        current_run.set(run)
        lane = lane_of(flight.claimed.action)
        slots = self._slots[run.pool]
        # Not `async with slots.hold()`: its generator and context objects cost about a
        # microsecond a run, and most runs find a slot free (no await at all).
        if not slots.take(lane):
            await slots.acquire(run.tenant_id, lane)
        try:
            if flight.lost:
                self._forget(flight)
                return
            started = self.clock.now()
            # A run claimed ahead (for its instant, past the free slots) has no start in
            # the store yet: until it has, a worker that dies leaves a run that never
            # began (claimable again, charged nothing; issue 26). An at-most-once run's
            # start is stored before it begins; the others' beside their action, in one
            # write for all that begin together (awaited, a commit would delay each by
            # its latency: W2 and W3).
            if flight.ahead:
                marking = self._mark(flight, started)
                if flight.claimed.delivery is Delivery.AT_MOST_ONCE and not await marking:
                    self._forget(flight)  # no longer this worker's (lease lost, cancelled)
                    return
            flight.started = True
            if URGENT.get():
                # A tenant's only run begins first (eventloop.URGENT, see _begin); once
                # begun, it takes its turns with the others.
                URGENT.set(False)
            if self._tracer is None:
                outcome = await self._execute(flight)
            else:
                execute = self._execute(flight)
                outcome = await tracing.attempt(
                    self._tracer, flight.claimed, flight.ctx, started, self.id, execute
                )
            finished = self.clock.now()
        finally:
            slots.release(lane)
        self._settle(flight)
        pool = run.pool
        if self.config.pools[pool] * DUE_BUFFER - self._due[pool] >= self._refill[pool]:
            self._room.set()  # enough slots are free for a claim worth a statement
        if flight.lost:  # someone else owns the run now: our result would be fenced out
            self._forget(flight)
            return
        try:
            done = completion_for(
                flight.claimed,
                outcome,
                worker_id=self.id,
                started_at=started,
                finished_at=finished,
                rng=self.rng,
            )
        except Exception as exc:  # a defect of ours: the run must not stay held for it
            log.exception(
                "run %s: its next state could not be computed; it goes to the dead letter",
                run.id,
                extra=run_fields(run),
            )
            done = fallback_completion(
                flight.claimed,
                outcome,
                exc,
                worker_id=self.id,
                started_at=started,
                finished_at=finished,
            )
        ctx = flight.ctx
        if ctx.has_unsent_report or run.id in self._reporting:
            # The handler's last report is not stored yet: the completion carries it.
            progress, message, checkpoint = ctx.last_report()
            done = dataclasses.replace(
                done, progress=progress, progress_message=message, checkpoint=checkpoint
            )
        log_attempt_end(flight.claimed, done, flight.error)
        pending = self._starts.get(run.id)
        if pending is not None and pending[0].fence == run.fence:
            del self._starts[run.id]  # not written yet: the completion records the start
            pending[1].set_result(True)
        self._completions.put_nowait(done)

    async def _execute(self, flight: _InFlight) -> Outcome:
        claimed, ctx = flight.claimed, flight.ctx
        self._arm(flight)
        try:
            outcome = await self._dispatch(claimed, ctx)
        except asyncio.CancelledError:
            # Only the watchdog, _stop_run and _release cancel a run's task; _fire decides
            # by flight.lost whether this outcome is ours to report.
            outcome = Outcome(OutcomeKind.CANCELLED, "Cancelled", "the run was cancelled")
        except RunCancelled as exc:
            outcome = Outcome(OutcomeKind.CANCELLED, "Cancelled", str(exc))
        except PermanentError as exc:
            outcome = Outcome(OutcomeKind.PERMANENT, type(exc).__name__, str(exc))
        except Exception as exc:
            flight.error = exc
            outcome = Outcome(OutcomeKind.FAILED, type(exc).__name__, str(exc) or repr(exc))
        flight.deadline = math.inf
        if flight.timed_out:  # whatever the action made of its cancellation
            message = f"the run did not finish within its timeout of {claimed.timeout_seconds} s"
            # A command's output up to its stop is kept.
            return Outcome(OutcomeKind.TIMED_OUT, "Timeout", message, output=outcome.output)
        return outcome

    def _arm(self, flight: _InFlight) -> None:
        """Give a starting run its deadline; wake the watchdog sooner if it is the first."""
        loop = asyncio.get_running_loop()
        flight.deadline = deadline = loop.time() + flight.claimed.timeout_seconds
        if deadline < self._watchdog_at:
            self._watch_at(loop, deadline)

    def _watch_at(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        when = max(when, loop.time() + WATCHDOG_GRANULARITY)
        self._watchdog_at = when
        self._watchdog = loop.call_at(when, self._watch)

    def _watch(self) -> None:
        """Stop the runs past their deadline: one scan for all, instead of a timer per
        run (asyncio.timeout costs about 7 µs a run; a worker starts thousands a second)."""
        self._watchdog, self._watchdog_at = None, math.inf
        loop = asyncio.get_running_loop()
        now, soonest = loop.time(), math.inf
        for flight in self._inflight.values():
            if flight.deadline <= now:
                flight.deadline = math.inf
                flight.timed_out = True
                flight.ctx.cancelled.set()
                if flight.task is not None:
                    flight.task.cancel()
            elif flight.deadline < soonest:
                soonest = flight.deadline
        if soonest < math.inf:
            self._watch_at(loop, soonest)

    async def _dispatch(self, claimed: ClaimedRun, ctx: RunContext) -> Outcome:
        action = claimed.action
        kind = action.get("type")
        if kind == "webhook":
            return await self.webhooks.execute(action, ctx, claimed.timeout_seconds)
        if kind == "publish":
            return await self.publisher.execute(action, ctx, claimed.timeout_seconds)
        if kind == "pipeline":
            return await self._start_pipeline(claimed)
        if kind == "command":
            return await self.commands.execute(action, ctx, claimed.timeout_seconds)
        name = str(action.get("name"))
        handler = self.handlers.get(name)
        if handler is None:
            message = f"no handler named {name!r} in worker {self.id}; register it or fix the job"
            return Outcome(OutcomeKind.FAILED, "UnknownHandler", message)
        if handler.is_async:  # awaited here: call_handler's coroutine would be one more a run
            value = await handler.fn(ctx)
        else:
            value = await call_handler(handler, ctx, self._threads)
        if ctx.cancelled.is_set():
            return Outcome(OutcomeKind.CANCELLED, "Cancelled", "the run was cancelled")
        if value is None:
            return SUCCEEDED
        return result_outcome(value, task=claimed.run.pipeline_run_id is not None)

    async def _start_pipeline(self, claimed: ClaimedRun) -> Outcome:
        """A run of a pipeline's job starts a pipeline run, keyed by the run: a retry of
        it (this worker died before completing) finds the one it started."""
        run = claimed.run
        pipeline_id = str(claimed.action.get("pipeline_id"))
        pipeline = await self.store.get_pipeline(run.tenant_id, pipeline_id)
        if pipeline is None or pipeline.state.value == "deleted":
            message = f"pipeline {pipeline_id} does not exist (deleted?): nothing to start"
            return Outcome(OutcomeKind.PERMANENT, "UnknownPipeline", message)
        start = PipelineRunStart.of(
            pipeline,
            job_id=run.job_id,
            job_version=run.job_version,
            actor=f"job {run.job_id}",
            now=self.clock.now(),
            trigger_run_id=run.id,
        )
        started = await self.store.start_pipeline_run(start)
        return Outcome(OutcomeKind.SUCCEEDED, result=json.dumps({"pipeline_run_id": started.id}))

    def _stop_run(self, flight: _InFlight) -> None:
        flight.ctx.cancelled.set()
        if flight.task is not None and flight.claimed.action.get("type") in _ABORTABLE:
            flight.task.cancel()  # aborts the request or the publish; stops a command's group

    # -- starts ------------------------------------------------------------------------
    def _mark(self, flight: _InFlight, started: datetime) -> asyncio.Future[bool]:
        """Ask for the start of a run claimed ahead to be stored (see _start_loop); the
        future says whether it was (False: the run is no longer this worker's)."""
        run = flight.claimed.run
        marked: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._starts[run.id] = (Start(run.id, run.fence, started), marked)
        self._starting.set()
        return marked

    async def _start_loop(self) -> None:
        """Store the starts that :meth:`_mark` asks for, in one write for all that came
        since the last (runs due at one instant begin together)."""
        outage = Outage(log, "recording starts")
        while True:
            await self._starting.wait()
            self._starting.clear()
            if not self._starts:
                continue
            batch = sorted(self._starts.values(), key=lambda m: m[0].run_id)
            self._starts.clear()
            try:
                marked = set(await self.store.mark_started(self.id, [m for m, _ in batch]))
                outage.ok()
            except Exception as exc:
                # Asked again with the next starts, unless the run was lost meanwhile.
                for mark, waiter in batch:
                    flight = self._inflight.get(mark.run_id)
                    if flight is None or flight.lost or waiter.done():
                        if not waiter.done():
                            waiter.set_result(False)
                    else:
                        self._starts.setdefault(mark.run_id, (mark, waiter))
                await asyncio.sleep(outage.failed(exc))
                self._starting.set()
                continue
            for mark, waiter in batch:
                if not waiter.done():
                    waiter.set_result(mark.run_id in marked)

    # -- completions ---------------------------------------------------------------------
    async def _completion_loop(self) -> None:
        while True:
            first = await self._completions.get()
            batch = [first]
            while len(batch) < self.config.completion_batch and not self._completions.empty():
                batch.append(self._completions.get_nowait())
            self._writes_done.clear()
            try:
                await self._write(batch)
            finally:
                self._writes_done.set()

    async def _write(self, batch: list[Completion]) -> None:
        """Write completions, retrying until the store takes them: a result is never
        dropped, and the fence keeps a late write harmless."""
        # Each completion's own claim, taken before the write: once the store has it, a
        # retry of the run may be claimed again (a new flight under the same run id).
        flights = [self._inflight.get(done.run_id) for done in batch]
        while True:
            try:
                accepted = set(await self.store.complete_runs(batch))
                self._completion_outage.ok()
                break
            except Exception as exc:
                await asyncio.sleep(self._completion_outage.failed(exc))
        recorded = []
        limited = set()
        for i, (done, flight) in enumerate(zip(batch, flights, strict=True)):
            if i and not i % eventloop.TURN_HANDLES:
                await asyncio.sleep(0)  # as a claim's runs are begun: see _claim_pool
            if flight is not None and flight.claimed.run.fence == done.fence:
                self._forget(flight)
            else:
                flight = None
            if done.run_id not in accepted:
                log.warning(
                    "run %s: completion refused (fenced out)",
                    done.run_id,
                    extra={"run_id": done.run_id, "fence": done.fence},
                )
            elif flight is not None:
                run = flight.claimed.run
                recorded.append((run.pool, done))
                if run.concurrency_key is not None or run.overlap is Overlap.QUEUE:
                    limited.add(run.id)
        self.metrics.attempts_done(recorded, limited=limited)
        self.completed += len(accepted)
        self._room.set()

    async def _flush_all(self) -> None:
        batch = []
        while not self._completions.empty():
            batch.append(self._completions.get_nowait())
        if batch:
            await self._write(batch)

    # -- shutdown ------------------------------------------------------------------------
    async def _drain(self) -> None:
        """Stop claiming; release runs not started yet; give the rest the grace period."""
        # Runs not begun (waiting for their instant, a slot or a connection) go back at
        # once, uncharged: the grace period is for the runs already going.
        waiting = [f for f in self._inflight.values() if not f.started]
        await self._release(waiting, "released before it started: the worker is stopping")
        running = [f.task for f in self._inflight.values() if f.task is not None]
        if running:
            await asyncio.wait(running, timeout=self.config.grace_seconds)
        await self._flush_all()
        # A batch the completion loop took is still in flight until written: its runs
        # finished, and releasing them too could make a finished run pending again.
        await self._writes_done.wait()
        late = list(self._inflight.values())
        await self._release(late, "released: the worker stopped before the run finished")

    async def _release(self, flights: list[_InFlight], why: str) -> None:
        """Give the runs back to the store, which decides where each goes: pending
        again, or dead for an at-most-once run that had started (it never starts twice)."""
        for f in flights:
            f.lost = True  # the release below reports it, not the run's own task
            f.ctx.cancelled.set()
            if f.task is not None:
                f.task.cancel()
        releases = [
            Release(f.claimed.run.id, f.claimed.run.fence, self.id, f.started, why) for f in flights
        ]
        if not releases:
            return
        # A started run's attempt is recorded with its start: the starts not written yet
        # go first (the release reads them).
        marks = [m for f in flights if (m := self._starts.pop(f.claimed.run.id, None))]
        if marks:
            with contextlib.suppress(Exception):
                starts = sorted((start for start, _ in marks), key=lambda m: m.run_id)
                await self.store.mark_started(self.id, starts)
            for _, waiter in marks:
                if not waiter.done():
                    waiter.set_result(True)
        while True:
            try:
                result = await self.store.release_runs(releases, now=self.clock.now())
                self._completion_outage.ok()
                break
            except Exception as exc:
                await asyncio.sleep(self._completion_outage.failed(exc))
        for run_id in result.dead:
            log.warning("run %s: %s", run_id, REASON_AT_MOST_ONCE_STOPPED, extra={"run_id": run_id})
        # A run released after it started got an attempt (cancelled, WorkerShutdown).
        self.metrics.attempts_cancelled([f.claimed.run.pool for f in flights if f.started])
        for f in flights:
            self._forget(f)
        self._room.set()


_ABORTABLE = frozenset({"webhook", "publish", "command"})
"""Actions whose task a cancel stops at once (no handler code of the user's to unwind)."""


def lane_of(action: Mapping[str, Any]) -> Lane:
    """The connection lane a run needs: its webhook target's origin; None for others."""
    if action.get("type") != "webhook":
        return None
    return origin_of(str(action.get("url")))


def _woken(wait: asyncio.Future[bool]) -> bool:
    """Whether a finished wait for new runs was woken (not timed out, failed, cancelled)."""
    return wait.done() and not wait.cancelled() and wait.exception() is None and wait.result()
