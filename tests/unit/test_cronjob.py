"""Reading Kubernetes CronJob manifests as command jobs (issue 30 item 3, decision 0052
addendum): schedule, zone, concurrency policy, suspend, deadlines, the container's
command and env, several documents and Lists, and every refusal named by line and
field."""

from __future__ import annotations

import json

import pytest

from cronwheel.core.cronjob import CronJob, ManifestError, parse_cronjobs
from cronwheel.core.crontab import check_specs

# The example of kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/.
HELLO = """\
apiVersion: batch/v1
kind: CronJob
metadata:
  name: hello
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          containers:
          - name: hello
            image: busybox:1.28
            imagePullPolicy: IfNotPresent
            command:
            - /bin/sh
            - -c
            - date; echo Hello from the Kubernetes cluster
          restartPolicy: OnFailure
"""

FULL = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: b}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly-report
  namespace: billing
spec:
  schedule: "@daily"
  timeZone: Europe/Paris
  concurrencyPolicy: Forbid
  suspend: true
  startingDeadlineSeconds: 300
  jobTemplate:
    spec:
      activeDeadlineSeconds: 1800
      backoffLimit: 2
      template:
        spec:
          volumes: [{name: data, emptyDir: {}}]
          containers:
          - name: report
            image: registry.example.com/report:4.2
            command: ["/usr/local/bin/report"]
            args: ["--since", "$(SINCE)", "--out", "$(OUT_DIR)/r.csv", "$$(LITERAL)", "$(NOPE)"]
            workingDir: /srv/report
            env:
            - {name: SINCE, value: "24h"}
            - {name: OUT_DIR, value: "/var/reports/$(SINCE)"}
            - {name: API_TOKEN, value: "tok-123"}
            volumeMounts: [{name: data, mountPath: /data}]
          restartPolicy: Never
---
"""


def one(text: str, **options: str) -> CronJob:
    [cronjob] = parse_cronjobs(text, **options).cronjobs
    return cronjob


def problems(text: str) -> list[tuple[int, str]]:
    with pytest.raises(ManifestError) as caught:
        parse_cronjobs(text)
    return [(p.line, p.message) for p in caught.value.problems]


def test_the_kubernetes_docs_example_becomes_a_command_job() -> None:
    manifests = parse_cronjobs(HELLO)
    [hello] = manifests.cronjobs
    assert (hello.line, hello.name, hello.k8s_name) == (1, "cronjob-hello", "hello")
    assert (hello.cron, hello.timezone, hello.overlap, hello.paused) == (
        "* * * * *",
        "UTC",
        "allow",
        False,
    )
    assert hello.argv == ["/bin/sh", "-c", "date; echo Hello from the Kubernetes cluster"]
    spec = hello.spec(pool="default", timeout_seconds=600)
    assert spec["action"] == {"type": "command", "argv": hello.argv, "timeout_seconds": 600}
    assert spec["retry"]["max_attempts"] == 7  # backoffLimit's default, 6, and the first
    assert (spec["catchup_seconds"], spec["misfire"]) == (60.0, {"mode": "fire_once"})
    assert check_specs([(1, spec)]) == []
    notes = [w.message for w in manifests.warnings]
    assert any("image busybox:1.28 is not used" in n for n in notes), notes
    assert any("no spec.timeZone" in n for n in notes), notes


def test_every_field_cronwheel_has_is_carried_over_and_other_kinds_skipped() -> None:
    manifests = parse_cronjobs(FULL)
    [report] = manifests.cronjobs
    assert (report.line, report.name, report.k8s_name) == (
        6,
        "cronjob-billing-nightly-report",
        "billing/nightly-report",
    )
    assert (report.cron, report.timezone, report.overlap, report.paused) == (
        "0 0 * * *",
        "Europe/Paris",
        "skip",
        True,
    )
    # $(VAR) as Kubernetes expands it: known variables, $$ escapes, unknown ones kept
    assert report.argv == [
        "/usr/local/bin/report", "--since", "24h", "--out", "/var/reports/24h/r.csv",
        "$(LITERAL)", "$(NOPE)",
    ]  # fmt: skip
    assert report.env == {"SINCE": "24h", "OUT_DIR": "/var/reports/24h", "API_TOKEN": "tok-123"}
    spec = report.spec(pool="reports", timeout_seconds=600)
    assert spec["action"]["cwd"] == "/srv/report"
    assert spec["action"]["timeout_seconds"] == 1800  # activeDeadlineSeconds
    assert spec["retry"] == {"max_attempts": 3, "initial_delay": 10.0, "max_delay": 360.0}
    assert (spec["catchup_seconds"], spec["misfire"]) == (300.0, {"mode": "skip"})
    assert spec["payload"]["cronjob"] == "billing/nightly-report"
    assert check_specs([(6, spec)]) == []
    warnings = [(w.line, w.message) for w in manifests.warnings]
    assert warnings[0] == (1, "a ConfigMap (settings) is not a CronJob: skipped")
    assert any("volumes are not mounted" in m for _, m in warnings)


def test_suspend_and_every_policy_change_the_fingerprint_not_the_name() -> None:
    base = one(FULL).spec(pool="p", timeout_seconds=60)
    resumed = one(FULL.replace("suspend: true", "suspend: false")).spec(
        pool="p", timeout_seconds=60
    )
    assert resumed["name"] == base["name"]
    assert resumed["payload"]["fingerprint"] != base["payload"]["fingerprint"]
    for policy, overlap in (("Allow", "allow"), ("Replace", "replace")):
        changed = one(FULL.replace("Forbid", policy))
        assert changed.overlap == overlap
    again = one(FULL).spec(pool="p", timeout_seconds=60)
    assert again == base


def test_a_list_and_json_are_read_as_kubectl_prints_them() -> None:
    import yaml

    hello = yaml.safe_load(HELLO)
    other = json.loads(json.dumps(hello))
    other["metadata"] = {"name": "other", "namespace": "ops"}
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": [hello, other]})
    names = [c.name for c in parse_cronjobs(listed).cronjobs]
    assert names == ["cronjob-hello", "cronjob-ops-other"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("apiVersion: batch/v1", "apiVersion: apps/v1"), "apiVersion: 'apps/v1': a CronJob is"),
        (('schedule: "* * * * *"', 'schedule: "61 * * * *"'), "spec.schedule: '61 * * * *':"),
        (('schedule: "* * * * *"', 'schedule: "CRON_TZ=UTC 0 * * * *"'), "use spec.timeZone"),
        (('schedule: "* * * * *"', 'schedule: "@every 5m"'), "spec.schedule: '@every 5m'"),
        (("  schedule:", "  concurrencyPolicy: Sometimes\n  schedule:"),
         "spec.concurrencyPolicy: 'Sometimes': expected Allow, Forbid, Replace"),
        (("  schedule:", "  timeZone: Mars/Olympus\n  schedule:"), "spec.timeZone:"),
        (("  schedule:", "  startingDeadlineSeconds: soon\n  schedule:"),
         "spec.startingDeadlineSeconds: is str 'soon', not int"),
        (("            command:\n", "            args:\n"),
         "containers[0].command: is required: without it the image's entrypoint runs"),
        (("          containers:\n", "          containers:\n          - {name: sidecar}\n"),
         "containers: has 2 (sidecar, hello): a job runs one command"),
        (("            imagePullPolicy: IfNotPresent\n",
          "            env: [{name: PW, valueFrom: {secretKeyRef: {name: s, key: k}}}]\n"),
         "containers[0].env[0].valueFrom: PW: a value from the cluster"),
        (("  name: hello\n", "  labels: {}\n"), "metadata.name: is required"),
    ],
)  # fmt: skip
def test_a_cronjob_cronwheel_cannot_run_as_written_is_refused_naming_the_field(
    change: tuple[str, str], expected: str
) -> None:
    old, new = change
    assert old in HELLO
    [(line, message)] = problems(HELLO.replace(old, new))
    assert line == 1 and expected in message, message


def test_every_bad_document_is_named_by_its_line_and_nothing_is_imported() -> None:
    bad = HELLO.replace('"* * * * *"', '"0 0 30 2 * *"')
    text = f"{HELLO}---\n{bad}---\n- just a list\n---\n{HELLO}"
    found = problems(text)
    assert [line for line, _ in found] == [21, 41, 43]  # each document's first line
    assert found[0][1].startswith("CronJob hello: spec.schedule: '0 0 30 2 * *': expected five")
    assert found[1][1] == "a document is a Kubernetes object (a mapping)"
    assert found[2][1] == "CronJob hello is given twice in this stream"
    [(line, message)] = problems("kind: CronJob\n  bad: indent\n")
    assert line == 2 and message.startswith("not YAML:"), message
