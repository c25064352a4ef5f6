"""One test per way /openapi.json was looser than the server (decision 0045): the document
now says it, and the server does as the document says."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.api.helpers import problem, spec

INT64_END = 2**63


def _parameter(document: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    found = [p for p in document["paths"][path][method]["parameters"] if p["name"] == name]
    return found[0]


@pytest.fixture
def document(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


async def test_an_unsupported_method_names_every_method_of_the_path(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    response = await client.options("/v1/jobs/01a22696-0881-7000-9b14-e451d0eec56c")
    problem(response, 405)
    documented = {m.upper() for m in document["paths"]["/v1/jobs/{job_id}"]}
    assert set(response.headers["Allow"].split(", ")) == documented
    response = await client.put("/v1/tenants")
    assert response.headers["Allow"] == "GET, POST"


async def test_int64_bounds_read_the_same_as_doubles(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    run_id = _parameter(document, "/v1/runs/{run_id}", "get", "run_id")["schema"]
    assert run_id["exclusiveMaximum"] == INT64_END and "maximum" not in run_id
    assert run_id["format"] == "int64"
    lease = document["components"]["schemas"]["LeaseIn"]["properties"]
    assert lease["run_id"]["exclusiveMaximum"] == INT64_END
    assert lease["fence"] == lease["fence"] | {"maximum": 2**31 - 1, "format": "int32"}
    problem(await client.get(f"/v1/runs/{INT64_END - 1}"), 404)
    problem(await client.get(f"/v1/runs/{INT64_END}"), 422, "run_id")
    body = {"ids": [INT64_END + 191]}  # 2**63 as a double: over the bound all the same
    problem(await client.post("/v1/notifications/replay", json=body), 422, "ids.0")


async def test_a_whole_float_is_an_integer(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/tenants", json={"id": "t1", "name": "t", "max_jobs": 15.0})
    assert created.status_code == 201, created.text
    assert created.json()["max_jobs"] == 15
    body = {"id": "t2", "name": "t", "max_jobs": 15.5}
    problem(await client.post("/v1/tenants", json=body), 422, "max_jobs")
    problem(await client.post("/v1/tenants", json={**body, "max_jobs": "15"}), 422, "max_jobs")
    replayed = await client.post("/v1/dead-letter/replay", json={"run_ids": [1.0]})
    assert replayed.status_code == 200, replayed.text


async def test_if_match_is_required_and_has_a_form(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    header = _parameter(document, "/v1/jobs/{job_id}", "patch", "If-Match")
    assert header["required"] is True
    pattern = re.compile(header["schema"]["pattern"])
    created = (await client.post("/v1/jobs", json=spec())).json()
    url = f"/v1/jobs/{created['id']}"
    for good in ['"1"', 'W/"1"', "1", "*"]:
        assert pattern.fullmatch(good)
        response = await client.patch(url, json={}, headers={"If-Match": good})
        assert response.status_code in (200, 412), (good, response.text)
    for bad in ['""1"', '"1', "W/1", "v1", "1234567890"]:
        assert not pattern.fullmatch(bad)
        response = await client.patch(url, json={}, headers={"If-Match": bad})
        problem(response, 422, "If-Match")
    problem(await client.patch(url, json={}), 428, "If-Match")


async def test_cursors_are_base64url_as_given(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    cursor = _parameter(document, "/v1/dead-letter", "get", "cursor")["schema"]
    assert cursor["pattern"] == "^[A-Za-z0-9_-]+$"
    # "run:1" is cnVuOjE; b64decode skips what is not base64 and read these as it.
    for bad in ["cnVuOjE=", "cnVu!OjE", "cnVu OjE"]:
        problem(await client.get("/v1/dead-letter", params={"cursor": bad}), 422, "cursor")
    assert (await client.get("/v1/dead-letter", params={"cursor": "cnVuOjE"})).status_code == 200


def _strings(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    if isinstance(node, list):
        return [s for i, item in enumerate(node) for s in _strings(item, f"{path}/{i}")]
    if not isinstance(node, dict):
        return []
    found = [(path, node)] if node.get("type") == "string" else []
    return found + [s for k, v in node.items() for s in _strings(v, f"{path}/{k}")]


async def test_no_string_of_the_document_takes_a_nul(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    for path, string in _strings(document):
        if "enum" in string or "const" in string or "format" in string:
            continue
        assert "pattern" in string, path
        assert not re.search(string["pattern"], "a\x00b"), path
    payload = document["components"]["schemas"]["JobSpec"]["properties"]["payload"]
    assert payload["$ref"] == "#/components/schemas/JsonValue"
    name = document["components"]["schemas"]["JobSpec"]["properties"]["name"]
    assert not re.fullmatch(name["pattern"], "job\x1b[31m")
    problem(await client.post("/v1/jobs", json=spec(payload={"a": "\x00"})), 422, "payload.a")
    problem(await client.post("/v1/jobs", json=spec(name="job\u202e")), 422, "name")


async def test_id_prefix_and_at_say_what_the_server_reads(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    prefix = _parameter(document, "/v1/jobs", "get", "id_prefix")["schema"]["pattern"]
    for text, ok in [("01a2", True), ("01A2-26", True), ("0" * 32, True), ("0" * 33, False)]:
        assert bool(re.fullmatch(prefix, text)) is ok
        status = (await client.get("/v1/jobs", params={"id_prefix": text})).status_code
        assert status == (200 if ok else 422), text
    job = (await client.post("/v1/jobs", json=spec())).json()
    at = _parameter(document, "/v1/jobs/{job_id}/why", "get", "at")["schema"]["pattern"]
    for text, ok in [("09:00", True), ("2026-01-01T10:00Z", True), (" 09:00", False)]:
        assert bool(re.fullmatch(at, text)) is ok
        response = await client.get(f"/v1/jobs/{job['id']}/why", params={"at": text})
        assert response.status_code == (200 if ok else 422), (text, response.text)


async def test_why_in_local_mean_time_is_no_crash(client: httpx.AsyncClient) -> None:
    # Paris was +00:09:21 before 1911: RFC 3339 has no seconds in an offset, so such
    # times are given in UTC (before: a 500, the response failing its own model).
    job = (await client.post("/v1/jobs", json=spec())).json()
    response = await client.get(f"/v1/jobs/{job['id']}/why", params={"at": "1900-01-01"})
    assert response.status_code == 200, response.text
    assert response.json()["at"] == "1899-12-31T23:50:39+00:00"


async def test_a_tenant_keeps_its_name_and_weight(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    patch = document["components"]["schemas"]["TenantPatch"]["properties"]
    assert patch["claim_weight"]["type"] == "number" and "anyOf" not in patch["claim_weight"]
    assert patch["name"]["type"] == "string"
    assert {"type": "null"} in patch["max_jobs"]["anyOf"]  # null removes a quota
    body = {"claim_weight": None}
    problem(await client.patch("/v1/tenants/default", json=body), 422, "claim_weight")


async def test_dead_letter_replay_has_two_forms(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    forms = document["components"]["schemas"]["DeadReplayIn"]["oneOf"]
    assert [f["required"] for f in forms] == [["run_ids"], ["job_id", "all"]]
    body = {"all": True, "run_ids": []}
    problem(await client.post("/v1/dead-letter/replay", json=body), 422, "run_ids")


async def test_a_tiny_create_rate_is_a_429_not_an_overflow(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    assert "429" in document["paths"]["/v1/runs/{run_id}/replay"]["post"]["responses"]
    assert "429" in document["paths"]["/v1/dead-letter/replay"]["post"]["responses"]
    job = (await client.post("/v1/jobs", json=spec())).json()
    changed = await client.patch("/v1/tenants/default", json={"max_creates_per_second": 5e-324})
    assert changed.status_code == 200, changed.text
    # The bucket starts with a token; the next run would wait longer than a double holds.
    await client.post(f"/v1/jobs/{job['id']}/trigger")
    triggered = await client.post(f"/v1/jobs/{job['id']}/trigger")
    problem(triggered, 429, "max_creates_per_second")
    assert triggered.headers["Retry-After"] == "86400"
