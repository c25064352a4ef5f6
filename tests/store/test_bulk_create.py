"""Conformance: large batches of new jobs, written a few statements at a time, read back
job by job as they were given, all or nothing."""

from __future__ import annotations

import pytest

from cronwheel.store.conformance.catalogue.bulk_create import BulkCreateContract
from cronwheel.store.sqlite import _ops as sqlite_ops
from cronwheel.store.sqlite import _rows as sqlite_rows


class TestBulkCreate(BulkCreateContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


@pytest.mark.parametrize(
    "name", ["plain", "é ü 漢字 🎉", 'a "quote" and \\ backslash', "tab\tnewline\n nul\x00"]
)
def test_sqlite_audit_details_are_the_json_one_entry_at_a_time_wrote(name: str) -> None:
    assert sqlite_ops._created_details(3, name) == sqlite_rows.dumps({"version": 3, "name": name})
