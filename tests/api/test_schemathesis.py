"""Property-based: schemathesis generates requests from /openapi.json, valid and invalid,
for every operation; no answer is a 5xx and every answer conforms to the document."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cronwheel.api import AuthConfig, create_app
from cronwheel.control.service import JobService
from cronwheel.store.sqlite import SqliteStore
from tests.api.helpers import ADMIN_TOKEN, spec

EXAMPLES = 25
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    # schemathesis drives the app from its own thread and event loop; the SQLite store
    # runs its work on its own thread, so it serves whichever loop calls it.
    async def open_store() -> SqliteStore:
        store = await SqliteStore.open(tmp_path / "fuzz.db")
        await store.migrate()
        jobs = JobService(store)
        for i in range(3):
            job = await jobs.create(**spec(f"seed-{i}"))
            await jobs.trigger(job.id)
        return store

    store = asyncio.run(open_store())
    try:
        yield create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))
    finally:
        asyncio.run(store.close())


def test_every_operation_conforms(app: FastAPI) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 25
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case: schemathesis.Case[Any]) -> None:
                case.call_and_validate(headers=AUTH, checks=CHECKS)

            try:
                check()
            except Unsatisfiable:
                # nothing to make invalid: an operation without parameters or body
                assert mode is GenerationMode.NEGATIVE
