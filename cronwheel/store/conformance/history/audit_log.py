"""Conformance: the audit log read across entities, changes to tenants and keys audited
in their own transaction, and jobs' actions rewritten (secrets resealed) only at the
version read."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from cronwheel.core.model import DEFAULT_TENANT
from cronwheel.errors import Conflict, NotFound
from cronwheel.store.base import JobSecrets, Store
from cronwheel.store.conformance.catalogue.tenants_keys_workers import make_key, make_tenant
from cronwheel.store.conformance.factories import T0, make_job


class AuditLogContract:
    """The audit log read across entities, changes to tenants and keys audited.

    Part of the ``history`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_tenant_and_key_changes_are_audited_with_their_actor(self, store: Store) -> None:
        await store.create_tenant(make_tenant("acme"), actor="admin-token")
        await store.update_tenant(make_tenant("acme", max_jobs=5), actor="admin-token", now=T0)
        await store.create_api_key(make_key("k1", "acme"), actor="key:boss")
        revoked_at = T0 + timedelta(seconds=5)
        await store.revoke_api_key("acme", "k1", now=revoked_at, actor="key:boss")
        await store.revoke_api_key("acme", "k1", now=revoked_at + timedelta(1), actor="key:boss")
        entries = await store.list_audit_entries(tenant_id="acme")
        assert [(e.entity, e.entity_id, e.action, e.actor) for e in entries] == [
            ("key", "k1", "revoked", "key:boss"),  # once: revoking again changes nothing
            ("key", "k1", "created", "key:boss"),
            ("tenant", "acme", "updated", "admin-token"),
            ("tenant", "acme", "created", "admin-token"),
        ]
        assert entries[0].details == {"role": "write", "name": "the k1 key"}  # never the hash
        assert entries[0].at == revoked_at
        assert entries[2].details == {
            "name": "Acme Inc.",
            "max_jobs": 5,
            "max_creates_per_second": 2.5,
        }

    async def test_a_refused_change_leaves_no_audit_entry(self, store: Store) -> None:
        await store.create_tenant(make_tenant("acme"), actor="a")
        with pytest.raises(Conflict):
            await store.create_tenant(make_tenant("acme"), actor="a")
        with pytest.raises(NotFound):
            await store.update_tenant(make_tenant("nobody"), actor="a", now=T0)
        with pytest.raises(NotFound):
            await store.create_api_key(make_key("k9", "nobody"), actor="a")
        with pytest.raises(NotFound):
            await store.revoke_api_key("acme", "missing", now=T0, actor="a")
        entries = await store.list_audit_entries()
        assert [(e.entity, e.action) for e in entries] == [("tenant", "created")]

    async def test_without_an_actor_nothing_is_audited(self, store: Store) -> None:
        await store.create_tenant(make_tenant("acme"))
        await store.create_api_key(make_key("k1", "acme"))
        assert await store.list_audit_entries() == []

    async def test_entries_filter_and_page_newest_first(self, store: Store) -> None:
        for i, tenant in enumerate(["a1", "b2", "a3"]):
            at = T0 + timedelta(minutes=i)
            await store.create_tenant(
                make_tenant(tenant, created_at=at), actor=f"actor-{tenant[0]}"
            )
        await store.create_jobs([make_job("j")], [], actor="python")
        everything = await store.list_audit_entries()
        assert [e.entity_id for e in everything][1:] == ["a3", "b2", "a1"]
        ids = [e.id for e in everything]
        assert ids == sorted(ids, reverse=True)
        by_actor = await store.list_audit_entries(actor="actor-a")
        assert [e.entity_id for e in by_actor] == ["a3", "a1"]
        assert [e.entity for e in await store.list_audit_entries(entity="job")] == ["job"]
        window = await store.list_audit_entries(
            since=T0 + timedelta(minutes=1), until=T0 + timedelta(minutes=2), entity="tenant"
        )
        assert [e.entity_id for e in window] == ["b2"]
        first = await store.list_audit_entries(entity="tenant", limit=2)
        rest = await store.list_audit_entries(entity="tenant", before=first[-1].id, limit=2)
        assert [e.entity_id for e in first + rest] == ["a3", "b2", "a1"]
        assert [e.entity_id for e in await store.list_audit_entries(tenant_id="b2")] == ["b2"]
        assert await store.list_audit_entries(tenant_id="nobody") == []

    async def test_job_actions_are_replaced_only_at_the_version_read(self, store: Store) -> None:
        action = {"type": "webhook", "url": "https://example.com/h", "headers": {"A": "1"}}
        one, two = make_job("one", action=action), make_job("two", action=action)
        await store.create_jobs([one, two], [])
        # "two" changes meanwhile (version 2): its rewrite, made from version 1, is left.
        changed = await store.update_job(
            replace(two, payload={"x": 1}), expected_version=1, actor="u"
        )
        new_action = {**action, "headers": {"A": "2"}}
        targets = ({"on": ["dead"], "url": "https://u:sealed@example.com/n"},)
        done = await store.replace_job_actions(
            DEFAULT_TENANT,
            [JobSecrets(one.id, 1, new_action, targets), JobSecrets(two.id, 1, new_action)],
            actor="secrets-rotate",
            now=T0,
        )
        assert done == 1
        got_one, got_two = (
            await store.get_job(DEFAULT_TENANT, one.id),
            await store.get_job(DEFAULT_TENANT, two.id),
        )
        assert got_one is not None and got_two is not None
        assert (got_one.action, got_one.version) == (new_action, 1)  # no version bump
        assert got_one.notify == targets
        assert (got_two.action, got_two.version) == (action, changed.version)
        [entry] = await store.list_audit_entries(entity="tenant")
        assert (entry.action, entry.actor, entry.details) == (
            "secrets_resealed",
            "secrets-rotate",
            {"jobs": 1},
        )
        assert await store.replace_job_actions(DEFAULT_TENANT, [], actor="x", now=T0) == 0
