"""``/v1/pipelines``: pipeline definitions over HTTP, versioned (decision 0025)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.helpers import pipeline, problem


def definition(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k in ("tasks", "edges", "failure_policy")}


async def create(client: httpx.AsyncClient, **changes: Any) -> dict[str, Any]:
    response = await client.post("/v1/pipelines", json=pipeline(**changes))
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_create_answers_201_with_location_and_etag(client: httpx.AsyncClient) -> None:
    sent = pipeline("nightly")
    response = await client.post("/v1/pipelines", json=sent)
    assert response.status_code == 201, response.text
    body = response.json()
    assert response.headers["location"] == f"/v1/pipelines/{body['id']}"
    assert response.headers["etag"] == '"1"'
    assert (body["name"], body["version"], body["latest_version"]) == ("nightly", 1, 1)
    assert body["state"] == "active" and body["failure_policy"] == "stop"
    assert body["tasks"]["load"]["pool"] == "db"
    assert body["tasks"]["extract"]["retry"]["max_attempts"] >= 1  # defaults filled in
    assert body["edges"][0] == {"from": "extract", "to": "load", "on": "on_success"}
    assert len(body["fingerprint"]) == 64
    read = await client.get(f"/v1/pipelines/{body['id']}")
    assert read.status_code == 200 and read.json() == body
    assert read.headers["etag"] == '"1"'


async def test_a_name_is_unique_among_live_pipelines(client: httpx.AsyncClient) -> None:
    first = await create(client, name="etl")
    problem(await client.post("/v1/pipelines", json=pipeline("etl")), 409, "name")
    assert (await client.delete(f"/v1/pipelines/{first['id']}")).status_code == 200
    await create(client, name="etl")


async def test_idempotency_key_replays_the_creation(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "pipe-1"}
    sent = pipeline("once")
    first = await client.post("/v1/pipelines", json=sent, headers=headers)
    again = await client.post("/v1/pipelines", json=sent, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["etag"] == '"1"'
    assert again.headers["location"] == first.headers["location"]
    listed = (await client.get("/v1/pipelines", params={"name": "once"})).json()["items"]
    assert len(listed) == 1
    other = await client.post("/v1/pipelines", json=pipeline("twice"), headers=headers)
    problem(other, 409, "Idempotency-Key")


async def test_each_refusal_names_the_field(client: httpx.AsyncClient) -> None:
    base = pipeline()
    tasks = base["tasks"]
    cases: list[tuple[dict[str, Any], str, str]] = [
        (pipeline(edges=[{"from": "extract", "to": "c"}]), "edges.0.to", "'c' is not a task"),
        (
            pipeline(edges=[*base["edges"], {"from": "nope", "to": "load"}]),
            "edges.2.from",
            "not a task",
        ),
        (pipeline(edges=[{"from": "load", "to": "load"}]), "edges.0", "wait for itself"),
        (
            pipeline(edges=[{"from": "extract", "to": "load"}] * 2),
            "edges.1",
            "given twice",
        ),
        (
            pipeline(
                edges=[
                    {"from": "extract", "to": "load"},
                    {"from": "load", "to": "notify"},
                    {"from": "notify", "to": "extract"},
                ]
            ),
            "edges",
            "tasks.extract → tasks.load → tasks.notify → tasks.extract",
        ),
        (
            pipeline(
                tasks={**tasks, "fan": {"action": tasks["load"]["action"], "fan_out": {"max": 3}}}
            ),
            "tasks.fan.fan_out",
            "exactly one upstream",
        ),
        (pipeline(tasks={}), "tasks", ""),
        (pipeline(tasks={"c": {"action": {"type": "shell"}}}), "tasks.c.action", ""),
        (
            pipeline(tasks={"c": {"action": {"type": "handler", "name": "c"}, "color": 1}}),
            "tasks.c.color",
            "unknown field",
        ),
        (pipeline(failure_policy="maybe"), "failure_policy", ""),
        (pipeline(""), "name", ""),
        (pipeline("   "), "name", ""),
    ]
    for body, field, words in cases:
        found = problem(await client.post("/v1/pipelines", json=body), 422, field)
        assert words in found["detail"], found
    assert (await client.get("/v1/pipelines")).json()["items"] == []


async def test_a_refused_webhook_target_names_its_task(client: httpx.AsyncClient) -> None:
    tasks = {"ping": {"action": {"type": "webhook", "url": "http://127.0.0.1:8080/x"}}}
    problem(
        await client.post("/v1/pipelines", json=pipeline(tasks=tasks, edges=[])),
        422,
        "tasks.ping.action.url",
    )


async def test_secret_headers_are_masked_when_shown(client: httpx.AsyncClient) -> None:
    action = {
        "type": "webhook",
        "url": "https://example.com/x",
        "headers": {"Authorization": "Bearer s3cret"},
    }
    body = await create(client, tasks={"ping": {"action": action}}, edges=[])
    assert "s3cret" not in str(body)
    assert body["tasks"]["ping"]["action"]["headers"]["Authorization"] == "***"


async def test_put_stores_a_new_version_and_keeps_the_old(client: httpx.AsyncClient) -> None:
    first = await create(client)
    url = f"/v1/pipelines/{first['id']}"
    changed = definition(first) | {"failure_policy": "continue"}
    response = await client.put(url, json=changed, headers={"If-Match": '"1"'})
    assert response.status_code == 200, response.text
    second = response.json()
    assert (second["version"], second["latest_version"], second["failure_policy"]) == (
        2,
        2,
        "continue",
    )
    assert response.headers["etag"] == '"2"' and second["name"] == first["name"]
    old = await client.get(url, params={"version": 1})
    assert old.status_code == 200 and old.headers["etag"] == '"1"'
    assert old.json()["failure_policy"] == "stop" and old.json()["latest_version"] == 2
    assert (await client.get(url)).json() == second
    problem(await client.get(url, params={"version": 3}), 404)
    versions = (await client.get(f"{url}/versions")).json()
    assert [v["version"] for v in versions["items"]] == [2, 1]
    assert versions["items"][1]["fingerprint"] == first["fingerprint"]
    assert versions["items"][0]["actor"] and versions["next_cursor"] is None


async def test_put_of_the_same_content_keeps_the_version(client: httpx.AsyncClient) -> None:
    first = await create(client)
    url = f"/v1/pipelines/{first['id']}"
    response = await client.put(url, json=definition(first), headers={"If-Match": "1"})
    assert response.status_code == 200 and response.json() == first
    # Defaults written out or left out: the same content, the same version.
    response = await client.put(url, json=definition(pipeline()), headers={"If-Match": "1"})
    assert response.json()["version"] == 1


async def test_put_needs_the_current_version(client: httpx.AsyncClient) -> None:
    first = await create(client)
    url = f"/v1/pipelines/{first['id']}"
    changed = definition(first) | {"failure_policy": "continue"}
    problem(await client.put(url, json=changed), 428, "If-Match")
    problem(await client.put(url, json=changed, headers={"If-Match": "v1"}), 422, "If-Match")
    assert (await client.put(url, json=changed, headers={"If-Match": "1"})).status_code == 200
    stale = problem(await client.put(url, json=definition(first), headers={"If-Match": "1"}), 412)
    assert stale["field"] == "version" and "pipeline is at version 2" in stale["detail"]
    anyway = await client.put(url, json=definition(first), headers={"If-Match": "*"})
    assert anyway.json()["version"] == 3
    bad = definition(first) | {"edges": [{"from": "load", "to": "x"}]}
    problem(await client.put(url, json=bad, headers={"If-Match": "3"}), 422, "edges.0.to")
    problem(await client.put(url, json=pipeline(), headers={"If-Match": "3"}), 422, "name")


async def test_delete_is_soft_and_idempotent(client: httpx.AsyncClient) -> None:
    first = await create(client)
    url = f"/v1/pipelines/{first['id']}"
    deleted = await client.delete(url)
    assert deleted.status_code == 200 and deleted.json()["state"] == "deleted"
    assert (await client.delete(url)).json() == deleted.json()
    assert (await client.get(url)).json()["state"] == "deleted"
    assert (await client.get("/v1/pipelines")).json()["items"] == []
    problem(await client.put(url, json=definition(first), headers={"If-Match": "1"}), 409, "state")


async def test_unknown_ids_are_404(client: httpx.AsyncClient) -> None:
    for pid in ("01a20f43-02a4-7000-a601-83b4fd6bcd79", "nope"):
        problem(await client.get(f"/v1/pipelines/{pid}"), 404)
        problem(await client.delete(f"/v1/pipelines/{pid}"), 404)
        problem(await client.get(f"/v1/pipelines/{pid}/versions"), 404)
        put = await client.put(
            f"/v1/pipelines/{pid}", json=definition(pipeline()), headers={"If-Match": "1"}
        )
        problem(put, 404)


async def test_list_pages_with_a_cursor(client: httpx.AsyncClient) -> None:
    made = [await create(client) for _ in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/v1/pipelines", params=params)).json()
        seen += [p["id"] for p in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [p["id"] for p in made]
    problem(await client.get("/v1/pipelines", params={"cursor": "bm9wZQ"}), 422, "cursor")
    byname = (await client.get("/v1/pipelines", params={"name": made[2]["name"]})).json()
    assert [p["id"] for p in byname["items"]] == [made[2]["id"]]


async def test_versions_page_with_a_cursor(client: httpx.AsyncClient) -> None:
    first = await create(client)
    url = f"/v1/pipelines/{first['id']}"
    for v in range(1, 4):
        body = definition(first) | {"tasks": {f"t{v}": first["tasks"]["extract"]}, "edges": []}
        assert (await client.put(url, json=body, headers={"If-Match": str(v)})).status_code == 200
    page = (await client.get(f"{url}/versions", params={"limit": 3})).json()
    assert [v["version"] for v in page["items"]] == [4, 3, 2]
    rest = (await client.get(f"{url}/versions", params={"cursor": page["next_cursor"]})).json()
    assert [v["version"] for v in rest["items"]] == [1] and rest["next_cursor"] is None
    problem(await client.get(f"{url}/versions", params={"cursor": "x"}), 422, "cursor")
