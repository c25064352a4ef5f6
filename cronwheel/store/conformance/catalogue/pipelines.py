"""Conformance: pipeline definitions (decision 0025) — create, read a version, list,
update into a new version, delete, list versions, each scoped to its tenant."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from typing import Any

import pytest

from cronwheel.core.model import DEFAULT_TENANT, new_id
from cronwheel.core.pipelines.definition import parse_definition
from cronwheel.core.pipelines.model import Pipeline, PipelineState
from cronwheel.errors import Conflict, NotFound, StaleVersion
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import T0, at


def definition(*tasks: str) -> dict[str, Any]:
    """A chain of handler tasks, validated and as stored."""
    names = tasks or ("a", "b")
    raw = {
        "tasks": {t: {"action": {"type": "handler", "name": t}} for t in names},
        "edges": [{"from": x, "to": y} for x, y in pairwise(names)],
    }
    return parse_definition(raw).to_dict()


def make_pipeline(name: str = "etl", tenant: str = DEFAULT_TENANT, *tasks: str) -> Pipeline:
    d = parse_definition(definition(*tasks))
    return Pipeline(
        id=new_id(),
        tenant_id=tenant,
        name=name,
        version=1,
        definition=d.to_dict(),
        fingerprint=d.fingerprint(),
        created_at=T0,
        updated_at=T0,
        latest_version=1,
    )


async def update(store: Store, p: Pipeline, expected: int, *tasks: str, **kw: Any) -> Pipeline:
    d = parse_definition(definition(*tasks))
    return await store.update_pipeline(
        kw.get("tenant", p.tenant_id),
        p.id,
        definition=d.to_dict(),
        fingerprint=d.fingerprint(),
        expected_version=expected,
        now=kw.get("now", at(60)),
        actor="alice",
    )


class PipelinesContract:
    """Pipeline definitions (decision 0025) — create, read a version, list,.

    Part of the ``catalogue`` seam's contract: subclass it with a ``store`` fixture to
    run it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_create_then_get_returns_the_same_pipeline(self, store: Store) -> None:
        p = make_pipeline()
        await store.create_pipeline(p, actor="alice")
        assert await store.get_pipeline(p.tenant_id, p.id) == p
        [entry] = await store.list_audit(p.tenant_id, p.id)
        assert (entry.entity, entry.action, entry.actor) == ("pipeline", "created", "alice")

    async def test_another_tenant_sees_no_pipeline(self, store: Store) -> None:
        await store.ensure_tenant("acme", "Acme", now=T0)
        p = make_pipeline()
        await store.create_pipeline(p, actor="t")
        assert await store.get_pipeline("acme", p.id) is None
        assert await store.list_pipelines("acme") == []
        with pytest.raises(NotFound):
            await update(store, p, 1, "x", tenant="acme")
        with pytest.raises(NotFound):
            await store.delete_pipeline("acme", p.id, now=at(1), actor="t")
        with pytest.raises(NotFound):
            await store.list_pipeline_versions("acme", p.id)
        assert (await store.get_pipeline(p.tenant_id, p.id)) == p  # untouched

    async def test_an_unknown_id_is_not_found(self, store: Store) -> None:
        for unknown in (new_id(), "not-a-uuid"):
            assert await store.get_pipeline(DEFAULT_TENANT, unknown) is None
            with pytest.raises(NotFound):
                await store.delete_pipeline(DEFAULT_TENANT, unknown, now=T0, actor="t")
            with pytest.raises(NotFound):
                await store.list_pipeline_versions(DEFAULT_TENANT, unknown)

    async def test_an_unknown_tenant_is_not_found(self, store: Store) -> None:
        with pytest.raises(NotFound) as caught:
            await store.create_pipeline(make_pipeline(tenant="nobody"), actor="t")
        assert caught.value.what == "tenant"

    async def test_name_is_unique_per_tenant_among_live_pipelines(self, store: Store) -> None:
        await store.ensure_tenant("acme", "Acme", now=T0)
        first = make_pipeline("etl")
        await store.create_pipeline(first, actor="t")
        with pytest.raises(Conflict) as caught:
            await store.create_pipeline(make_pipeline("etl"), actor="t")
        assert caught.value.field == "name" and "etl" in caught.value.reason
        await store.create_pipeline(make_pipeline("etl", "acme"), actor="t")  # another tenant
        await store.delete_pipeline(DEFAULT_TENANT, first.id, now=at(1), actor="t")
        again = make_pipeline("etl")
        await store.create_pipeline(again, actor="t")  # a deleted one frees its name
        assert [p.id for p in await store.list_pipelines(DEFAULT_TENANT, name="etl")] == [again.id]

    async def test_update_stores_a_new_version_and_keeps_the_old(self, store: Store) -> None:
        p = make_pipeline()
        await store.create_pipeline(p, actor="t")
        updated = await update(store, p, 1, "a", "b", "c")
        assert (updated.version, updated.latest_version) == (2, 2)
        assert updated.definition == definition("a", "b", "c")
        assert updated.updated_at == at(60) and updated.created_at == T0
        assert updated.fingerprint != p.fingerprint
        assert await store.get_pipeline(p.tenant_id, p.id) == updated
        old = await store.get_pipeline(p.tenant_id, p.id, version=1)
        assert old is not None
        assert (old.version, old.latest_version, old.definition) == (1, 2, p.definition)
        assert await store.get_pipeline(p.tenant_id, p.id, version=3) is None
        versions = await store.list_pipeline_versions(p.tenant_id, p.id)
        assert [(v.version, v.actor) for v in versions] == [(2, "alice"), (1, "t")]
        assert versions[1].definition == p.definition and versions[1].created_at == T0
        assert [e.action for e in await store.list_audit(p.tenant_id, p.id)] == [
            "created",
            "updated",
        ]

    async def test_the_same_content_makes_no_new_version(self, store: Store) -> None:
        p = make_pipeline()
        await store.create_pipeline(p, actor="t")
        same = await update(store, p, 1, "a", "b")
        assert same == p
        assert len(await store.list_pipeline_versions(p.tenant_id, p.id)) == 1
        assert len(await store.list_audit(p.tenant_id, p.id)) == 1

    async def test_update_of_an_old_version_is_stale(self, store: Store) -> None:
        p = make_pipeline()
        await store.create_pipeline(p, actor="t")
        await update(store, p, 1, "x")
        for expected in (1, 3):
            with pytest.raises(StaleVersion) as caught:
                await update(store, p, expected, "y")
            assert (caught.value.expected, caught.value.actual) == (expected, 2)
            assert "pipeline is at version 2" in caught.value.reason

    async def test_racing_updates_of_one_version_store_one(self, store: Store) -> None:
        p = make_pipeline()
        await store.create_pipeline(p, actor="t")
        results = await asyncio.gather(
            *(update(store, p, 1, f"t{i}") for i in range(4)), return_exceptions=True
        )
        won = [r for r in results if isinstance(r, Pipeline)]
        lost = [r for r in results if not isinstance(r, Pipeline)]
        assert len(won) == 1 and all(isinstance(r, StaleVersion) for r in lost), results
        assert [v.version for v in await store.list_pipeline_versions(p.tenant_id, p.id)] == [2, 1]

    async def test_delete_is_soft_and_idempotent(self, store: Store) -> None:
        p = make_pipeline()
        await store.create_pipeline(p, actor="t")
        deleted = await store.delete_pipeline(p.tenant_id, p.id, now=at(5), actor="t")
        assert deleted.state is PipelineState.DELETED and deleted.updated_at == at(5)
        assert deleted.version == 1 and deleted.definition == p.definition
        assert await store.delete_pipeline(p.tenant_id, p.id, now=at(9), actor="t") == deleted
        assert await store.get_pipeline(p.tenant_id, p.id) == deleted
        assert await store.list_pipelines(p.tenant_id) == []
        assert len(await store.list_pipeline_versions(p.tenant_id, p.id)) == 1
        with pytest.raises(Conflict) as caught:
            await update(store, p, 1, "x")
        assert caught.value.field == "state"
        assert [e.action for e in await store.list_audit(p.tenant_id, p.id)] == [
            "created",
            "deleted",
        ]

    async def test_list_pages_by_id_at_the_latest_version(self, store: Store) -> None:
        made = [make_pipeline(f"p{i}") for i in range(5)]
        for p in made:
            await store.create_pipeline(p, actor="t")
        await update(store, made[1], 1, "z")
        first = await store.list_pipelines(DEFAULT_TENANT, limit=2)
        assert [p.id for p in first] == [made[0].id, made[1].id]
        assert first[1].version == 2 and first[1].definition == definition("z")
        rest = await store.list_pipelines(DEFAULT_TENANT, after=first[-1].id, limit=10)
        assert [p.id for p in rest] == [p.id for p in made[2:]]
        assert await store.list_pipelines(DEFAULT_TENANT, name="p3") == [made[3]]
        assert await store.list_pipelines(DEFAULT_TENANT, name="nope") == []

    async def test_versions_page_newest_first(self, store: Store) -> None:
        p = make_pipeline()
        await store.create_pipeline(p, actor="t")
        for i in range(1, 5):
            await update(store, p, i, f"v{i}")
        page = await store.list_pipeline_versions(p.tenant_id, p.id, limit=2)
        assert [v.version for v in page] == [5, 4]
        rest = await store.list_pipeline_versions(p.tenant_id, p.id, before=4, limit=10)
        assert [v.version for v in rest] == [3, 2, 1]
        assert await store.list_pipeline_versions(p.tenant_id, p.id, before=1) == []
