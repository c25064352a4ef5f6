"""Conformance: tenants and their quotas, API keys, idempotent responses, the worker
registry."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from cronwheel.core.model import (
    DEFAULT_TENANT,
    ApiKey,
    JobState,
    Role,
    StoredResponse,
    Tenant,
    WorkerInfo,
)
from cronwheel.core.model import JSON as JSONValue
from cronwheel.errors import Conflict, NotFound
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import T0, at, make_job

# An instant with microseconds: both backends keep every one of them.
T0_US = T0 + timedelta(microseconds=123_457)


def _is_utc(instant: datetime | None) -> bool:
    return instant is not None and instant.utcoffset() == timedelta(0)


def make_tenant(tenant_id: str = "acme", **overrides: Any) -> Tenant:
    tenant = Tenant(
        id=tenant_id,
        name=f"{tenant_id.title()} Inc.",
        created_at=T0_US,
        max_jobs=100,
        max_creates_per_second=2.5,
    )
    return replace(tenant, **overrides)


def make_key(key_id: str = "k1", tenant_id: str = DEFAULT_TENANT, **overrides: Any) -> ApiKey:
    key = ApiKey(
        id=key_id,
        tenant_id=tenant_id,
        key_hash=f"sha256-of-{key_id}",
        role=Role.WRITE,
        created_at=T0_US,
        name=f"the {key_id} key",
    )
    return replace(key, **overrides)


def make_response(key: str = "idem-1", **overrides: Any) -> StoredResponse:
    response = StoredResponse(
        tenant_id=DEFAULT_TENANT,
        key=key,
        request_hash="hash-of-request-1",
        status=201,
        body={"id": "job-1", "state": "active", "tags": ["a", "b"]},
        created_at=T0_US,
    )
    return replace(response, **overrides)


def make_worker(worker_id: str = "w1", **overrides: Any) -> WorkerInfo:
    worker = WorkerInfo(
        id=worker_id,
        tenant_id=DEFAULT_TENANT,
        host="node-1",
        pools=("default", "mail"),
        capacity=8,
        in_flight=2,
        started_at=T0_US,
        last_seen_at=at(10),
    )
    return replace(worker, **overrides)


# -- tenants -------------------------------------------------------------------------


# -- API keys ------------------------------------------------------------------------


# -- API idempotency -------------------------------------------------------------------


# -- worker registry -------------------------------------------------------------------


# -- time --------------------------------------------------------------------------------


class TenantsKeysWorkersContract:
    """Tenants and their quotas, API keys, idempotent responses, the worker.

    Part of the ``catalogue`` seam's contract: subclass it with a ``store`` fixture to
    run it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_the_default_tenant_always_exists(self, store: Store) -> None:
        default = await store.get_tenant(DEFAULT_TENANT)
        assert default is not None
        assert (default.id, default.name, default.max_jobs, default.max_creates_per_second) == (
            DEFAULT_TENANT,
            DEFAULT_TENANT,
            None,
            None,
        )
        assert _is_utc(default.created_at)
        assert await store.list_tenants() == [default]

    async def test_a_created_tenant_reads_back_exactly(self, store: Store) -> None:
        acme = make_tenant()
        bare = make_tenant("bare", max_jobs=None, max_creates_per_second=None)
        await store.create_tenant(acme)
        await store.create_tenant(bare)
        assert await store.get_tenant("acme") == acme
        assert await store.get_tenant("bare") == bare
        stored = await store.get_tenant("acme")
        assert stored is not None and _is_utc(stored.created_at)

    async def test_an_unknown_tenant_is_none(self, store: Store) -> None:
        assert await store.get_tenant("nobody") is None

    async def test_a_tenant_id_is_taken_once(self, store: Store) -> None:
        await store.create_tenant(make_tenant())
        with pytest.raises(Conflict) as caught:
            await store.create_tenant(make_tenant(name="Impostor", max_jobs=1))
        assert (caught.value.field, caught.value.reason) == ("id", "tenant 'acme' already exists")
        assert await store.get_tenant("acme") == make_tenant()  # the first one is untouched
        with pytest.raises(Conflict) as caught:
            await store.create_tenant(make_tenant(DEFAULT_TENANT))
        assert caught.value.field == "id"

    async def test_ensure_tenant_leaves_an_existing_tenant_alone(self, store: Store) -> None:
        await store.create_tenant(make_tenant())
        await store.ensure_tenant("acme", "Another name", now=at(50))
        assert await store.get_tenant("acme") == make_tenant()

    async def test_tenants_are_listed_by_id(self, store: Store) -> None:
        for tenant_id in ("zeta", "acme", "mid"):
            await store.create_tenant(make_tenant(tenant_id))
        listed = await store.list_tenants()
        assert [t.id for t in listed] == ["acme", DEFAULT_TENANT, "mid", "zeta"]
        assert listed[0] == make_tenant("acme")

    async def test_update_replaces_name_and_quotas_but_not_created_at(self, store: Store) -> None:
        await store.create_tenant(make_tenant())
        changed = make_tenant(
            name="Acme Corp", max_jobs=5, max_creates_per_second=0.25, created_at=at(999)
        )
        updated = await store.update_tenant(changed)
        expected = replace(changed, created_at=T0_US)
        assert updated == expected
        assert await store.get_tenant("acme") == expected
        # Quotas can be lifted again.
        lifted = await store.update_tenant(
            replace(expected, max_jobs=None, max_creates_per_second=None)
        )
        assert (lifted.max_jobs, lifted.max_creates_per_second) == (None, None)
        assert await store.get_tenant("acme") == lifted

    async def test_the_default_tenant_can_be_given_quotas(self, store: Store) -> None:
        default = await store.get_tenant(DEFAULT_TENANT)
        assert default is not None
        updated = await store.update_tenant(replace(default, max_jobs=3))
        assert updated == replace(default, max_jobs=3)

    async def test_updating_an_unknown_tenant_is_not_found(self, store: Store) -> None:
        with pytest.raises(NotFound) as caught:
            await store.update_tenant(make_tenant("ghost"))
        assert (caught.value.what, caught.value.ident) == ("tenant", "ghost")
        assert await store.get_tenant("ghost") is None

    async def test_live_jobs_are_those_neither_cancelled_nor_completed(self, store: Store) -> None:
        await store.create_tenant(make_tenant())
        mine = [
            make_job(state=JobState.ACTIVE),
            make_job(state=JobState.PAUSED),
            make_job(state=JobState.ACTIVE),
            make_job(state=JobState.ACTIVE),
        ]
        theirs = [make_job(tenant_id="acme"), make_job(tenant_id="acme", state=JobState.COMPLETED)]
        await store.create_jobs([*mine, *theirs])
        assert await store.count_live_jobs(DEFAULT_TENANT) == 4
        await store.set_job_state(
            DEFAULT_TENANT, mine[2].id, JobState.CANCELLED, next_fire_at=None, now=at(1), actor="t"
        )
        await store.set_job_state(
            DEFAULT_TENANT, mine[3].id, JobState.COMPLETED, next_fire_at=None, now=at(1), actor="t"
        )
        assert await store.count_live_jobs(DEFAULT_TENANT) == 2  # active + paused
        assert await store.count_live_jobs("acme") == 1
        assert await store.count_live_jobs("nobody") == 0

    async def test_live_jobs_are_counted_no_further_than_the_limit(self, store: Store) -> None:
        """The quota check asks whether the quota is reached, not how far past it: the count
        stops at ``limit`` (bench/atrest.py: a full count costs ~1 s at 10,000,000 jobs)."""
        await store.create_jobs(
            [make_job() for _ in range(5)] + [make_job(state=JobState.COMPLETED)]
        )
        assert await store.count_live_jobs(DEFAULT_TENANT, limit=3) == 3
        assert await store.count_live_jobs(DEFAULT_TENANT, limit=5) == 5
        assert await store.count_live_jobs(DEFAULT_TENANT, limit=6) == 5
        assert await store.count_live_jobs(DEFAULT_TENANT) == 5

    async def test_a_key_is_found_by_its_hash(self, store: Store) -> None:
        key = make_key()
        unnamed = make_key("k2", name=None, role=Role.ADMIN)
        await store.create_api_key(key)
        await store.create_api_key(unnamed)
        assert await store.find_api_key(key.key_hash) == key
        assert await store.find_api_key(unnamed.key_hash) == unnamed
        assert await store.find_api_key("sha256-of-nothing") is None
        found = await store.find_api_key(key.key_hash)
        assert found is not None and isinstance(found.role, Role) and _is_utc(found.created_at)

    @pytest.mark.parametrize("role", list(Role))
    async def test_every_role_round_trips(self, store: Store, role: Role) -> None:
        key = make_key(f"key-{role.value}", role=role)
        await store.create_api_key(key)
        assert await store.find_api_key(key.key_hash) == key

    async def test_a_key_of_an_unknown_tenant_is_not_found(self, store: Store) -> None:
        with pytest.raises(NotFound) as caught:
            await store.create_api_key(make_key(tenant_id="nobody"))
        assert (caught.value.what, caught.value.ident) == ("tenant", "nobody")
        assert await store.find_api_key(make_key().key_hash) is None

    async def test_a_key_id_or_hash_is_taken_once(self, store: Store) -> None:
        key = make_key()
        await store.create_api_key(key)
        with pytest.raises(Conflict) as caught:
            await store.create_api_key(make_key(key_hash="another-hash"))
        assert caught.value.field == "id"
        with pytest.raises(Conflict) as caught:
            await store.create_api_key(make_key("k2", key_hash=key.key_hash))
        assert caught.value.field == "id"
        assert await store.list_api_keys(DEFAULT_TENANT) == [key]
        assert await store.find_api_key("another-hash") is None

    async def test_a_tenants_keys_are_listed_by_creation_then_id(self, store: Store) -> None:
        await store.create_tenant(make_tenant())
        keys = [
            make_key("k-b", created_at=at(5)),
            make_key("k-c", created_at=at(1)),
            make_key("k-a", created_at=at(5)),
            make_key("k-other", tenant_id="acme", created_at=at(0)),
        ]
        for key in keys:
            await store.create_api_key(key)
        assert [k.id for k in await store.list_api_keys(DEFAULT_TENANT)] == ["k-c", "k-a", "k-b"]
        assert await store.list_api_keys("acme") == [keys[3]]
        assert await store.list_api_keys("nobody") == []

    async def test_revoking_is_idempotent_and_keeps_the_first_instant(self, store: Store) -> None:
        key = make_key()
        await store.create_api_key(key)
        revoked = await store.revoke_api_key(DEFAULT_TENANT, key.id, now=at(60))
        assert revoked == replace(key, revoked_at=at(60))
        again = await store.revoke_api_key(DEFAULT_TENANT, key.id, now=at(120))
        assert again == revoked
        # A revoked key is still found: the caller tells it apart by revoked_at.
        found = await store.find_api_key(key.key_hash)
        assert found == revoked and found is not None and _is_utc(found.revoked_at)
        assert await store.list_api_keys(DEFAULT_TENANT) == [revoked]

    async def test_a_key_created_revoked_stays_revoked_at_its_instant(self, store: Store) -> None:
        key = make_key(revoked_at=at(3))
        await store.create_api_key(key)
        assert await store.revoke_api_key(DEFAULT_TENANT, key.id, now=at(9)) == key

    async def test_revoking_another_tenants_or_an_unknown_key_is_not_found(
        self, store: Store
    ) -> None:
        await store.create_tenant(make_tenant())
        key = make_key(tenant_id="acme")
        await store.create_api_key(key)
        with pytest.raises(NotFound) as caught:
            await store.revoke_api_key(DEFAULT_TENANT, key.id, now=at(1))
        assert (caught.value.what, caught.value.ident) == ("key", key.id)
        with pytest.raises(NotFound) as caught:
            await store.revoke_api_key("acme", "no-such-key", now=at(1))
        assert (caught.value.what, caught.value.ident) == ("key", "no-such-key")
        assert await store.find_api_key(key.key_hash) == key  # not revoked

    async def test_a_saved_response_is_kept_under_its_key(self, store: Store) -> None:
        response = make_response()
        assert await store.save_response(response) == response
        assert await store.get_response(DEFAULT_TENANT, response.key) == response
        assert await store.get_response(DEFAULT_TENANT, "idem-unknown") is None
        stored = await store.get_response(DEFAULT_TENANT, response.key)
        assert stored is not None and _is_utc(stored.created_at)

    async def test_the_earlier_response_wins(self, store: Store) -> None:
        first = make_response()
        await store.save_response(first)
        second = make_response(
            request_hash="hash-of-request-2", status=409, body={"other": True}, created_at=at(5)
        )
        assert await store.save_response(second) == first
        assert await store.get_response(DEFAULT_TENANT, first.key) == first

    async def test_responses_are_kept_per_tenant(self, store: Store) -> None:
        mine = make_response()
        theirs = make_response(tenant_id="acme", body=["theirs"], status=200)
        assert await store.save_response(mine) == mine
        assert await store.save_response(theirs) == theirs
        assert await store.get_response(DEFAULT_TENANT, mine.key) == mine
        assert await store.get_response("acme", mine.key) == theirs
        assert await store.get_response("nobody", mine.key) is None

    async def test_concurrent_saves_from_two_stores_keep_one_response(
        self, store: Store, store2: Store
    ) -> None:
        keys = [f"race-{i}" for i in range(50)]
        ours = [make_response(k, request_hash="ours", body={"by": "store"}) for k in keys]
        theirs = [
            make_response(k, request_hash="theirs", status=202, body=["store2"], created_at=at(1))
            for k in keys
        ]
        results = await asyncio.gather(
            *(store.save_response(r) for r in ours), *(store2.save_response(r) for r in theirs)
        )
        for i, key in enumerate(keys):
            kept = await store.get_response(DEFAULT_TENANT, key)
            assert kept in (ours[i], theirs[i])
            # Both callers were told the one response that is kept: retries replay it.
            assert results[i] == kept
            assert results[len(keys) + i] == kept
            assert await store2.get_response(DEFAULT_TENANT, key) == kept

    @pytest.mark.parametrize(
        "body",
        [
            {"id": "j1", "nested": {"list": [1, 2.5, None, True, False, "x"], "empty": {}}},
            [{"a": 1}, [], [[]], "two", 3],
            "a plain string",
            "",
            0,
            -42,
            12345678901234567,
            2.5,
            -0.125,
            True,
            False,
            None,
            {},
            [],
            {"unicode": "héllo ✓ 日本 🙂", "quote": '"\\/\n\t'},
            {"z": 1, "a": 2, "longer key": 3, "m": {"y": None, "b": [0.1, 1e-7]}},
        ],
        ids=lambda body: type(body).__name__,
    )
    async def test_a_response_body_round_trips_exactly(self, store: Store, body: JSONValue) -> None:
        response = make_response(body=body)
        saved = await store.save_response(response)
        stored = await store.get_response(DEFAULT_TENANT, response.key)
        assert saved == stored == response
        assert stored is not None and type(stored.body) is type(body)

    async def test_old_responses_are_deleted(self, store: Store) -> None:
        for i, created in enumerate([at(0), at(10), at(20)]):
            await store.save_response(make_response(f"d-{i}", created_at=created))
        await store.save_response(make_response("d-acme", tenant_id="acme", created_at=at(5)))
        assert await store.delete_responses(before=at(10)) == 2  # before is exclusive
        assert await store.get_response(DEFAULT_TENANT, "d-0") is None
        assert await store.get_response("acme", "d-acme") is None
        assert await store.get_response(DEFAULT_TENANT, "d-1") is not None
        assert await store.delete_responses(before=at(10)) == 0
        assert await store.delete_responses(before=at(21)) == 2
        # A forgotten key can be used again.
        fresh = make_response("d-0", body="again", created_at=at(30))
        assert await store.save_response(fresh) == fresh

    async def test_a_registered_worker_reads_back_exactly(self, store: Store) -> None:
        worker = make_worker()
        lonely = make_worker("w2", pools=())
        await store.register_worker(worker)
        await store.register_worker(lonely)
        listed = await store.list_workers(DEFAULT_TENANT, seen_since=T0)
        assert listed == [worker, lonely]
        assert isinstance(listed[0].pools, tuple)
        assert all(_is_utc(w.started_at) and _is_utc(w.last_seen_at) for w in listed)

    async def test_a_worker_announces_its_brokers_kinds_and_a_heartbeat_updates_them(
        self, store: Store
    ) -> None:
        """Issue 30 item 2: the API reads which brokers a pool's live workers name."""
        worker = make_worker(brokers={"events": "nats", "jobs": "rabbitmq"})
        await store.register_worker(worker)
        assert (await store.list_live_workers(seen_since=T0))[0].brokers == worker.brokers
        await store.register_worker(replace(worker, brokers={"s": "redis"}, last_seen_at=at(11)))
        [listed] = await store.list_workers(DEFAULT_TENANT, seen_since=T0)
        assert listed.brokers == {"s": "redis"}

    async def test_workers_are_listed_by_id_for_their_tenant_and_recent_only(
        self, store: Store
    ) -> None:
        workers = [
            make_worker("w-c", last_seen_at=at(30)),
            make_worker("w-a", last_seen_at=at(20)),
            make_worker("w-stale", last_seen_at=at(19)),
            make_worker("w-b", last_seen_at=at(25)),
            make_worker("w-acme", tenant_id="acme", last_seen_at=at(30)),
        ]
        for worker in workers:
            await store.register_worker(worker)
        recent = await store.list_workers(DEFAULT_TENANT, seen_since=at(20))  # inclusive
        assert [w.id for w in recent] == ["w-a", "w-b", "w-c"]
        assert [w.id for w in await store.list_workers(DEFAULT_TENANT, seen_since=at(0))] == [
            "w-a",
            "w-b",
            "w-c",
            "w-stale",
        ]
        assert await store.list_workers(DEFAULT_TENANT, seen_since=at(31)) == []
        assert await store.list_workers("acme", seen_since=at(0)) == [workers[4]]
        assert await store.list_workers("nobody", seen_since=at(0)) == []

    async def test_registering_again_refreshes_all_but_started_at(self, store: Store) -> None:
        first = make_worker()
        await store.register_worker(first)
        heartbeat = make_worker(
            host="node-2",
            pools=("reports",),
            capacity=16,
            in_flight=0,
            started_at=at(50),
            last_seen_at=at(60),
        )
        await store.register_worker(heartbeat)
        expected = replace(heartbeat, started_at=first.started_at)
        assert await store.list_workers(DEFAULT_TENANT, seen_since=T0) == [expected]
        assert await store.list_workers(DEFAULT_TENANT, seen_since=at(55)) == [expected]

    async def test_a_removed_worker_is_forgotten(self, store: Store) -> None:
        await store.register_worker(make_worker("w1"))
        await store.register_worker(make_worker("w2"))
        await store.remove_worker("w1")
        assert [w.id for w in await store.list_workers(DEFAULT_TENANT, seen_since=T0)] == ["w2"]
        await store.remove_worker("w1")  # already gone: not an error
        await store.remove_worker("never-registered")
        # A removed worker that comes back starts afresh.
        back = make_worker("w1", started_at=at(40), last_seen_at=at(41))
        await store.register_worker(back)
        assert await store.list_workers(DEFAULT_TENANT, seen_since=at(40)) == [back]

    async def test_instants_in_another_zone_come_back_in_utc(self, store: Store) -> None:
        paris = timezone(timedelta(hours=2))
        local = T0_US.astimezone(paris)
        await store.create_tenant(make_tenant(created_at=local))
        tenant = await store.get_tenant("acme")
        assert tenant is not None and tenant.created_at == T0_US and _is_utc(tenant.created_at)
        await store.register_worker(make_worker(started_at=local, last_seen_at=local))
        [worker] = await store.list_workers(DEFAULT_TENANT, seen_since=T0_US)
        assert worker.last_seen_at == T0_US and _is_utc(worker.last_seen_at)
