"""The Grafana dashboard and the Prometheus alert rules in deploy/ use only metrics that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.support.metrics import families
from tests.support.service import Service

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy/grafana/sluice.json"
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
METRIC = re.compile(r"\b(?:sluice|process|python)_[a-z_]+\b")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}


def _exposed(text: str) -> set[str]:
    """Every sample name a scrape can hold, empty families included."""
    names: set[str] = set()
    for name, kind in families(text).items():
        names.update(name + suffix for suffix in SUFFIXES.get(kind, ("",)))
    return names


def test_every_metric_the_dashboard_and_alerts_use_exists(svc: Service) -> None:
    """Issue 17: "Ship a Grafana dashboard JSON and Prometheus alert rules (tick failing,
    head blocked longer than N, a queue at depth) in the repo, and test that every metric
    they use exists.\""""
    svc.ok("POST", "/queues", {"name": "q", "depth": 1, "scheduling": "strict_fifo"}, 201)
    svc.tick()
    exposed = _exposed(svc.http.get("/metrics").text)
    rules = [
        rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]
    ]
    alerts = {rule["alert"]: rule["expr"] for rule in rules}
    assert {"SluiceTickFailing", "SluiceHeadBlocked", "SluiceQueueAtDepth"} <= alerts.keys()
    board = json.loads(DASHBOARD.read_text())
    dashboard = [target["expr"] for panel in board["panels"] for target in panel["targets"]]
    dashboard += [v["definition"] for v in board["templating"]["list"] if "definition" in v]
    assert len(dashboard) > 10
    for where, exprs in (("alerts.yml", list(alerts.values())), ("sluice.json", dashboard)):
        used = {name for expr in exprs for name in METRIC.findall(expr)}
        assert used and used <= exposed, f"{where} uses {sorted(used - exposed)}"
