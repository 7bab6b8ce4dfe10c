"""The OTel push of the live metrics (Locust's `--otel`) through master + 2 workers, printed by the OTel SDK's console
exporter (`OTEL_METRICS_EXPORTER=console`, as Locust's own metrics are): its last export holds summary.json's counts.
(No OTLP collector runs here: the OTLP exporter is chosen by the same variables, `otlp`.)"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import LOCUSTFILE, read_summary, run_locust

pytest.importorskip("opentelemetry.sdk.metrics", reason="the OpenTelemetry SDK (pip install 'llm-locust[otel]')")


def _console_documents(text: str) -> list[dict[str, Any]]:
    """The JSON documents the SDK's console exporter printed into `text` (among Locust's own output)."""
    decoder, documents, at = json.JSONDecoder(), [], 0
    while (start := text.find('{\n    "resource_metrics"', at)) >= 0:
        document, at = decoder.raw_decode(text, start)
        documents.append(document)
    return documents


def test_locusts_own_otel_setup_pushes_the_masters_final_counts(fast_sim: Any, tmp_path: Path) -> None:
    env = {**os.environ, "OTEL_METRICS_EXPORTER": "console", "OTEL_TRACES_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none", "OTEL_METRIC_EXPORT_INTERVAL": "1000"}  # fmt: skip
    proc = run_locust(
        LOCUSTFILE, "--processes", "2", "-u", "4", "-r", "4", "--run-time", "4s", "--host", fast_sim.url,
        "--max-tokens", "8", "--results-dir", str(tmp_path), "--otel", timeout_s=90, env=env,
    )  # fmt: skip
    summary = read_summary(tmp_path)
    ours = [
        scope
        for document in _console_documents(proc.stdout)
        for resource in document["resource_metrics"]
        for scope in resource["scope_metrics"]
        if scope["scope"]["name"] == "llm_locust"
    ]
    assert ours, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = {metric["name"]: metric["data"]["data_points"] for metric in ours[-1]["metrics"]}  # cumulative: the totals
    ok = [p["value"] for p in last["llm_locust.requests"] if p["attributes"] == {"run": tmp_path.name, "outcome": "ok"}]
    assert ok == [summary["throughput"]["requests_ok"]] and ok[0] > 0
    for metric in ("ttft", "itl", "e2e"):
        stats = summary["metrics"][f"{metric}_ms"]
        name = {"ttft": "gen_ai.server.time_to_first_token", "itl": "llm_locust.itl",
                "e2e": "gen_ai.client.operation.duration"}[metric]  # fmt: skip
        (point,) = [p for p in last[name] if p["attributes"] == {"run": tmp_path.name}]
        assert point["count"] == sum(point["bucket_counts"]) == stats["count"], metric
        assert point["sum"] / point["count"] * 1e3 == pytest.approx(stats["mean"], abs=1e-3), metric
    quantiles = {(p["attributes"]["metric"], p["attributes"]["quantile"], p["attributes"]["window"]): p["value"]
                 for p in last["llm_locust.latency_quantile"]}  # fmt: skip
    assert quantiles[("ttft", "0.99", "run")] * 1e3 == pytest.approx(summary["metrics"]["ttft_ms"]["p99"], abs=1e-3)
