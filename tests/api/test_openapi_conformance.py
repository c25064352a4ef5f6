"""The OpenAPI document is the contract (decision 0045): schemathesis, in process over
ASGI, sends what /openapi.json allows and what it forbids to every operation, and checks
that the server accepts the one, refuses the other, and answers as the document says.

Seeded and small, so that a run is the same each time and takes seconds. A failure
prints each operation, check and answer, with a curl line that reproduces it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from fastapi import FastAPI
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events, from_schema

from cronwheel.api import AuthConfig, create_app
from cronwheel.control.service import JobService
from cronwheel.store.sqlite import SqliteStore
from tests.api.helpers import ADMIN_TOKEN, spec

SEED = 45
EXAMPLES = 12
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
)
SEMANTIC = {
    "schedule": "a schedule's rules (a cron expression, a zone, a date to come)",
    "action.url": "an absolute http(s) URL that egress allows",
    "url": "an absolute http(s) URL that egress allows",
    "cursor": "a cursor the API gave out, for this list and order",
    "at": "a day of the calendar (February 30 has the form but is none)",
    "end": "a range that ends after it starts, and not in the future",
    "start": "a range that starts in 1970 or later",
    "edges": "a pipeline's edges name its tasks and make no cycle",
    "tasks": "a pipeline's tasks: what the edges and actions need",
    "key": "a concurrency key's placeholders",
    "action.headers": "a webhook's headers: no reserved name, no name twice",
    "action.secret_headers": "secret headers name headers the webhook has",
    "name": "a name not used by another live job or pipeline",
    "output.signal": "a command ended by an exit code or by a signal, not both",
}
"""Where the server knows more than a schema can say (decision 0045): a positive case
refused with 422 naming one of these fields (or a field under it) is not a
disagreement. Each is documented on its field."""


@pytest.fixture
def app(tmp_path: Path) -> Iterator[FastAPI]:
    # The engine drives the app from its own thread and event loop; the SQLite store
    # runs its work on its own thread, so it serves whichever loop calls it.
    async def open_store() -> SqliteStore:
        store = await SqliteStore.open(tmp_path / "conformance.db")
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


def config() -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "workers": 1,
            "headers": {"Authorization": f"Bearer {ADMIN_TOKEN}"},
            "generation": {"max-examples": EXAMPLES, "database": "none"},
            "phases": {"stateful": {"enabled": False}},
            "checks": {
                "enabled": False,
                **{name: {"enabled": True} for name in CHECKS},
                # 413: a list over its maxItems is "too large" (decision 0036), a refusal
                # the document lists for every operation.
                "negative_data_rejection": {
                    "enabled": True,
                    "expected-statuses": [400, 401, 403, 404, 405, 409, 413, 415, 422, 428, 429],
                },
                # 412: valid, but another version than the job's now (state, as 409 is).
                "positive_data_acceptance": {
                    "enabled": True,
                    "expected-statuses": ["2xx", "3xx", 401, 403, 404, 409, 412, 429],
                },
                # 428: If-Match left out (RFC 6585 names the status for exactly that).
                "missing_required_header": {
                    "enabled": True,
                    "expected-statuses": [400, 401, 403, 415, 422, 428],
                },
            },
        }
    )


def semantic(check: str, status: int | None, body: str) -> bool:
    """A positive case refused for a rule no schema can state (:data:`SEMANTIC`)."""
    if check != "positive_data_acceptance" or status != 422:
        return False
    try:
        fields = [e.get("field") or "" for e in json.loads(body).get("errors", [])]
    except ValueError:
        return False

    def known(field: str) -> bool:
        parts = field.split(".")
        # jobs.3.schedule.cron, tasks.extract.action.url: a batch index or a task name
        # is not part of the rule's name.
        return any(
            ".".join(parts[i : i + n]) in SEMANTIC
            for i in range(len(parts))
            for n in range(1, len(parts) - i + 1)
            if i == 0 or parts[i - 1].isdigit() or parts[i - 1] in {"jobs", "tasks"}
        )

    return bool(fields) and all(known(f) for f in fields)


def disagreements(app: FastAPI) -> list[str]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config())
    found: dict[tuple[str, str], str] = {}
    for event in from_schema(schema).execute():
        if isinstance(event, events.NonFatalError):
            found[(event.label, "error")] = str(event.value)
        if not isinstance(event, events.ScenarioFinished):
            continue
        recorder = event.recorder
        for case_id, checks in recorder.checks.items():
            for check in checks:
                if check.failure_info is None:
                    continue
                response = recorder.interactions[case_id].response
                status = None if response is None else response.status_code
                body = "" if response is None else response.content.decode(errors="replace")
                if semantic(check.name, status, body):
                    continue
                curl = recorder.cases[case_id].value.as_curl_command()
                found.setdefault(
                    (recorder.label, check.name), f"{status} {body[:300]}\n    {curl[:400]}"
                )
    return [f"{label} [{check}]: {what}" for (label, check), what in sorted(found.items())]


def test_the_server_does_what_the_document_says(app: FastAPI) -> None:
    found = disagreements(app)
    assert not found, f"{len(found)} disagreements:\n" + "\n".join(found)


def test_semantic_refusals_are_recognised() -> None:
    """The allowance is narrow: only 422s that name documented rules only."""
    body = json.dumps({"errors": [{"index": 3, "field": "schedule.cron", "reason": "x"}]})
    assert semantic("positive_data_acceptance", 422, body)
    task = json.dumps({"errors": [{"field": "tasks.extract.action.url", "reason": "x"}]})
    assert semantic("positive_data_acceptance", 422, task)
    mixed = json.dumps({"errors": [{"field": "schedule"}, {"field": "max_jobs"}]})
    assert not semantic("positive_data_acceptance", 422, mixed)
    assert not semantic("positive_data_acceptance", 400, body)
    assert not semantic("negative_data_rejection", 422, body)
