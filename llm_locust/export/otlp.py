"""The live metrics pushed with OpenTelemetry when Locust's `--otel` is on: the Prometheus export's series
(`prometheus`) as OTel metric data — cumulative histograms with the same buckets, sums, gauges — handed to the OTel
SDK's exporters chosen by the same settings as Locust's own (`OTEL_METRICS_EXPORTER`: `otlp` over
`OTEL_EXPORTER_OTLP_METRICS_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`, `grpc` or `http/protobuf`, to
`OTEL_EXPORTER_OTLP_ENDPOINT`; `console`; `none`), every `OTEL_METRIC_EXPORT_INTERVAL` ms.

The data points are built from `live.LiveMetrics`, not recorded value by value through the OTel API (which has no
way to add bucket counts, and costs µs per call — one per token event for the ITL): counts exact, as in Prometheus.
Attributes: `run`, `step` (sweep runs), `replica` / `model` / `name` on a breakdown's points, `outcome` and
`error.type` on `llm_locust.requests`, `gen_ai.token.type` on `gen_ai.client.token.usage`. Imported only with
`--otel` (the SDK is an optional dependency: `pip install 'llm-locust[otel]'`). No Locust, no gevent.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    ConsoleMetricExporter,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricExporter,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from llm_locust.export.live import COUNTERS, TOKEN_METRIC, Buckets, LiveGauges, LiveMetrics, Series, quantile_points
from llm_locust.metrics import declarations

logger = logging.getLogger("llm_locust")

SCOPE = InstrumentationScope("llm_locust")
DEFAULT_INTERVAL_S = 60.0
"""OTEL_METRIC_EXPORT_INTERVAL's default (the SDK's), seconds."""
_CUMULATIVE = AggregationTemporality.CUMULATIVE


def export_interval_s() -> float:
    """`OTEL_METRIC_EXPORT_INTERVAL` (ms) in seconds; the SDK's default (60 s) when unset or not a positive number."""
    try:
        interval_s = float(os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "")) / 1e3
    except ValueError:
        return DEFAULT_INTERVAL_S
    return interval_s if interval_s > 0 else DEFAULT_INTERVAL_S


def exporters_from_environment() -> list[MetricExporter]:
    """The OTel SDK's metric exporters that `OTEL_METRICS_EXPORTER` names (default `otlp`), as Locust's `--otel` makes
    its own: an OTLP one over gRPC or HTTP (its package missing: said, skipped), `console`; `none`: none."""
    exporters: list[MetricExporter] = []
    for name in {e.strip().lower() for e in os.getenv("OTEL_METRICS_EXPORTER", "otlp").split(",") if e.strip()}:
        if name == "console":
            exporters.append(ConsoleMetricExporter())
        elif name == "otlp":
            protocol = os.getenv(
                "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", os.getenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            )
            try:
                if protocol.strip().lower() == "grpc":
                    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
                else:
                    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            except ImportError:
                logger.warning("--otel: no OTLP exporter for %r installed, the LLM metrics are not pushed (pip install "
                               "'llm-locust[otel]')", protocol)  # fmt: skip
                continue
            exporters.append(OTLPMetricExporter())
        elif name != "none":
            logger.warning("--otel: unknown OTEL_METRICS_EXPORTER %r ignored", name)
    return exporters


def metrics_data(live: LiveMetrics, gauges: LiveGauges, start_ns: int, now_ns: int, resource: Resource) -> MetricsData:
    """The live metrics as cumulative OTel data since `start_ns` (the test's start), at `now_ns`."""

    def attributes(series: Series, more: Mapping[str, str] | None = None) -> dict[str, str]:
        found = {"run": gauges.run, **({"step": str(series.step)} if series.step >= 0 else {})}
        if series.dimension:
            found[series.dimension] = series.label
        return {**found, **(more or {})}

    def histogram(name: str, unit: str, metric: str, points: Mapping[Series, Buckets], scale: float,
                  more: Mapping[str, str] | None = None) -> Metric:  # fmt: skip
        bounds = list(live.geometry(metric).bounds)
        data = [
            HistogramDataPoint(attributes(series, more), start_ns, now_ns, b.count, b.sum * scale,
                               [int(n) for n in _per_bucket(b)], bounds, b.min * scale, b.max * scale)
            for series, b in sorted(points.items())
        ]  # fmt: skip
        return Metric(name, None, unit, Histogram(data, _CUMULATIVE))

    def total(name: str, unit: str, points: list[tuple[dict[str, str], float]]) -> Metric:
        data = [NumberDataPoint(a, start_ns, now_ns, v) for a, v in points]
        return Metric(name, None, unit, Sum(data, _CUMULATIVE, is_monotonic=True))

    requests: list[tuple[dict[str, str], float]] = []
    counted: list[list[tuple[dict[str, str], float]]] = [[] for _ in COUNTERS]
    for series, counts in sorted(live.counts.items()):
        requests.append((attributes(series, {"outcome": "ok"}), counts.requests_ok))
        requests.append((attributes(series, {"outcome": "cancelled"}), counts.requests_cancelled))
        requests += [
            (attributes(series, {"outcome": "failed", "error.type": k}), n) for k, n in sorted(counts.failures.items())
        ]
        for points, counter in zip(counted, COUNTERS, strict=True):
            points.append((attributes(series), counter.read(counts)))
    found = [total("llm_locust.requests", "{request}", requests)]
    found += [total(c.instrument, c.unit, points) for c, points in zip(COUNTERS, counted, strict=True)]
    for m in declarations.LATENCIES:
        points = {series: b for (series, name), b in live.latencies.items() if name == m.name}
        found.append(histogram(m.instrument, "s", m.name, points, 1e-6))
    found.append(histogram("gen_ai.client.token.usage", "{token}", TOKEN_METRIC, live.tokens, 1.0,
                           {"gen_ai.token.type": "output"}))  # fmt: skip
    run = {"run": gauges.run}
    found.append(Metric("llm_locust.users", None, "{user}", Gauge([NumberDataPoint(run, 0, now_ns, gauges.users)])))
    found.append(Metric("llm_locust.requests_in_flight", None, "{request}",
                        Gauge([NumberDataPoint(run, 0, now_ns, gauges.in_flight)])))  # fmt: skip
    quantiles = [
        NumberDataPoint({**run, "metric": p.metric, "quantile": p.quantile, "window": p.window}, 0, now_ns, p.value_s)
        for p in quantile_points(gauges)
    ]
    found.append(Metric("llm_locust.latency_quantile", None, "s", Gauge(quantiles)))
    return MetricsData([ResourceMetrics(resource, [ScopeMetrics(SCOPE, found, "")], "")])


def _per_bucket(buckets: Buckets) -> list[int]:
    """The values in each bucket (OTel's counts), from the cumulative counts (Prometheus')."""
    cumulative = buckets.cumulative.tolist()
    return [b - a for a, b in zip([0, *cumulative[:-1]], cumulative, strict=True)]
