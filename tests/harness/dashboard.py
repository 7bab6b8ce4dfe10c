"""The PromQL of the Grafana dashboard (deploy/grafana/llm-locust.json), as a test runs it against a real Prometheus."""

from __future__ import annotations

import json
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "llm-locust.json"


def dashboard_queries(run: str, rate_interval: str = "4s") -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of the dashboard, its variables given a value: `$run` this run's name
    (its results folder's), `$__rate_interval` `rate_interval` (4 scrapes of 1 s)."""
    dashboard = json.loads(DASHBOARD.read_text())
    values = {"$__rate_interval": rate_interval, 'run=~"$run"': f'run=~"{run}"'}
    queries = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in values.items():
                expr = expr.replace(variable, value)
            queries.append((panel["title"], expr))
    return queries
