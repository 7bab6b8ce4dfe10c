"""The live metrics pushed with OpenTelemetry, when Locust's `--otel` is on: the instruments of the Prometheus export
(`prometheus`), recorded on the meter provider Locust set up from its exporter settings (`OTEL_METRICS_EXPORTER`,
`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_METRIC_EXPORT_INTERVAL` ...).

The OTel API has no way to add a histogram's bucket counts: each merged delta's HdrHistogram is recorded value by
value, every value at the middle of its HdrHistogram bucket. Counts are exact, values and sums within 0.1 % (exact
below 2.048 ms). Attributes: `run`, `step` (sweep runs), `replica` / `model` on a breakdown's points, `outcome` and
`error.type` on `llm_locust.requests`, `gen_ai.token.type` on `gen_ai.client.token.usage`. Imported only with
`--otel` (the SDK is an optional dependency: `pip install 'llm-locust[otel]'`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
from hdrh.histogram import HdrHistogram
from opentelemetry.metrics import CallbackOptions, Histogram, Meter, Observation

from llm_locust.export.live import DIMENSIONS, TOKEN_BUCKETS, TOKEN_METRIC, LiveGauges, quantile_points
from llm_locust.metrics import declarations
from llm_locust.metrics.histograms import Delta, WindowMetrics

METER_NAME = "llm_locust"


def bucket_values(hist: HdrHistogram) -> Iterator[tuple[int, int]]:
    """(value at the middle of the bucket, count) of each non-empty bucket of `hist`, in its unit."""
    counts = np.ctypeslib.as_array(hist.counts)[: hist.counts_len]
    for index in np.flatnonzero(counts).tolist():
        lowest = hist.get_value_from_index(index)
        yield (lowest + hist.get_highest_equivalent_value(lowest)) // 2, int(counts[index])


class OtlpExport:
    """The live export's OTel instruments on `meter`; `add` each merged delta; `gauges()` (None: no test yet) is read
    at each collection for users, requests in flight and the quantiles."""

    def __init__(
        self, meter: Meter, gauges: Callable[[], LiveGauges | None], dimensions: tuple[str, ...] = DIMENSIONS
    ) -> None:
        self._gauges = gauges
        self.dimensions = dimensions
        self._latencies = {
            m.name: meter.create_histogram(m.instrument, unit="s", description=f"{m.label} (llm-locust `{m.name}`)",
                                           explicit_bucket_boundaries_advisory=list(m.buckets_s))
            for m in declarations.LATENCIES
        }  # fmt: skip
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Output tokens per successful request",
            explicit_bucket_boundaries_advisory=[float(b) for b in TOKEN_BUCKETS],
        )  # fmt: skip
        self._requests = meter.create_counter("llm_locust.requests", unit="{request}", description="Finished requests")
        self._output = meter.create_counter("llm_locust.output_tokens", unit="{token}", description="Output tokens")
        self._input = meter.create_counter("llm_locust.input_tokens", unit="{token}", description="Prompt tokens")
        meter.create_observable_gauge("llm_locust.users", [self._users], unit="{user}", description="Users running")
        meter.create_observable_gauge("llm_locust.requests_in_flight", [self._in_flight], unit="{request}",
                                      description="Requests sent, not finished")  # fmt: skip
        meter.create_observable_gauge("llm_locust.latency_quantile", [self._quantiles], unit="s",
                                      description="HdrHistogram percentiles of each latency")  # fmt: skip

    def add(self, delta: Delta, run: str) -> None:
        """Record one merged delta (each once): its windows as the run's, its breakdowns of `dimensions` apart."""
        for key, window in delta.windows.items():
            self._add(window, _attributes(run, key.step))
        for group, window in delta.groups.items():
            if group.dimension in self.dimensions:
                self._add(window, {**_attributes(run, group.step), group.dimension: group.label})

    def _add(self, window: WindowMetrics, attributes: dict[str, str]) -> None:
        outcomes = {("ok", ""): window.requests_ok, ("cancelled", ""): window.requests_cancelled}
        outcomes.update((("failed", kind), n) for kind, n in window.failures.items())
        for (outcome, kind), n in outcomes.items():
            if n:
                self._requests.add(n, {**attributes, "outcome": outcome, **({"error.type": kind} if kind else {})})
        if window.output_tokens:
            self._output.add(window.output_tokens, attributes)
        if window.prompt_tokens:
            self._input.add(window.prompt_tokens, attributes)
        for name, histogram in self._latencies.items():
            _record(histogram, window.hist[name], 1e-6, attributes)
        _record(self._tokens, window.hist[TOKEN_METRIC], 1.0, {**attributes, "gen_ai.token.type": "output"})

    def _users(self, _: CallbackOptions) -> Iterable[Observation]:
        gauges = self._gauges()
        return [] if gauges is None else [Observation(gauges.users, {"run": gauges.run})]

    def _in_flight(self, _: CallbackOptions) -> Iterable[Observation]:
        gauges = self._gauges()
        return [] if gauges is None else [Observation(gauges.in_flight, {"run": gauges.run})]

    def _quantiles(self, _: CallbackOptions) -> Iterable[Observation]:
        gauges = self._gauges()
        if gauges is None:
            return []
        return [
            Observation(p.value_s, {"run": gauges.run, "metric": p.metric, "quantile": p.quantile, "window": p.window})
            for p in quantile_points(gauges)
        ]


def _attributes(run: str, step: int) -> dict[str, str]:
    return {"run": run} if step < 0 else {"run": run, "step": str(step)}


def _record(histogram: Histogram, hist: HdrHistogram, scale: float, attributes: dict[str, str]) -> None:
    """Every value of `hist` into the OTel `histogram`, times `scale` (µs -> s)."""
    if not hist.get_total_count():
        return
    for value, count in bucket_values(hist):
        for _ in range(count):
            histogram.record(value * scale, attributes)
