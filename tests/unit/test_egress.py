"""The webhook egress policy: which targets a tenant's webhook may reach (docs/security.md)."""

from __future__ import annotations

import ipaddress

import pytest

from cronwheel.security.egress import (
    LOOPBACK,
    EgressPolicy,
    is_forbidden,
    literal_address,
    normal_host,
)

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

SPELLED = [
    # Spellings a client resolves to an internal address (issue 29, item 9): the host
    # as a browser, curl or a resolver reads it, not as written.
    ("[::127.0.0.1]", "::7f00:1"),  # IPv4-compatible around 127.0.0.1
    ("%31%32%37.0.0.1", "127.0.0.1"),  # percent-encoded digits
    ("%2531%2532%2537.0.0.1", "127.0.0.1"),  # …twice
    ("127%2e0%2e0%2e1", "127.0.0.1"),
    ("127。0。0。1", "127.0.0.1"),  # ideographic full stops (IDNA reads them as ".")
    ("127\uff0e0\uff0e0\uff0e1", "127.0.0.1"),  # fullwidth full stops
    ("127\uff610\uff610\uff611", "127.0.0.1"),  # halfwidth ideographic full stops
    ("\uff11\uff12\uff17.0.0.1", "127.0.0.1"),  # fullwidth digits (NFKC)
    (
        "\uff11\uff16\uff19\uff0e\uff12\uff15\uff14\uff0e\uff11\uff16\uff19\uff0e\uff12\uff15\uff14",
        "169.254.169.254",
    ),
    ("[::a9fe:a9fe]", "::a9fe:a9fe"),  # IPv4-compatible around 169.254.169.254
    ("[::ffff:0:a9fe:a9fe]", "::ffff:0:a9fe:a9fe"),  # IPv4-translated (SIIT)
    ("[::ffff:0:127.0.0.1]", "::ffff:0:7f00:1"),
    ("[64:ff9b:1::a9fe:a9fe]", "64:ff9b:1::a9fe:a9fe"),  # local-use NAT64
    ("[64:ff9b:1::808:808]", "64:ff9b:1::808:808"),  # local-use NAT64: never global
    ("[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe"),  # well-known NAT64
    ("[fec0::1]", "fec0::1"),  # site-local (deprecated)
    ("[FEFF::1]", "feff::1"),
]
PUBLIC = [
    "https://example.com/hook",
    "http://8.8.8.8/",
    "http://%38.8.8.8/",
    "http://\uff18.\uff18.\uff18.\uff18/",
    "http://[2606:4700::1111]/",
    "http://[::ffff:8.8.8.8]/",
    "http://[64:ff9b::808:808]/",
    "http://[2002:808:808::1]/",
    "http://deadbeef/",
    "https://bücher.example/",
    "https://xn--bcher-kva.example/",
]


@pytest.mark.parametrize(("host", "address"), SPELLED)
def test_every_spelling_of_an_internal_address_is_refused(host: str, address: str) -> None:
    assert str(literal_address(host)) == address
    why = EgressPolicy().url_refusal(f"http://{host}:8080/admin")
    assert why is not None and "internal address" in why, host


@pytest.mark.parametrize("url", PUBLIC)
def test_public_targets_in_any_spelling_stay_allowed(url: str) -> None:
    assert EgressPolicy().url_refusal(url) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/",
        "http://%6c%6f%63%61%6c%68%6f%73%74/",
        "http://metadata。google。internal/",
    ],
)
def test_internal_names_are_refused_in_any_spelling(url: str) -> None:
    why = EgressPolicy().url_refusal(url)
    assert why is not None and "internal host name" in why


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1%00.example.com/", "http://127.0.0.1%2f.example.com/"]
)
def test_a_host_with_a_nul_or_a_slash_once_decoded_is_refused(url: str) -> None:
    assert EgressPolicy().url_refusal(url) is not None


def test_normal_host_reads_a_host_as_a_client_does() -> None:
    assert normal_host("[::1]") == "::1"
    assert normal_host("%31%32%37。\uff10\uff0e0\uff611.") == "127.0.0.1"
    assert normal_host("\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.com") == "example.com"


def test_an_allowed_network_allows_its_addresses_in_every_ipv6_wrapping() -> None:
    policy = EgressPolicy().also("127.0.0.0/8")
    assert policy.url_refusal("http://[::127.0.0.1]/") is None
    assert policy.url_refusal("http://\uff11\uff12\uff17.0.0.1/") is None
    assert policy.url_refusal("http://[::a9fe:a9fe]/") is not None


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
    for text in ("::a9fe:a9fe", "::ffff:0:a9fe:a9fe", "64:ff9b:1::a9fe:a9fe", "fec0::1"):
        assert is_forbidden(ipaddress.ip_address(text)), text
    for text in ("::ffff:8.8.8.8", "64:ff9b::808:808", "2606:4700::1111"):
        assert not is_forbidden(ipaddress.ip_address(text)), text
