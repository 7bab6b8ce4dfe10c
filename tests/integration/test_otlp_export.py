"""The OTel push of the live metrics (Locust's `--otel`): read back by the OTel SDK's in-memory metric reader on a
local runner, and printed by the SDK's console exporter — set up by Locust itself from the OTEL_* variables — through
master + 2 workers; the same counts as summary.json. (No OTLP collector runs here: the OTLP wire is the SDK's own
exporter's business, chosen by the same variables.)"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from conftest import LOCUSTFILE, options, read_summary, run_local, run_locust

pytest.importorskip("opentelemetry.sdk.metrics", reason="the OpenTelemetry SDK (pip install 'llm-locust[otel]')")

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader


@pytest.fixture(scope="module")
def reader() -> InMemoryMetricReader:
    """The process's global meter provider (as Locust's `--otel` sets one), read in memory."""
    in_memory = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[in_memory]))
    return in_memory


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            if scope.scope.name == "llm_locust":
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def test_otel_push_counts_what_summary_json_counts(fast_sim: Any, tmp_path: Path, reader: InMemoryMetricReader) -> None:
    opts = options("--host", fast_sim.url, "--otel", "--max-tokens", "8", "--results-dir", str(tmp_path))
    run_local(opts, users=4, seconds=3)
    summary = read_summary(tmp_path)
    points = _points(reader)
    run = {"run": tmp_path.name}
    ok = [p for p in points["llm_locust.requests"] if dict(p.attributes) == {**run, "outcome": "ok"}]
    assert sum(p.value for p in ok) == summary["throughput"]["requests_ok"] > 0
    assert sum(p.value for p in points["llm_locust.output_tokens"]) == summary["throughput"]["output_tokens"]
    ttft = [p for p in points["gen_ai.server.time_to_first_token"] if dict(p.attributes) == run]
    stats = summary["metrics"]["ttft_ms"]
    assert sum(p.count for p in ttft) == stats["count"]
    mean_ms = sum(p.sum for p in ttft) / stats["count"] * 1e3
    assert mean_ms == pytest.approx(stats["mean"], rel=1e-3)  # each value at the middle of its HdrHistogram bucket
    itl = points["llm_locust.itl"]
    assert sum(p.count for p in itl) == summary["metrics"]["itl_ms"]["count"]
    assert list(itl[0].explicit_bounds) == [0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1,
                                            0.15, 0.25, 0.5, 1.0]  # fmt: skip
    tokens = points["gen_ai.client.token.usage"]
    assert sum(p.count for p in tokens) == summary["metrics"]["output_tokens"]["count"]
    assert {p.attributes["gen_ai.token.type"] for p in tokens} == {"output"}
    quantiles = {(p.attributes["metric"], p.attributes["quantile"], p.attributes["window"]): p.value
                 for p in points["llm_locust.latency_quantile"] if p.attributes["run"] == tmp_path.name}  # fmt: skip
    assert quantiles[("ttft", "0.99", "run")] * 1e3 == pytest.approx(stats["p99"], rel=1e-3)
    assert "llm_locust.users" in points and "llm_locust.requests_in_flight" in points


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
    assert sum(p["count"] for p in last["llm_locust.itl"]) == summary["metrics"]["itl_ms"]["count"]
