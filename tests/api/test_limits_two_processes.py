"""Issue 17, defect 6: tenant limits hold for the whole cluster. Two real ``cronwheel api``
processes on one PostgreSQL database together allow what one allows: the quotas live in
the store (decision 0027), not in each process's memory, where N processes allowed N
times the quota."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests import pg
from tests.api.helpers import ADMIN_TOKEN, spec
from tests.api.test_process import free_port, wait_until_up
from tests.e2e.procs import cronwheel

# Crashes, races between processes and what each store keeps differ by store: this
# file runs on both whatever CRONWHEEL_TEST_STORE says (tests/tiers.py).
pytestmark = pytest.mark.both_stores


@pytest.fixture
def two_apis(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two ``cronwheel api`` processes on one fresh PostgreSQL database, where a new
    tenant has at most 3 live jobs unless created with another limit: their URLs."""
    reason = pg.unreachable_reason()
    if reason is not None:
        if pg.REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)
    name, dsn = pg.create_database("cwtest_limits")
    try:
        with ExitStack() as stack:
            urls = []
            for which in ("a", "b"):  # one after the other: the first one migrates
                port, log = free_port(), tmp_path / f"api-{which}.log"
                args = ("api", "--db", dsn, "--port", str(port), "--admin-token", ADMIN_TOKEN)
                # The operator's default for new tenants, as production would set it.
                env = {"CRONWHEEL_TENANT_MAX_JOBS": "3"}
                proc = stack.enter_context(cronwheel(*args, env=env, log=log))
                url = f"http://127.0.0.1:{port}"
                wait_until_up(url, proc, log)
                urls.append(url)
            yield urls[0], urls[1]
    finally:
        pg.drop_database(name)


def _tenant_writer(url: str, tenant: str, **limits: float) -> dict[str, str]:
    """Create a tenant with ``limits`` through ``url``; the headers of a write key of it."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    created = httpx.post(
        f"{url}/v1/tenants", json={"id": tenant, "name": tenant, **limits}, headers=admin
    )
    assert created.status_code == 201, created.text
    key = httpx.post(f"{url}/v1/keys", json={"role": "write", "tenant_id": tenant}, headers=admin)
    assert key.status_code == 201, key.text
    return {"Authorization": f"Bearer {key.json()['token']}"}


async def _create_on_both(
    urls: tuple[str, str], each: int, headers: dict[str, str]
) -> list[httpx.Response]:
    """``each`` job creates (each of its own name) to each process, all at once."""
    async with httpx.AsyncClient(headers=headers, timeout=30) as client:
        posts = [client.post(f"{url}/v1/jobs", json=spec()) for _ in range(each) for url in urls]
        return list(await asyncio.gather(*posts))


def test_the_create_rate_holds_across_two_api_processes(two_apis: tuple[str, str]) -> None:
    a, b = two_apis
    # 0.01 per second: the bucket holds one create, and refills one per 100 s, so during
    # the test the whole cluster may create exactly one thing. Each process counting on
    # its own allowed one each.
    writer = _tenant_writer(a, "trickle", max_creates_per_second=0.01)
    answers = asyncio.run(_create_on_both(two_apis, 5, writer))
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [201] + [429] * 9, [r.text for r in answers]
    for refused in (r for r in answers if r.status_code == 429):
        body = refused.json()
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert body["field"] == "max_creates_per_second"
        assert int(refused.headers["retry-after"]) >= 1
    [job] = [r.json() for r in answers if r.status_code == 201]
    # Every path that creates runs draws on the same bucket, in either process.
    for url in (a, b):
        trigger = httpx.post(f"{url}/v1/jobs/{job['id']}/trigger", headers=writer)
        assert trigger.status_code == 429, trigger.text
        assert trigger.json()["field"] == "max_creates_per_second"
    runs = httpx.get(f"{b}/v1/jobs/{job['id']}/runs", headers=writer).json()["items"]
    assert runs == []  # nothing half-written
    listed = httpx.get(f"{b}/v1/jobs", headers=writer).json()["items"]
    assert [j["id"] for j in listed] == [job["id"]]


def test_max_jobs_holds_across_two_api_processes(two_apis: tuple[str, str]) -> None:
    a, b = two_apis
    writer = _tenant_writer(b, "small")  # max_jobs 3: the processes' default
    answers = asyncio.run(_create_on_both(two_apis, 8, writer))
    created = [r for r in answers if r.status_code == 201]
    refused = [r for r in answers if r.status_code == 429]
    assert (len(created), len(refused)) == (3, 13), [r.text for r in answers]
    assert all(r.json()["field"] == "max_jobs" for r in refused)
    listed = httpx.get(f"{a}/v1/jobs", headers=writer).json()["items"]
    assert len(listed) == 3
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    assert httpx.get(f"{a}/v1/tenants/small", headers=admin).json()["max_jobs"] == 3
