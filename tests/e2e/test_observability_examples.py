"""examples/observability: the alert rules, the dashboard and the scrape configuration
name only metrics a real cronwheel process serves, and scrape the cluster example's
processes where they listen."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.procs import REPO, cronwheel, free_port, wait_until

EXAMPLES = REPO / "examples" / "observability"
CLUSTER = REPO / "examples" / "cluster"
METRIC = re.compile(r"\bcronwheel_[a-z0-9_]+\b")
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every series name a fresh ``cronwheel dev`` serves at /metrics (families with no
    sample yet included: they are announced from the start)."""
    tmp = tmp_path_factory.mktemp("observability")
    port, log = free_port(), tmp / "dev.log"
    args = ["dev", "--db", f"sqlite:///{tmp / 'dev.db'}", "--port", str(port)]
    with cronwheel(*args, log=log):
        url = f"http://127.0.0.1:{port}/metrics"
        text = wait_until("/metrics answers", lambda: httpx.get(url, timeout=10).text, 60, [log])
    names = set()
    for family in text_string_to_metric_families(text):
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def _rules() -> list[dict[str, Any]]:
    document = yaml.safe_load((EXAMPLES / "alerts.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_every_alert_names_only_metrics_that_a_scrape_serves(served: set[str]) -> None:
    rules = _rules()
    for rule in rules:
        assert set(rule) >= {"alert", "expr", "labels", "annotations"}, rule
        assert rule["labels"]["severity"] in ("warning", "critical"), rule
        assert rule["annotations"]["summary"], rule
        named = set(METRIC.findall(rule["expr"]))
        assert named, rule["alert"]
        assert named <= served, (rule["alert"], named - served)
    used = {name for rule in rules for name in METRIC.findall(rule["expr"])}
    # what the issue asks the rules to watch
    for metric in (
        "cronwheel_run_start_lag_seconds_bucket",  # scheduler lag
        "cronwheel_scheduler_shards_owned",  # shards without a scheduler
        "cronwheel_workers_alive",  # no live worker for a pool with due runs
        "cronwheel_runs_due",
        "cronwheel_dead_letter_runs",  # dead letter growing
        "cronwheel_webhook_responses_total",  # webhook 5xx rate
        "cronwheel_oldest_due_run_age_seconds",  # oldest due run age
    ):
        assert metric in used, metric
    assert len({rule["alert"] for rule in rules}) == len(rules)


def test_every_dashboard_panel_names_only_metrics_that_a_scrape_serves(
    served: set[str],
) -> None:
    dashboard = json.loads((EXAMPLES / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        named = set(METRIC.findall(expr))
        assert named and named <= served, (expr, named - served)


def test_the_scrape_config_targets_the_cluster_examples_processes() -> None:
    config = yaml.safe_load((EXAMPLES / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]
    targets = {
        job["job_name"]: {t for c in job["static_configs"] for t in c["targets"]}
        for job in config["scrape_configs"]
    }
    procfile = (CLUSTER / "Procfile").read_text()
    local = (CLUSTER / "run-local.sh").read_text()
    env = (CLUSTER / "env.sh").read_text()
    defaults = dict(re.findall(r"(CRONWHEEL_\w+_PORT):-(\d+)", env))
    port_of = {
        "cronwheel-api": ("API1", "API2"),
        "cronwheel-scheduler": ("SCHEDULER1_METRICS", "SCHEDULER2_METRICS"),
        "cronwheel-worker": ("WORKER1_METRICS", "WORKER2_METRICS", "WORKER3_METRICS"),
    }
    assert targets == {
        job: {f"127.0.0.1:{defaults[f'CRONWHEEL_{name}_PORT']}" for name in names}
        for job, names in port_of.items()
    }
    # The Procfile and run-local.sh start each process on its port.
    for name in ("SCHEDULER1", "SCHEDULER2", "WORKER1", "WORKER2", "WORKER3"):
        assert f'--metrics-port "$CRONWHEEL_{name}_METRICS_PORT"' in procfile, name
    assert 'port="CRONWHEEL_SCHEDULER${i}_METRICS_PORT"' in local
    assert 'port="CRONWHEEL_WORKER${i}_METRICS_PORT"' in local
    assert local.count('--metrics-port "${!port}"') == 2
