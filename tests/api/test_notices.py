"""The served pools behind `no_live_worker` notices: one query per tenant, reused for a
few seconds, on each store."""

from __future__ import annotations

from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import WorkerInfo
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at
from cronwheel.web.notices import Notices


def _worker(pools: tuple[str, ...]) -> WorkerInfo:
    return WorkerInfo("host-1-w", "default", "h", pools, 1, 0, at(0), at(0))


async def test_served_pools_are_reused_for_a_few_seconds_per_tenant(store: Store) -> None:
    ticks = [100.0]
    notices = Notices(store, FrozenClock(at(1)), cache_seconds=2.0, monotonic=lambda: ticks[0])
    assert await notices.served_pools("default") == set()
    await store.register_worker(_worker(("email",)))
    ticks[0] = 101.9
    assert await notices.served_pools("default") == set()  # still the answer of 100.0
    assert await notices.served_pools("acme") == {"email"}  # each tenant its own answer
    ticks[0] = 102.0
    assert await notices.served_pools("default") == {"email"}
