"""``--broker NAME=URL`` (issue 30 item 2): each entry checked before anything starts,
with a message naming the option and the reason, never quoting the URL's password."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from cronwheel.cli import main
from cronwheel.core.brokers import parse_broker, target_problem

PASSWORD = "s3cret-broker-pw"


@pytest.mark.parametrize("command", ["worker", "dev"])
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("events", "write NAME=URL"),
        (f"events=kafka://u:{PASSWORD}@host:9092", "a broker URL starts with one of"),
        (f"bad name=nats://u:{PASSWORD}@h:4222", "is 1-64 letters"),
    ],
)
def test_a_bad_broker_is_a_usage_error_naming_the_option(
    command: str, value: str, reason: str
) -> None:
    args = [command, "--db", "sqlite:///:memory:", "--broker", value]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "--broker" in result.output and reason in result.output
    assert PASSWORD not in result.output


def test_a_broker_named_twice_is_refused() -> None:
    args = ["worker", "--db", "sqlite:///:memory:"]
    args += ["--broker", "a=nats://h:4222", "--broker", "a=redis://h:6379"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "named twice" in result.output


def test_a_missing_client_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    # The test environment has every broker's library: pretend aio_pika is not there.
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "aio_pika" else real(name, *a)
    )
    url = f"amqp://guest:{PASSWORD}@127.0.0.1:5672/"
    result = CliRunner().invoke(
        main, ["worker", "--db", "sqlite:///:memory:", "--broker", f"jobs={url}"]
    )
    assert result.exit_code == 2, result.output
    assert "pip install 'cronwheel[rabbitmq]'" in result.output
    assert PASSWORD not in result.output


def test_parse_broker_gives_the_kind() -> None:
    assert parse_broker("events=nats://127.0.0.1:4222")[::2][0] == "events"
    assert parse_broker("events=tls://h:4222")[2].name == "nats"
    assert parse_broker("q=amqps://u:p@h/vh")[2].name == "rabbitmq"
    assert parse_broker("s=rediss://h:6380/1")[2].name == "redis"


@pytest.mark.parametrize(
    ("kind", "to", "ok"),
    [
        ("nats", "orders.created", True),
        ("nats", "orders.*", False),
        ("nats", "orders.>", False),
        ("nats", "a..b", False),
        ("nats", "has space", False),
        ("rabbitmq", "billing/invoice.paid", True),
        ("rabbitmq", "/queue-name", True),
        ("rabbitmq", "no-slash", False),
        ("rabbitmq", "bad exchange/k", False),
        ("redis", "any:key{with}braces", True),
        ("redis", "", False),
    ],
)
def test_what_to_names_is_checked_by_the_brokers_kind(kind: str, to: str, ok: bool) -> None:
    assert (target_problem(kind, to) is None) == ok


def test_the_cli_job_view_says_where_a_publish_goes() -> None:
    from cronwheel.cli.describe import action_words

    action = {"type": "publish", "broker": "events", "to": "orders.created", "body": {"a": 1}}
    assert action_words(action) == [
        "publish to orders.created on broker events",
        '  body: {"a": 1}',
    ]


def test_a_worker_config_refuses_a_broker_url_of_no_kind_or_a_bad_name() -> None:
    from cronwheel.engine.worker import WorkerConfig

    with pytest.raises(ValueError, match="brokers: events: a broker URL starts with"):
        WorkerConfig(brokers={"events": f"kafka://u:{PASSWORD}@h:9092"})
    with pytest.raises(ValueError, match="is not a broker name"):
        WorkerConfig(brokers={"no spaces": "nats://h:4222"})


def test_a_worker_refuses_to_start_without_its_brokers_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cronwheel.actions.publish import MissingBrokerLibrary
    from cronwheel.engine.worker import Worker, WorkerConfig

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nats" else real(name, *a)
    )
    with pytest.raises(MissingBrokerLibrary, match=r"pip install 'cronwheel\[nats\]'"):
        Worker(None, WorkerConfig(brokers={"events": "nats://127.0.0.1:4222"}))
