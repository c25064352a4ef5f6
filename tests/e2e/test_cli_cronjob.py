"""``cronwheel import cronjob`` against a real ``cronwheel api`` (issue 30 item 3,
decision 0052 addendum): Kubernetes CronJobs become command jobs once; importing them
again creates nothing; a change updates the job, ``suspend`` pauses and resumes it; a
dry run writes nothing; a CronJob cronwheel cannot run imports nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py).
from tests.e2e.apiserver import api_store, api_url_per_module, shared_api  # noqa: F401
from tests.e2e.test_cli import cli, cli_process

MANIFESTS = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: reports}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: report, namespace: billing}
spec:
  schedule: "30 2 * * *"
  timeZone: Europe/Paris
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: report
            image: registry.example.com/report:4.2
            command: ["/usr/local/bin/report", "--out", "$(OUT)"]
            env: [{name: OUT, value: /var/reports}]
          restartPolicy: OnFailure
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: cleanup, namespace: billing}
spec:
  schedule: "@hourly"
  suspend: true
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - {name: c, image: busybox, command: [find, /tmp, -mtime, "+1", -delete]}
          restartPolicy: Never
"""


def _jobs(url: str) -> dict[str, dict[str, Any]]:
    listed = cli(url, "jobs", "list", "--name-prefix", "cronjob-", "--json")
    assert listed.returncode == 0, listed.stderr
    return {j["name"]: j for j in json.loads(listed.stdout)["items"]}


def _import(url: str, path: Path, *options: str) -> dict[str, Any]:
    done = cli(url, "import", "cronjob", str(path), "--json", *options)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_cronjobs_import_once_and_a_changed_one_updates_its_job(
    api_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "cronjobs.yaml"
    path.write_text(MANIFESTS)

    human = cli(api_url, "import", "cronjob", str(path), "--dry-run")
    assert human.returncode == 0, human.stderr
    assert "line 1: a ServiceAccount (reports) is not a CronJob: skipped" in human.stderr
    assert "the image registry.example.com/report:4.2 is not used" in human.stderr
    assert "--allow-command /usr/local/bin/report --allow-command find" in human.stderr
    assert "dry run" in human.stderr
    header, *rows = human.stdout.splitlines()
    assert header.split("\t") == ["line", "result", "name", "schedule"]
    assert [row.split("\t")[:3] for row in rows] == [
        ["5", "create", "cronjob-billing-report"],
        ["23", "create", "cronjob-billing-cleanup"],
    ]
    assert _jobs(api_url) == {}

    created = _import(api_url, path)
    assert [j["result"] for j in created["jobs"]] == ["created", "created"]
    jobs = _jobs(api_url)
    report, cleanup = jobs["cronjob-billing-report"], jobs["cronjob-billing-cleanup"]
    assert (report["schedule"]["cron"], report["schedule"]["timezone"]) == (
        "30 2 * * *",
        "Europe/Paris",
    )
    assert (report["overlap"], report["state"]) == ("skip", "active")
    assert report["action"]["argv"] == ["/usr/local/bin/report", "--out", "/var/reports"]
    assert (cleanup["schedule"]["cron"], cleanup["state"]) == ("0 * * * *", "paused")

    again = _import(api_url, path)
    assert [j["result"] for j in again["jobs"]] == ["unchanged", "unchanged"]
    assert len(_jobs(api_url)) == 2

    path.write_text(
        MANIFESTS.replace("Forbid", "Replace").replace("suspend: true", "suspend: false")
    )
    assert [j["result"] for j in _import(api_url, path, "--dry-run")["jobs"]] == [
        "update",
        "update",
    ]
    changed = _import(api_url, path)
    assert [j["result"] for j in changed["jobs"]] == ["updated", "updated"]
    after = _jobs(api_url)
    assert set(after) == set(jobs)
    assert after["cronjob-billing-report"]["overlap"] == "replace"
    assert after["cronjob-billing-cleanup"]["state"] == "active"


def test_a_cronjob_cronwheel_cannot_run_imports_nothing(api_url: str) -> None:
    sidecar = MANIFESTS.replace(
        "          - name: report\n",
        "          - {name: proxy, image: envoy, command: [envoy]}\n          - name: report\n",
    )
    refused = cli_process(api_url, "import", "cronjob", "-", stdin=sidecar)
    assert refused.returncode == 2
    assert (
        "line 5: CronJob report: spec.jobTemplate.spec.template.spec.containers: has 2"
        " (proxy, report): a job runs one command"
    ) in refused.stderr
    assert "Traceback" not in refused.stderr
    assert _jobs(api_url) == {}  # not even cleanup
