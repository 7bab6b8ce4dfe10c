"""Drift over a long run: an early and a late window of the time series, compared.

A soak run asks "does this endpoint degrade after N minutes?". `DriftTracker` is fed every
closed window of the LLM time series and keeps, in bounded memory, the merged metrics of

- the early window: `window_s` seconds starting `warmup_s` after the run started;
- the late window: the last `window_s` seconds of the run, as `SEGMENTS` segments of
  `window_s / SEGMENTS` (the oldest dropped as new ones fill), so it covers between
  (SEGMENTS - 1)/SEGMENTS and all of `window_s`.

`compare` reports each metric early vs late and how much worse it got in percent (a drop for
throughput, a rise for latencies). Exact: the windows are merged histograms, not averages of
per-interval percentiles. Pure: imports neither Locust nor anything that does.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any

from llm_locust.metrics.declarations import names, pick
from llm_locust.metrics.vocabulary import SERIES_PERCENTILES, latency_key, per_s
from llm_locust.metrics.window import WindowMetrics

SEGMENTS = 4
DRIFT_LATENCIES = names(pick("ttft", "tpot"))
"""The latencies whose drift between segments of a run is measured."""
LATENCY_KEYS = tuple(latency_key(m, p) for m in DRIFT_LATENCIES for p in SERIES_PERCENTILES)
THROUGHPUT_KEYS = ("output_tokens_per_s", "requests_per_s")
DRIFT_KEYS = THROUGHPUT_KEYS + LATENCY_KEYS
"""Metrics whose drift is gated (`--max-drift-pct`); the error rate is reported beside them."""


def window_stats(window: WindowMetrics, span_s: float) -> dict[str, float | None]:
    """Throughput (per s over `span_s`), TTFT/TPOT percentiles (ms) and error rate (0..1) of `window`."""
    attempted = window.requests_ok + window.requests_failed
    stats: dict[str, float | None] = {
        "span_s": round(span_s, 3),
        "requests_ok": window.requests_ok,
        "requests_failed": window.requests_failed,
        "output_tokens_per_s": per_s(window.output_tokens, span_s),
        "requests_per_s": per_s(window.requests_ok, span_s),
        "error_rate": round(window.requests_failed / attempted, 6) if attempted else None,
    }
    for metric in DRIFT_LATENCIES:
        dist = window.distribution(metric, scale=1000.0)
        for p in SERIES_PERCENTILES:
            stats[latency_key(metric, p)] = dist[p]
    return stats


def compare(early: Mapping[str, Any], late: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per metric of `DRIFT_KEYS`: early, late, and `worse_pct` — how much worse late is, in % of early.

    Positive `worse_pct` is a degradation: throughput that fell, latency that rose; None when either
    side has no data or early is 0. The error rate gets `change_pts` (percentage points) instead.
    """
    drift: dict[str, dict[str, float | None]] = {}
    for key in DRIFT_KEYS:
        e, x = early.get(key), late.get(key)
        worse_pct = None
        if e is not None and x is not None and e > 0:
            change = (x - e) / e * 100.0
            worse_pct = round(-change if key in THROUGHPUT_KEYS else change, 2)
        drift[key] = {"early": e, "late": x, "worse_pct": worse_pct}
    e, x = early.get("error_rate"), late.get("error_rate")
    change_pts = round((x - e) * 100.0, 4) if e is not None and x is not None else None
    drift["error_rate"] = {"early": e, "late": x, "change_pts": change_pts}
    return drift


def worst(drift: Mapping[str, Mapping[str, Any]]) -> tuple[str, float] | None:
    """The gated metric that got worst and its `worse_pct`, or None when none has a value."""
    values = [(key, drift[key]["worse_pct"]) for key in DRIFT_KEYS if drift.get(key, {}).get("worse_pct") is not None]
    return max(values, key=lambda kv: kv[1]) if values else None


class DriftTracker:
    """Early window and rolling late window of a run's time series (bounded: 1 + SEGMENTS + 1 windows)."""

    def __init__(self, t_start_s: float, window_s: float, warmup_s: float) -> None:
        self.window_s = window_s
        self.warmup_s = warmup_s
        self.early_start_s = t_start_s + warmup_s
        self.early_end_s = self.early_start_s + window_s
        self.segment_s = window_s / SEGMENTS
        self.early = WindowMetrics()
        self._late: deque[tuple[int, WindowMetrics]] = deque()

    def add(self, start_s: float, window: WindowMetrics) -> None:
        """Take one closed time-series window that started at `start_s` (epoch s)."""
        if start_s < self.early_start_s:
            return  # warm-up
        if start_s < self.early_end_s:
            self.early.merge(window)
            return
        index = math.floor((start_s - self.early_end_s) / self.segment_s)
        if not self._late or self._late[-1][0] != index:
            if len(self._late) > SEGMENTS:
                self._late.popleft()[1].release()
            self._late.append((index, WindowMetrics()))
        self._late[-1][1].merge(window)

    def result(self, t_end_s: float) -> dict[str, Any]:
        """The drift report at `t_end_s` (epoch s): windows, per-metric comparison, or why there is none."""
        needed_s = self.warmup_s + 2 * self.window_s
        report: dict[str, Any] = {"window_s": self.window_s, "warmup_s": self.warmup_s}
        run_s = t_end_s - (self.early_start_s - self.warmup_s)
        if run_s < needed_s:
            report["evaluated"] = False
            report["reason"] = (
                f"run of {run_s:.0f} s is shorter than warm-up + 2 x window ({needed_s:.0f} s): no drift computed"
            )
            return report
        last_index = math.floor((t_end_s - self.early_end_s) / self.segment_s)
        first_index = last_index - SEGMENTS + 1  # the segment holding t_end - window_s (at most)
        late = WindowMetrics()
        for index, segment in self._late:
            if index >= first_index:
                late.merge(segment)
        late_start_s = self.early_end_s + first_index * self.segment_s
        early_stats = window_stats(self.early, self.window_s)
        late_stats = window_stats(late, t_end_s - late_start_s)
        report.update(evaluated=True, early=early_stats, late=late_stats, metrics=compare(early_stats, late_stats))
        return report
