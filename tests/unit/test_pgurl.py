"""Multi-host PostgreSQL URLs (issue 31 item 1, decision 0050): parsed as libpq writes
them, and a malformed one refused with the option and the reason."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cronwheel.cli import main
from cronwheel.errors import InvalidInput
from cronwheel.store import pgurl, store_url
from cronwheel.store.postgres._connect import where

URL = "postgresql://app:s3cret-pw@db1:5432,db2:5433/jobs?target_session_attrs=read-write"


def test_hosts_ports_and_attributes_in_order() -> None:
    found = pgurl.parse(URL)
    assert found.hosts == (("db1", 5432), ("db2", 5433))
    assert found.target_session_attrs == "read-write"
    assert found.where == "db1:5432,db2:5433"
    assert pgurl.parse("postgresql://db1,[::1]:6000/jobs").where == "db1:5432,[::1]:6000"
    assert where(URL) == "db1:5432,db2:5433"  # messages name every host, never the password


@pytest.mark.parametrize(
    ("url", "attrs"),
    [
        ("postgresql://db1,db2/jobs", "read-write"),  # several hosts: the writable one
        ("postgresql://db1/jobs", "read-write"),  # one name that may move: the same
        ("postgresql://db1,db2/jobs?target_session_attrs=primary", "primary"),
        ("postgresql://db1,db2/jobs?target_session_attrs=any", "any"),
    ],
)
def test_the_store_connects_to_the_writable_primary_unless_told(url: str, attrs: str) -> None:
    assert pgurl.primary_attrs(url) == attrs


@pytest.mark.parametrize(
    ("url", "attrs"),
    [
        ("postgresql://db2,db3/jobs", "prefer-standby"),
        ("postgresql://db2,db3/jobs?target_session_attrs=prefer-standby", "prefer-standby"),
        # read-only would let the primary in: replica connections are read-only themselves
        ("postgresql://db2,db3/jobs?target_session_attrs=read-only", "standby"),
    ],
)
def test_a_read_replica_connects_to_a_standby(url: str, attrs: str) -> None:
    assert pgurl.replica_attrs(url) == attrs


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("postgresql://db1:5432,db2:abc/jobs", ["port of host 2 of 2", "'abc'", "1 to 65535"]),
        ("postgresql://db1:5432,,db2/jobs", ["host 2 of 3", "is empty", "separated by commas"]),
        ("postgresql://db1:99999/jobs", ["port of the host", "'99999'"]),
        ("postgresql://db1:1:2/jobs", ["two ':'", "[addr]:port"]),
        ("postgresql://db1,db2/jobs?target_session_attrs=writable", ["writable", "read-write"]),
        ("postgresql://db1,db2/jobs?target_session_attrs=read-only", ["standby", "cannot write"]),
    ],
)
def test_a_bad_store_url_names_the_host_and_the_reason(url: str, words: list[str]) -> None:
    with pytest.raises(InvalidInput) as raised:
        store_url(url.replace("//", "//app:s3cret-pw@", 1))
    assert raised.value.field == "url"
    for word in words:
        assert word in raised.value.reason
    assert "s3cret-pw" not in raised.value.reason


def test_a_read_replica_naming_the_primary_is_refused() -> None:
    with pytest.raises(InvalidInput) as raised:
        pgurl.replica_attrs("postgresql://db1,db2/jobs?target_session_attrs=read-write")
    assert raised.value.field == "read_replica"
    assert "prefer-standby" in raised.value.reason


@pytest.mark.parametrize("command", [["scheduler"], ["worker"], ["migrate"], ["api", "--no-auth"]])
def test_every_process_refuses_a_bad_multi_host_url_naming_the_option(command: list[str]) -> None:
    bad = "postgresql://app:s3cret-pw@db1:5432,db2:54x2/jobs?target_session_attrs=read-write"
    result = CliRunner().invoke(main, [*command, "--db", bad])
    assert result.exit_code == 2, result.output
    assert "--db" in result.output and "54x2" in result.output
    assert "s3cret-pw" not in result.output


def test_the_api_refuses_a_bad_read_replica_url_naming_the_option() -> None:
    db = "postgresql://app@db1,db2/jobs"
    replica = "postgresql://db2,db3/jobs?target_session_attrs=primary"
    result = CliRunner().invoke(main, ["api", "--no-auth", "--db", db, "--read-replica", replica])
    assert result.exit_code == 2, result.output
    assert "--read-replica" in result.output and "prefer-standby" in result.output
