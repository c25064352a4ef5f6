"""Jobs over HTTP: every endpoint's happy path and its main refusals, on both stores."""

from __future__ import annotations

import httpx

from tests.api.helpers import problem, spec


async def test_create_answers_the_job_with_location_and_etag(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=spec("nightly", payload={"a": [1, 2]}))
    assert response.status_code == 201, response.text
    job = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert response.headers["etag"] == '"1"'
    assert job["name"] == "nightly"
    assert job["tenant_id"] == "default"
    assert job["state"] == "active"
    assert job["payload"] == {"a": [1, 2]}
    assert job["priority"] == "normal"
    assert job["retry"]["max_attempts"] == 3
    assert job["misfire"] == {"mode": "fire_once", "limit": 100}
    assert job["next_fire_at"].endswith("+00:00")
    assert job["created_at"].endswith("+00:00")
    fetched = await client.get(f"/v1/jobs/{job['id']}")
    assert fetched.status_code == 200
    assert fetched.json() == job
    assert fetched.headers["etag"] == '"1"'


async def test_an_immediate_job_is_completed_and_has_its_run(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec(schedule={"kind": "immediate"}))).json()
    assert job["state"] == "completed"
    runs = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()
    assert [r["state"] for r in runs["items"]] == ["pending"]
    assert runs["next_cursor"] is None


async def test_a_name_taken_by_a_live_job_is_a_conflict(client: httpx.AsyncClient) -> None:
    assert (await client.post("/v1/jobs", json=spec("same"))).status_code == 201
    problem(await client.post("/v1/jobs", json=spec("same")), 409, "name")


async def test_list_filters_by_state_pool_and_name_prefix(client: httpx.AsyncClient) -> None:
    a = (await client.post("/v1/jobs", json=spec("report-a", pool="reports"))).json()
    await client.post("/v1/jobs", json=spec("report-b", pool="reports"))
    await client.post("/v1/jobs", json=spec("mail"))
    await client.post(f"/v1/jobs/{a['id']}/pause")

    async def names(**params: str) -> list[str]:
        response = await client.get("/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        return [j["name"] for j in response.json()["items"]]

    assert await names() == ["report-a", "report-b", "mail"]
    assert await names(pool="reports") == ["report-a", "report-b"]
    assert await names(state="paused") == ["report-a"]
    assert await names(name_prefix="report-") == ["report-a", "report-b"]
    assert await names(name_prefix="%") == []
    problem(await client.get("/v1/jobs", params={"state": "sleeping"}), 422, "state")
    problem(await client.get("/v1/jobs", params={"limit": 0}), 422, "limit")
    problem(await client.get("/v1/jobs", params={"limit": 1001}), 422, "limit")


async def test_list_filters_by_kind_and_last_outcome_newest_first(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/jobs", json=spec("cron-a"))
    await client.post(
        "/v1/jobs", json=spec("every", schedule={"kind": "interval", "every_seconds": 60})
    )
    manual = (
        await client.post("/v1/jobs", json=spec("by-hand", schedule={"kind": "manual"}))
    ).json()
    run = (await client.post(f"/v1/jobs/{manual['id']}/trigger")).json()
    assert (await client.post(f"/v1/runs/{run['id']}/cancel")).status_code == 200

    async def names(**params: str) -> list[str]:
        response = await client.get("/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        return [j["name"] for j in response.json()["items"]]

    assert await names(kind="interval") == ["every"]
    assert await names(kind="cron", last_outcome="none") == ["cron-a"]
    assert await names(last_outcome="cancelled") == ["by-hand"]
    assert await names(last_outcome="succeeded") == []
    assert await names(order="-created") == ["by-hand", "every", "cron-a"]
    first = (await client.get("/v1/jobs", params={"order": "-created", "limit": 2})).json()
    assert [j["name"] for j in first["items"]] == ["by-hand", "every"]
    assert await names(order="-created", cursor=first["next_cursor"]) == ["cron-a"]
    problem(await client.get("/v1/jobs", params={"kind": "hourly"}), 422, "kind")
    problem(await client.get("/v1/jobs", params={"last_outcome": "failed"}), 422, "last_outcome")
    problem(await client.get("/v1/jobs", params={"order": "last_run"}), 422, "order")


async def test_list_finds_a_job_by_exact_name_or_id_prefix(client: httpx.AsyncClient) -> None:
    first = (await client.post("/v1/jobs", json=spec("backup"))).json()
    await client.post("/v1/jobs", json=spec("backup-logs"))
    assert (await client.delete(f"/v1/jobs/{first['id']}")).status_code == 200
    again = (await client.post("/v1/jobs", json=spec("backup"))).json()

    async def ids(**params: str) -> list[str]:
        response = await client.get("/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        return [j["id"] for j in response.json()["items"]]

    assert await ids(name="backup") == [first["id"], again["id"]]
    assert await ids(name="backup", state="active") == [again["id"]]
    assert await ids(name="back") == []
    assert await ids(id_prefix=again["id"][:-4]) == [again["id"]]
    assert await ids(id_prefix=again["id"][:-4].replace("-", "").upper()) == [again["id"]]
    problem(await client.get("/v1/jobs", params={"id_prefix": "backup"}), 422, "id_prefix")
    problem(await client.get("/v1/jobs", params={"id_prefix": "0" * 37}), 422, "id_prefix")


async def test_patch_changes_fields_and_bumps_the_version(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec(payload={"v": 1}))).json()
    url = f"/v1/jobs/{job['id']}"
    response = await client.patch(
        url, json={"payload": None, "retry": {"max_attempts": 7}}, headers={"If-Match": '"1"'}
    )
    assert response.status_code == 200, response.text
    changed = response.json()
    assert changed["version"] == 2
    assert response.headers["etag"] == '"2"'
    assert changed["payload"] is None
    assert changed["retry"]["max_attempts"] == 7
    assert changed["name"] == job["name"]
    assert changed["schedule"] == job["schedule"]
    bare = await client.patch(url, json={"pool": "other"}, headers={"If-Match": "2"})
    assert bare.json()["pool"] == "other"
    anything = await client.patch(url, json={"priority": "high"}, headers={"If-Match": "*"})
    assert anything.json()["version"] == 4


async def test_patch_preconditions(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec())).json()
    url = f"/v1/jobs/{job['id']}"
    problem(await client.patch(url, json={"pool": "x"}), 428, "If-Match")
    problem(
        await client.patch(url, json={"pool": "x"}, headers={"If-Match": '"9"'}), 412, "version"
    )
    problem(
        await client.patch(url, json={"pool": "x"}, headers={"If-Match": "v1"}), 422, "If-Match"
    )
    problem(await client.patch(url, json={"colour": "x"}, headers={"If-Match": "1"}), 422, "colour")
    bad_cron = {"schedule": {"kind": "cron", "cron": "* * *"}}
    body = problem(await client.patch(url, json=bad_cron, headers={"If-Match": "1"}), 422)
    assert body["field"].startswith("schedule")
    assert (await client.get(url)).json()["version"] == 1


async def test_pause_resume_cancel_and_trigger(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec())).json()
    url = f"/v1/jobs/{job['id']}"
    paused = await client.post(f"{url}/pause")
    assert paused.status_code == 200
    assert paused.json()["state"] == "paused"
    problem(await client.post(f"{url}/trigger"), 409, "state")
    resumed = await client.post(f"{url}/resume", json={"catch_up": True})
    assert resumed.json()["state"] == "active"
    again = await client.post(f"{url}/resume")  # already active: a no-op, not an error
    assert (again.status_code, again.json()["version"]) == (200, resumed.json()["version"])
    triggered = await client.post(f"{url}/trigger")
    assert triggered.status_code == 201
    run = triggered.json()
    assert triggered.headers["location"] == f"/v1/runs/{run['id']}"
    assert run["job_id"] == job["id"]
    assert run["state"] == "pending"
    assert run["reason"] == "triggered by admin-token"
    cancelled = await client.delete(url)
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "cancelled"
    assert (await client.get(f"/v1/runs/{run['id']}")).json()["state"] == "cancelled"
    problem(await client.post(f"{url}/pause"), 409)


async def test_resume_takes_no_body_or_an_object(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec())).json()
    url = f"/v1/jobs/{job['id']}"
    await client.post(f"{url}/pause")
    problem(await client.post(f"{url}/resume", json={"catch_up": "maybe"}), 422, "catch_up")
    problem(await client.post(f"{url}/resume", json=[True]), 400)
    assert (await client.post(f"{url}/resume")).status_code == 200


async def test_unknown_ids_are_not_found(client: httpx.AsyncClient) -> None:
    missing = "01890000-0000-7000-8000-000000000000"
    for method, path in [
        ("GET", f"/v1/jobs/{missing}"),
        ("GET", "/v1/jobs/not-a-uuid"),
        ("DELETE", f"/v1/jobs/{missing}"),
        ("POST", f"/v1/jobs/{missing}/pause"),
        ("POST", f"/v1/jobs/{missing}/resume"),
        ("POST", f"/v1/jobs/{missing}/trigger"),
        ("GET", f"/v1/jobs/{missing}/runs"),
        ("GET", "/v1/runs/999999"),
        ("POST", "/v1/runs/999999/cancel"),
        ("POST", "/v1/runs/999999/replay"),
        ("GET", "/v1/nothing-here"),
    ]:
        problem(await client.request(method, path), 404)
    problem(await client.patch(f"/v1/jobs/{missing}", json={}, headers={"If-Match": "1"}), 404)
    problem(await client.get("/v1/runs/not-a-number"), 422, "run_id")
    problem(await client.get(f"/v1/runs/{2**63}"), 422, "run_id")
