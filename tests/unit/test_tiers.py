"""The tiers hold: a unit test cannot reach the network or start a process, every test
file has a tier, and the one-store tiers run on the store asked for."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests import tiers
from tests.conftest import IOInUnitTier


def test_a_unit_test_that_opens_a_socket_is_stopped_naming_itself() -> None:
    with pytest.raises(IOInUnitTier, match="test_a_unit_test_that_opens_a_socket"):
        socket.create_connection(("127.0.0.1", 5432), timeout=1)


def test_a_unit_test_that_starts_a_process_is_stopped() -> None:
    with pytest.raises(IOInUnitTier, match="move it to a tier"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)


def test_each_folder_has_its_tier_and_an_unknown_one_is_refused() -> None:
    assert tiers.tier_of(tiers.TESTS / "unit" / "test_x.py") == "unit"
    assert tiers.tier_of(tiers.TESTS / "store" / "test_x.py") == "contract"
    assert tiers.tier_of(tiers.TESTS / "engine" / "test_x.py") == "service"
    assert tiers.tier_of(tiers.TESTS / "cluster" / "test_x.py") == "process"
    assert tiers.tier_of(tiers.TESTS / "docs" / "test_blocks.py") == "unit"
    with pytest.raises(LookupError, match=r"nowhere/test_x\.py is in no test tier"):
        tiers.tier_of(tiers.TESTS / "nowhere" / "test_x.py")
    folders = {p.parent.name for p in tiers.TESTS.glob("*/test_*.py")}
    assert all(tiers.tier_of(tiers.TESTS / f / "test_x.py") for f in folders)


def test_the_one_store_tiers_take_their_store_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CRONWHEEL_TEST_STORE", raising=False)
    assert tiers.stores_for_one_store_tiers() == ("sqlite",)
    monkeypatch.setenv("CRONWHEEL_TEST_STORE", "postgres")
    assert tiers.stores_for_one_store_tiers() == ("postgres",)
    monkeypatch.setenv("CRONWHEEL_TEST_STORE", "both")
    assert tiers.stores_for_one_store_tiers() == ("sqlite", "postgres")
    monkeypatch.setenv("CRONWHEEL_TEST_STORE", "mysql")
    with pytest.raises(ValueError, match="CRONWHEEL_TEST_STORE='mysql'"):
        tiers.stores_for_one_store_tiers()
