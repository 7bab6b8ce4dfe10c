"""The live metrics as Prometheus metric families (`--prometheus-port`), named as OpenTelemetry's Prometheus exporter
names the GenAI semantic conventions' instruments.

A convention's instrument where one exists — `gen_ai.server.time_to_first_token` (TTFT),
`gen_ai.server.time_per_output_token` (TPOT), `gen_ai.client.operation.duration` (E2E), `gen_ai.client.token.usage`
(output tokens per request) —, `llm_locust.<name>` for the other latencies of `declarations.LATENCIES`; dots become
"_", the unit "s" the suffix `_seconds`, a counter ends in `_total` (docs/live-export.md lists every name).

Labels: `run` (the results folder's name), `step` (the sweep step's index; empty outside sweeps) and, for a
breakdown's series, one of `live.DIMENSIONS` (`replica`, `model`, `name`; empty on the run's totals). A step's series
count every request sent in it, its warm-up included (summary.json's steps leave warm-up out); a breakdown's series
leave it out, as summary.json's breakdowns do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from llm_locust.export.live import COUNTERS, TOKEN_METRIC, Buckets, LiveGauges, LiveMetrics, Series, quantile_points
from llm_locust.metrics import declarations

QUANTILE_FAMILY = "llm_locust_latency_quantile_seconds"
"""The gauge of every latency's p50 / p90 / p99 (labels `metric`, `quantile`, `window` = "last" or "run")."""


def prometheus_name(instrument: str, unit: str = "") -> str:
    """The Prometheus name OpenTelemetry's exporter gives the histogram `instrument`: "." -> "_", unit "s" -> the
    suffix `_seconds` (a unit in braces, `{token}`, adds none)."""
    return instrument.replace(".", "_") + {"s": "_seconds"}.get(unit, "")


def _series_labels(run: str, series: Series, dimensions: tuple[str, ...]) -> list[str]:
    step = "" if series.step < 0 else str(series.step)
    return [run, step, *(series.label if series.dimension == d else "" for d in dimensions)]


def families(live: LiveMetrics, gauges: LiveGauges) -> list[Metric]:
    """Every metric family of the export, now: counters and histograms per series, the gauges of `gauges`."""
    names = ["run", "step", *live.dimensions]
    requests = CounterMetricFamily(
        "llm_locust_requests", "Finished requests by outcome (ok, failed, cancelled) and error type", labels=[*names,
        "outcome", "error_type"])  # fmt: skip
    counters = [CounterMetricFamily(prometheus_name(c.instrument), c.help, labels=names) for c in COUNTERS]
    for series, counts in sorted(live.counts.items()):
        labels = _series_labels(gauges.run, series, live.dimensions)
        requests.add_metric([*labels, "ok", ""], counts.requests_ok)
        requests.add_metric([*labels, "cancelled", ""], counts.requests_cancelled)
        for kind, n in sorted(counts.failures.items()):
            requests.add_metric([*labels, "failed", kind], n)
        for family, counter in zip(counters, COUNTERS, strict=True):
            family.add_metric(labels, counter.read(counts))
    found: list[Metric] = [requests, *counters]
    for metric in declarations.LATENCIES:
        help_text = f"{metric.label}, seconds (llm-locust `{metric.name}`)"
        family = HistogramMetricFamily(prometheus_name(metric.instrument, "s"), help_text, labels=names)
        bounds = [_le(b) for b in live.geometry(metric.name).bounds]
        for (series, name), buckets in sorted(live.latencies.items()):
            if name == metric.name:
                family.add_metric(_series_labels(gauges.run, series, live.dimensions), _buckets(bounds, buckets),
                                  buckets.sum / 1e6)  # fmt: skip
        found.append(family)
    usage = HistogramMetricFamily(
        prometheus_name("gen_ai.client.token.usage"), "Output tokens per successful request",
        labels=[*names, "gen_ai_token_type"])  # fmt: skip
    bounds = [_le(b) for b in live.geometry(TOKEN_METRIC).bounds]
    for series, buckets in sorted(live.tokens.items()):
        usage.add_metric([*_series_labels(gauges.run, series, live.dimensions), "output"], _buckets(bounds, buckets),
                         float(buckets.sum))  # fmt: skip
    found.append(usage)
    return [*found, *gauge_families(gauges)]


def gauge_families(gauges: LiveGauges) -> list[Metric]:
    """Users, requests in flight, and each latency's p50/p90/p99 of the last closed time-series window (the latencies
    the time series has) and of the whole run so far (every latency with data)."""
    users = GaugeMetricFamily("llm_locust_users", "Locust users running now", labels=["run"])
    users.add_metric([gauges.run], gauges.users)
    in_flight = GaugeMetricFamily("llm_locust_requests_in_flight", "Requests sent, not finished", labels=["run"])
    in_flight.add_metric([gauges.run], gauges.in_flight)
    quantiles = GaugeMetricFamily(
        QUANTILE_FAMILY, "HdrHistogram percentiles (<= 0.1 % error) of each latency: the last closed time-series "
        "window's, and the whole run's", labels=["run", "metric", "quantile", "window"])  # fmt: skip
    for point in quantile_points(gauges):
        quantiles.add_metric([gauges.run, point.metric, point.quantile, point.window], point.value_s)
    return [users, in_flight, quantiles]


def _le(bound: float) -> str:
    """A bucket bound as its `le` label ("0.005", "1.0": Prometheus' float text)."""
    return repr(float(bound))


def _buckets(bounds: list[str], buckets: Buckets) -> list[tuple[str, float]]:
    cumulative = buckets.cumulative.tolist()
    return [*zip(bounds, cumulative[:-1], strict=True), ("+Inf", cumulative[-1])]


class LiveCollector(Collector):
    """A prometheus-client collector of the current test's live metrics (`source()`: None before the first test).
    `scrapes` counts the times it was read; `interval_s` is the time between the last two (None: fewer than two)."""

    def __init__(self, source: Callable[[], tuple[LiveMetrics, LiveGauges] | None]) -> None:
        self._source = source
        self.scrapes = 0
        self.interval_s: float | None = None
        self._last_s: float | None = None

    def collect(self) -> Iterator[Metric]:
        now_s = time.monotonic()
        if self._last_s is not None:
            self.interval_s = now_s - self._last_s
        self._last_s = now_s
        self.scrapes += 1
        current = self._source()
        if current is not None:
            yield from families(*current)

    def describe(self) -> list[Any]:
        """Nothing known in advance (the registry must not call `collect` to find out)."""
        return []
