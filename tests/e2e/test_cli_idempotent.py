"""Asking the CLI for the state a job or run is already in: exit 0 and the same answer
every time; a transition that cannot happen: exit 4 (conflict), in a sentence."""

from __future__ import annotations

import json

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py).
from tests.e2e.apiserver import api_store, api_url_per_module, shared_api  # noqa: F401
from tests.e2e.test_cli import cli


def test_control_verbs_answer_the_same_every_time(api_url: str) -> None:
    created = cli(api_url, "jobs", "create", "--name", "idem", "--every", "60", "--handler", "h")
    assert created.returncode == 0, created.stderr
    job = json.loads(cli(api_url, "jobs", "list", "--json").stdout)["items"][0]
    answers = [cli(api_url, "jobs", "pause", job["id"], "--json") for _ in range(2)]
    assert [a.returncode for a in answers] == [0, 0]
    first, second = (json.loads(a.stdout) for a in answers)
    assert first == second and (first["state"], first["version"]) == ("paused", 2)
    assert cli(api_url, "jobs", "resume", job["id"]).returncode == 0
    again = cli(api_url, "jobs", "resume", job["id"], "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["version"] == 3
    for _ in range(2):
        cancelled = cli(api_url, "jobs", "cancel", job["id"], "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        assert json.loads(cancelled.stdout)["version"] == 4
    refused = cli(api_url, "jobs", "pause", job["id"])
    assert refused.returncode == 4 and "cancelled" in refused.stderr
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) <= 2
