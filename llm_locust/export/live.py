"""The run's live metrics as an exporter serves them: cumulative counters and bucketed histograms per series, fed
with every delta the master (or local runner) merges.

Exact counts on a master: the workers' records never reach it one by one, their deltas do — each finished request
recorded once, in one time window of one process, as a count in an HdrHistogram per latency with the exact sum of
its values. `LiveMetrics.add` turns each delta once into bucket increments (the histogram's cumulative count at each
bucket bound): every request is counted exactly once, in `_count` and the `+Inf` bucket, and the `_sum` is exact; a
bound falls inside one HdrHistogram bucket, counted whole (exact below 2.048 ms, within 0.1 % of the bound above).

A series is a sweep step (or none) and, for a breakdown, one (dimension, label) pair of `DIMENSIONS` — the run's
totals have none. Pure: no Locust, no gevent, no prometheus-client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np
from hdrh.histogram import HdrHistogram

from llm_locust.metrics import declarations
from llm_locust.metrics.hdr import counts_index, cumulative_counts, new_histogram
from llm_locust.metrics.recorder import Delta
from llm_locust.metrics.vocabulary import SERIES_PERCENTILES, latency_key
from llm_locust.metrics.window import Counts, WindowMetrics

DIMENSIONS = ("replica", "model", "name")
"""The breakdown dimensions exported as labels (when the run has them): the replicas of --host, the models of
--model-mix, a scenario's request names (`name=`, as many as the scenario uses: no cap, as in summary.json)."""
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
"""Upper bounds of the token-count histogram's buckets (the OpenTelemetry GenAI convention's, to 65,536)."""
TOKEN_METRIC = "output_tokens"
"""The count histogram exported as `gen_ai.client.token.usage` (type output): output tokens per successful request."""


class CounterFamily(NamedTuple):
    """A counter of the export, read off each series' `Counts`: its OTel instrument name (`llm_locust.<counter>`;
    Prometheus: "." -> "_", `_total` added), unit and help."""

    instrument: str
    unit: str
    help: str
    read: Callable[[Counts], float]


COUNTERS = (
    CounterFamily("llm_locust.output_tokens", "{token}", "Output tokens of successful requests",
                  attrgetter("output_tokens")),
    CounterFamily("llm_locust.input_tokens", "{token}", "Prompt tokens of successful requests",
                  attrgetter("prompt_tokens")),
    CounterFamily("llm_locust.inputs", "{input}", "Inputs answered by successful requests of an API that counts "
                  "inputs: embeddings' texts, rerank's and score's documents", attrgetter("inputs")),
    CounterFamily("llm_locust.output_bytes", "By", "Decoded media bytes (images) of successful requests' answers",
                  attrgetter("output_bytes")),
    CounterFamily("llm_locust.input_seconds", "s", "Seconds of media (audio) successful requests carried",
                  attrgetter("input_s")),
    CounterFamily("llm_locust.output_seconds", "s", "Seconds of media (audio) successful requests' answers carried",
                  attrgetter("output_s")),
    CounterFamily("llm_locust.answers_scored", "{answer}", "Successful requests whose answer was scored",
                  attrgetter("answers_scored")),
    CounterFamily("llm_locust.answers_correct", "{answer}", "Scored answers that were right (score 1)",
                  attrgetter("answers_correct")),
    CounterFamily("llm_locust.answer_score_sum", "1", "Scores (0..1) of the scored answers, summed: accuracy = "
                  "answer_score_sum / answers_scored", attrgetter("answer_score_sum")),
)  # fmt: skip
"""The plain counters of every series, in both exports (`prometheus.families`, `otlp.metrics_data`); the requests
by outcome are exported apart (their labels)."""


class Series(NamedTuple):
    """One exported series: the requests of sweep step `step` (-1: none), all of them (`dimension` "") or those of
    `label` along the breakdown `dimension`."""

    step: int
    dimension: str
    label: str


@dataclass
class Buckets:
    """One histogram of the export: `cumulative[i]` values at or under bound i (the last entry: all, `+Inf`), the
    exact `sum`, `min` and `max` of the values (in the histogram's unit: µs for a latency, tokens for a count) and
    their `count`."""

    cumulative: np.ndarray
    sum: int
    min: int
    max: int

    @property
    def count(self) -> int:
        """How many values were observed."""
        return int(self.cumulative[-1])


@dataclass(frozen=True)
class Geometry:
    """A histogram's bucket bounds in its export unit (`bounds`: s for a latency, tokens for a count) and the index
    in an HdrHistogram's counts of the bucket holding each (`index`, its last entry: the highest bucket)."""

    bounds: tuple[float, ...]
    index: np.ndarray

    @classmethod
    def of(cls, metric: str, bounds: tuple[float, ...], scale: float) -> Geometry:
        """The geometry of `metric`'s histograms (`hdr.new_histogram`) for `bounds`, each `scale` units of
        the histogram (1e6: bounds in s over µs)."""
        template: HdrHistogram = new_histogram(metric)
        values = np.array([round(b * scale) for b in bounds], dtype=np.int64)
        index = np.append(counts_index(template, values), template.counts_len - 1)
        return cls(bounds, index)


@dataclass
class LiveMetrics:
    """The cumulative counters and histograms of one test, per `Series` (`add`: one merged delta)."""

    dimensions: tuple[str, ...] = DIMENSIONS
    counts: dict[Series, Counts] = field(default_factory=dict)
    latencies: dict[tuple[Series, str], Buckets] = field(default_factory=dict)
    """Per series and declared latency name (µs sums)."""
    tokens: dict[Series, Buckets] = field(default_factory=dict)
    _geometry: dict[str, Geometry] = field(default_factory=dict)

    def geometry(self, metric: str) -> Geometry:
        """The bucket geometry of a declared latency, or of `TOKEN_METRIC`."""
        geometry = self._geometry.get(metric)
        if geometry is None:
            if metric == TOKEN_METRIC:
                geometry = Geometry.of(metric, tuple(float(b) for b in TOKEN_BUCKETS), 1.0)
            else:
                geometry = Geometry.of(metric, declarations.pick(metric)[0].buckets_s, 1e6)
            self._geometry[metric] = geometry
        return geometry

    def add(self, delta: Delta) -> None:
        """Count one process's delta (before or after `RunMetrics.merge_delta`, never twice): each time window into
        its step's totals, each breakdown of `dimensions` into its own series."""
        for key, window in delta.windows.items():
            self._add(Series(key.step, "", ""), window)
        for group, window in delta.groups.items():
            if group.dimension in self.dimensions:
                self._add(Series(group.step, group.dimension, group.label), window)

    def _add(self, series: Series, window: WindowMetrics) -> None:
        counts = self.counts.get(series)
        if counts is None:
            counts = self.counts[series] = Counts()
        Counts.merge(counts, window)
        for metric in declarations.LATENCIES:
            self._observe(self.latencies, (series, metric.name), metric.name, window)
        self._observe(self.tokens, series, TOKEN_METRIC, window)

    def _observe(self, into: dict[Any, Buckets], key: Any, metric: str, window: WindowMetrics) -> None:
        hist = window.hist.get(metric)
        if hist is None or not hist.get_total_count():
            return
        added = cumulative_counts(hist, self.geometry(metric).index)
        low, high = hist.get_min_value(), hist.get_max_value()
        buckets = into.get(key)
        if buckets is None:
            into[key] = Buckets(added, window.sums[metric], low, high)
        else:
            buckets.cumulative += added
            buckets.sum += window.sums[metric]
            buckets.min, buckets.max = min(buckets.min, low), max(buckets.max, high)


@dataclass(frozen=True)
class LiveGauges:
    """What the exporter samples when it is read, besides the merged deltas: the run's name (its results folder's),
    requests in flight and users now, the last closed time-series row (`results.files` columns, ms; None before the
    first) and the run's merged totals (their HdrHistograms give the run's quantiles)."""

    run: str
    in_flight: int
    users: int
    last_window: Mapping[str, Any] | None
    total: WindowMetrics


QUANTILES = {"p50": "0.5", "p90": "0.9", "p99": "0.99"}
"""The exported percentiles (`vocabulary.SERIES_PERCENTILES`) and their `quantile` label."""
assert tuple(QUANTILES) == SERIES_PERCENTILES


class QuantilePoint(NamedTuple):
    """One latency's percentile (`quantile`: "0.5", "0.9", "0.99") in seconds, of the last closed time-series window
    (`window` "last") or of the whole run so far ("run")."""

    metric: str
    quantile: str
    window: str
    value_s: float


def quantile_points(gauges: LiveGauges) -> list[QuantilePoint]:
    """Each latency's p50/p90/p99 of the whole run so far (every latency with data, from the run's HdrHistograms) and
    of the last closed time-series window (the latencies the time series has, from its row), in seconds."""
    points = []
    for metric in declarations.LATENCIES:
        stats = gauges.total.distribution(metric.name, scale=1e3)
        for stat, quantile in QUANTILES.items():
            if stats["count"]:
                points.append(QuantilePoint(metric.name, quantile, "run", float(stats[stat]) / 1e3))
            value_ms = (gauges.last_window or {}).get(latency_key(metric.name, stat)) if metric.series else None
            if isinstance(value_ms, int | float):
                points.append(QuantilePoint(metric.name, quantile, "last", value_ms / 1e3))
    return points
