"""The store conformance suite: what any implementation of the store must do, as tests.

The tests of both built-in stores live here, in the package, split by seam (the protocols
of :mod:`cronwheel.store.base`, decision 0041), so that any store can run them against
itself, as River's ``riverdrivertest`` does for its drivers. They need pytest and
pytest-asyncio (``asyncio_mode = "auto"``) and one fixture, ``store``: a migrated, empty
store, closed after the test. Some tests also ask for ``store2`` (a second store on the
same database, as a second process would open it: give one where your backend has
processes; the tests that need it are the ones about racing claimers and schedulers).

Run everything against your store::

    # tests/test_my_store.py
    import pytest
    from cronwheel.store.conformance import StoreSuite

    class TestMyStore(StoreSuite):
        @pytest.fixture
        async def store(self, tmp_path):
            store = await MyStore.open(tmp_path / "db")
            await store.migrate()
            yield store
            await store.close()

or one seam at a time (``QueueSuite``, ``CatalogueSuite``, …), or one group of tests
(``ClaimsContract``, ``FairClaimsContract``, …, from the seam's package). cronwheel's own
suite runs every group on SQLite and PostgreSQL in ``tests/store/``, where the tests that
hold for one backend only (statement plans, partitions, SQLite's write queue) sit beside
the group they extend.

Where the two built-in stores differ by design, a test says so by asking which one it
has (history's archive moves finished runs out of the live table on PostgreSQL only): a
third store answers as SQLite does unless it is named ``PostgresStore``.
"""

from __future__ import annotations

from cronwheel.store.conformance.catalogue import CatalogueSuite
from cronwheel.store.conformance.history import HistorySuite
from cronwheel.store.conformance.housekeeping import HousekeepingSuite
from cronwheel.store.conformance.leases import LeasesSuite
from cronwheel.store.conformance.outbox import OutboxSuite
from cronwheel.store.conformance.queue import QueueSuite
from cronwheel.store.conformance.run_control import RunControlSuite
from cronwheel.store.conformance.setup import SetupSuite
from cronwheel.store.conformance.status import StatusSuite


class StoreSuite(
    QueueSuite,
    LeasesSuite,
    CatalogueSuite,
    RunControlSuite,
    HistorySuite,
    HousekeepingSuite,
    StatusSuite,
    OutboxSuite,
    SetupSuite,
):
    """The whole contract: every seam's tests."""


__all__ = [
    "CatalogueSuite",
    "HistorySuite",
    "HousekeepingSuite",
    "LeasesSuite",
    "OutboxSuite",
    "QueueSuite",
    "RunControlSuite",
    "SetupSuite",
    "StatusSuite",
    "StoreSuite",
]
