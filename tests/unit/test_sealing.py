"""The sealing of secrets (cronwheel.security.sealing) and the access log's query strings."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cronwheel.errors import InvalidInput
from cronwheel.observability.logs import AccessQueryFilter, TextFormatter, without_query_values
from cronwheel.security.sealing import (
    PREFIX,
    URL_PREFIX,
    Sealer,
    SecretsKeyMissing,
    SecretUnreadable,
    generate_key,
    keep_masked,
    open_action,
    reseal_action,
    seal_action,
    secret_names,
    sent_secrets,
)

OLD, NEW = generate_key(), generate_key()


def test_the_documented_names_are_secret_and_others_only_when_listed() -> None:
    headers = {
        "Authorization": "a",
        "Proxy-Authorization": "b",
        "X-Api-Key": "c",
        "Cookie": "d",
        "X-Auth-Token": "e",
        "X-Client-Secret": "f",
        "X-Password": "g",
        "X-Team": "h",
        "X-Partner": "i",
    }
    action = {"type": "webhook", "url": "https://e.com", "headers": headers}
    assert secret_names(action) == {h.lower() for h in headers} - {"x-team", "x-partner"}
    listed = {**action, "secret_headers": ["X-PARTNER"]}
    assert "x-partner" in secret_names(listed)


def test_rotation_old_keys_open_the_first_seals_and_reseal_moves_to_it() -> None:
    action = {
        "type": "webhook",
        "url": "https://u:pa%40ss@e.com/h",
        "headers": {"Authorization": "Bearer t0ken-1", "X-Team": "ops"},
    }
    sealed = seal_action(action, "acme", Sealer([OLD]))
    assert sealed["headers"]["Authorization"].startswith(PREFIX)
    assert sealed["headers"]["X-Team"] == "ops"
    assert f"u:{URL_PREFIX}" in sealed["url"] and "pa%40ss" not in sealed["url"]
    both = Sealer([NEW, OLD])
    assert open_action(sealed, "acme", both) == action  # the old key still opens
    assert reseal_action(sealed, "acme", Sealer([OLD])) is None  # already on the first key
    resealed = reseal_action(sealed, "acme", both)
    assert resealed is not None and reseal_action(resealed, "acme", both) is None
    assert open_action(resealed, "acme", Sealer([NEW])) == action  # the old key can go
    with pytest.raises(SecretUnreadable, match=r"Authorization|URL"):
        open_action(resealed, "acme", Sealer([OLD]))


def test_plain_secrets_stored_before_sealing_are_sealed_by_reseal() -> None:
    plain = {"type": "webhook", "url": "https://e.com/h", "headers": {"X-Api-Key": "k3y-value"}}
    resealed = reseal_action(plain, "acme", Sealer([NEW]))
    assert resealed is not None and "k3y-value" not in repr(resealed)
    assert open_action(resealed, "acme", Sealer([NEW])) == {**plain, "url": "https://e.com/h"}


def test_no_key_refuses_to_store_and_fails_to_open() -> None:
    action = {"type": "webhook", "url": "https://e.com", "headers": {"Cookie": "c=1"}}
    with pytest.raises(InvalidInput) as refused:
        seal_action(action, "acme", None)
    assert refused.value.field == "action.headers.Cookie"
    url = {"type": "webhook", "url": "https://u:p@e.com"}
    with pytest.raises(InvalidInput) as refused:
        seal_action(url, "acme", None)
    assert refused.value.field == "action.url"
    sealed = seal_action(action, "acme", Sealer([OLD]))
    with pytest.raises(SecretsKeyMissing, match="CRONWHEEL_SECRETS_KEY"):
        open_action(sealed, "acme", None)


def test_a_bad_key_is_refused_naming_its_place() -> None:
    with pytest.raises(ValueError, match="key 2 is not a Fernet key"):
        Sealer.from_text(f"{NEW},not-a-key")


def test_access_lines_show_no_query_value() -> None:
    assert without_query_values("/v1/jobs") == "/v1/jobs"
    assert without_query_values("/x?token=abc&limit=5&flag") == "/x?token=***&limit=5&***"
    # Only secret-looking names are masked; the others stay readable.
    assert (
        without_query_values("/v1/jobs?name=nightly&limit=20&cursor=abc&state=")
        == "/v1/jobs?name=nightly&limit=20&cursor=abc&state=***"
    )
    for name in (
        "api_key",
        "X-Api-Key",
        "password",
        "client_secret",
        "sig",
        "Signature",
        "auth",
        "access_token",
        "%74oken",
        "session",
        "code",
        "passwd",
    ):
        assert without_query_values(f"/x?{name}=s3cr3t&q=cron") == f"/x?{name}=***&q=cron"
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", "/v1/jobs?token=s3cr3t-q", "1.1", 200),
        None,
    )
    assert AccessQueryFilter().filter(record)
    line = TextFormatter().format(record)
    assert "s3cr3t-q" not in line and "/v1/jobs?token=***" in line


async def test_connect_on_a_dev_file_seals_with_the_key_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cronwheel
    from cronwheel.security.sealing import ENV, dev_sealer

    monkeypatch.delenv(ENV, raising=False)
    db = tmp_path / "dev.db"
    action = {"type": "webhook", "url": "https://e.com/h", "headers": {"X-Api-Key": "k-1"}}
    async with await cronwheel.connect(f"sqlite:///{db}") as cw:
        with pytest.raises(InvalidInput):  # no key anywhere yet: refused
            await cw.create(name="a", schedule={"kind": "manual"}, action=action)
    sealer, where = dev_sealer(str(db), None)  # what cronwheel dev makes on its first start
    assert where == f"{db}.secrets-key"
    async with await cronwheel.connect(f"sqlite:///{db}") as cw:
        job = await cw.create(name="b", schedule={"kind": "manual"}, action=action)
    assert sealer.open(job.action["headers"]["X-Api-Key"], "default") == "k-1"


def test_a_header_sent_as_stars_is_kept_only_for_the_same_origin() -> None:
    current = {
        "type": "webhook",
        "url": "https://partner.example/hook",
        "headers": {"Authorization": PREFIX + "sealed", "X-Team": "ops"},
    }
    as_read = {**current, "headers": {"Authorization": "***", "X-Team": "ops"}}
    for url in ("https://PARTNER.example:443/other?q=1", "https://partner.example"):
        kept = keep_masked({**as_read, "url": url}, current)
        assert kept["headers"]["Authorization"] == PREFIX + "sealed"
    for url in (
        "http://partner.example/hook",
        "https://partner.example:8443/hook",
        "https://evil.example/hook",
        "https://partner.example.evil.example/",
    ):
        with pytest.raises(InvalidInput) as refused:
            keep_masked({**as_read, "url": url}, current, "tasks.t.action")
        assert refused.value.field == "tasks.t.action.headers.Authorization"
        assert "a stored secret is not sent to a new destination" in refused.value.reason
    given = {**as_read, "url": "https://evil.example/", "headers": {"Authorization": "Bearer new"}}
    assert keep_masked(given, current)["headers"] == {"Authorization": "Bearer new"}


def test_the_secrets_a_request_carried_include_every_form_a_target_may_echo() -> None:
    import base64

    action = {
        "type": "webhook",
        "url": "https://hook%40user:p%40ss-word@example.com/h",
        "headers": {"Authorization": "Bearer tok-123456", "X-Team": "ops-team"},
    }
    found = sent_secrets(action)
    basic = base64.b64encode(b"hook@user:p@ss-word").decode()  # as httpx builds it
    assert {"Bearer tok-123456", "tok-123456", "p@ss-word", "p%40ss-word", basic} <= found
    assert base64.b64encode(b"tok-123456").decode() in found
    assert "ops-team" not in found
