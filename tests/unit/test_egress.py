"""The webhook egress policy: which targets a tenant's webhook may reach (docs/security.md)."""

from __future__ import annotations

import ipaddress

import pytest

from cronwheel.security.egress import LOOPBACK, EgressPolicy, is_forbidden, literal_address

INTERNAL = [
    "http://127.0.0.1/",
    "http://127.0.0.1:8080/admin",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://api.localhost/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0x7f.1/",
    "http://017700000001/",
    "http://127.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata.goog/",
    "http://printer.local/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://[fd00::1]/",
    "http://[fe80::1]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://240.0.0.1/",
    "http://[2002:7f00:1::]/",  # 6to4 around 127.0.0.1
    "http://[64:ff9b::a00:1]/",  # NAT64 around 10.0.0.1
    "http://user:pw@127.0.0.1/",
]


@pytest.mark.parametrize("url", INTERNAL)
def test_internal_targets_are_refused_by_default(url: str) -> None:
    why = EgressPolicy().url_refusal(url)
    assert why is not None and "not allowed for webhooks" in why


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hook",
        "http://8.8.8.8/",
        "http://[2606:4700::1111]/",
        "http://deadbeef/",
    ],
)
def test_public_targets_and_ordinary_names_pass_creation(url: str) -> None:
    assert EgressPolicy().url_refusal(url) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("example.com", None),
        ("beef", None),
    ],
)
def test_every_spelling_of_an_address_is_read_as_one(host: str, address: str | None) -> None:
    found = literal_address(host)
    assert (None if found is None else str(found)) == address


def test_the_allow_list_opens_exactly_what_it_names() -> None:
    policy = EgressPolicy.parse(["10.1.0.0/16", "billing.internal,  192.168.7.7"])
    assert policy.url_refusal("http://10.1.2.3/") is None
    assert policy.url_refusal("http://10.2.0.1/") is not None
    assert policy.url_refusal("http://billing.internal/") is None
    assert policy.url_refusal("http://other.internal/") is not None
    assert policy.url_refusal("http://192.168.7.7/") is None
    assert policy.url_refusal("http://[::ffff:192.168.7.7]/") is None
    assert policy.url_refusal("http://127.0.0.1/") is not None
    assert policy.host_allowed("Billing.Internal.")


def test_loopback_allows_this_machine_in_all_its_spellings_and_nothing_else() -> None:
    policy = EgressPolicy().also(*LOOPBACK)
    for url in ("http://127.0.0.1:9/", "http://localhost/", "http://[::1]/", "http://2130706433/"):
        assert policy.url_refusal(url) is None, url
    assert policy.url_refusal("http://169.254.169.254/") is not None
    assert policy.url_refusal("http://metadata.google.internal/") is not None
    assert policy.allows_loopback and not EgressPolicy().allows_loopback


def test_the_environment_adds_to_the_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRONWHEEL_WEBHOOK_ALLOW", "10.9.0.0/16, hooks.svc")
    policy = EgressPolicy.from_env("192.168.0.0/24")
    assert policy.address_allowed(ipaddress.ip_address("10.9.1.1"))
    assert policy.address_allowed(ipaddress.ip_address("192.168.0.9"))
    assert policy.host_allowed("hooks.svc")


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "not a host", "http://x/"])
def test_a_bad_allow_list_entry_is_named(entry: str) -> None:
    with pytest.raises(ValueError, match="neither a CIDR"):
        EgressPolicy.parse([entry])


def test_forbidden_covers_the_special_ranges() -> None:
    assert not is_forbidden(ipaddress.ip_address("93.184.216.34"))
    for text in ("127.0.0.1", "10.0.0.1", "169.254.169.254", "fc00::1", "ff05::1", "::"):
        assert is_forbidden(ipaddress.ip_address(text)), text
