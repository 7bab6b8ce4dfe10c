"""Exact, mergeable LLM metrics: histograms and counters per time window, worker deltas, merge.

Data flow: each process that runs users has a `MetricsRecorder`; every finished request
(`RequestRecord`) lands in the window of its completion time (wall clock, `interval_s`
wide). A worker ships the windows it filled since its last report as a delta (`to_wire`);
the master (or a local runner, in process) merges deltas into `RunMetrics`, which keeps the
run totals plus the windows not yet written to the time series.

Latency histograms hold integer microseconds (HdrHistogram, 3 significant digits: <= 0.1 %
error, 1 µs .. 1 h); the output-token histogram holds tokens. Failed requests count only in
`failures`: their latencies never enter a distribution.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from llm_locust.record import RequestRecord

LATENCY_METRICS = ("ttft", "ttfo", "tpot", "itl", "e2e")
"""Histograms in µs: time to first token / first output, time per output token, inter-token
latency (every gap between token events), end-to-end latency."""
COUNT_METRICS = ("output_tokens",)
"""Histograms of per-request counts (tokens)."""
PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
_HIGHEST_US = 3_600_000_000
_HIGHEST_COUNT = 10_000_000


def new_histogram(metric: str) -> HdrHistogram:
    """An empty histogram with the range of `metric` (µs for latencies, tokens for counts)."""
    highest = _HIGHEST_COUNT if metric in COUNT_METRICS else _HIGHEST_US
    return HdrHistogram(1, highest, 3)


def release_histogram(hist: HdrHistogram) -> None:
    """Let `hist`'s counts (~190 KB for a latency histogram) be freed as soon as it is dropped.

    hdrh's HdrHistogram and its encoder reference each other, so a dropped histogram otherwise
    waits for a full garbage collection — rare in a busy process: RSS grows by MBs per minute.
    Breaking the cycle leaves the histogram usable for reading, not for encoding or adding.
    """
    hist.encoder = None


def distribution(hist: HdrHistogram, total: int, scale: float = 1.0) -> dict[str, float | int | None]:
    """count, mean, min, p50 .. p99_9, max of `hist`, each value divided by `scale`.

    `total` is the exact sum of the recorded values (the histogram only knows buckets), so the
    mean is exact. Percentiles are HdrHistogram's (highest equivalent value of the bucket
    holding the target count), found with one vectorised pass over the counts: hdrh's own
    Python loops take tens of ms per histogram, a stall for the users of the same process.
    With no samples every statistic is None (count 0): "no data", never a fake zero.
    """
    count = hist.get_total_count()
    stats: dict[str, float | int | None] = {"count": count}
    if count == 0:
        stats.update(dict.fromkeys(("mean", "min", *(_pct_key(p) for p in PERCENTILES), "max")))
        return stats
    cumulative = np.cumsum(np.ctypeslib.as_array(hist.counts)[: hist.counts_len])
    targets = [hist.get_target_count_at_percentile(p) for p in PERCENTILES]
    indices = np.searchsorted(cumulative, targets, side="left")
    stats["mean"] = round(total / count / scale, 3)
    stats["min"] = round(hist.get_min_value() / scale, 3)
    for p, index in zip(PERCENTILES, indices, strict=True):
        value = hist.get_highest_equivalent_value(hist.get_value_from_index(int(index)))
        stats[_pct_key(p)] = round(min(value, hist.get_max_value()) / scale, 3)
    stats["max"] = round(hist.get_max_value() / scale, 3)
    return stats


def _pct_key(p: float) -> str:
    """50.0 -> "p50", 99.9 -> "p99_9"."""
    return "p" + f"{p:g}".replace(".", "_")


@dataclass
class WindowMetrics:
    """The LLM metrics of a set of requests (one time window, or a whole run)."""

    hist: dict[str, HdrHistogram] = field(
        default_factory=lambda: {m: new_histogram(m) for m in LATENCY_METRICS + COUNT_METRICS}
    )
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LATENCY_METRICS + COUNT_METRICS, 0))
    requests_ok: int = 0
    output_tokens: int = 0
    prompt_tokens: int = 0
    token_events: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    token_sources: Counter[str] = field(default_factory=Counter)
    usage_event_mismatches: int = 0  # successful requests whose usage count != token events

    def add(self, record: RequestRecord) -> None:
        """Count one finished request: latencies only when it succeeded."""
        if not record.ok:
            self.failures[str(record.error_kind)] += 1
            return
        hist = self.hist
        n = record.output_tokens
        self.requests_ok += 1
        self.output_tokens += n
        self.prompt_tokens += record.prompt_tokens or 0
        self.token_events += record.events
        self.token_sources[str(record.token_source)] += 1
        if record.usage_completion_tokens is not None and record.usage_completion_tokens != record.events:
            self.usage_event_mismatches += 1
        self._record("ttft", _us(record.ttft_s))
        self._record("e2e", _us(record.e2e_s))
        if record.ttfo_s is not None:
            self._record("ttfo", _us(record.ttfo_s))
        tpot_s = record.tpot_s
        if tpot_s is not None:
            self._record("tpot", _us(tpot_s))
        self._record("output_tokens", min(n, _HIGHEST_COUNT))
        gaps = record.itl_us
        if gaps:
            if max(gaps) > _HIGHEST_US:
                gaps = [min(g, _HIGHEST_US) for g in gaps]
            record_itl = hist["itl"].record_value
            for gap_us in gaps:
                record_itl(gap_us)
            self.sums["itl"] += sum(gaps)

    def _record(self, metric: str, value: int) -> None:
        self.hist[metric].record_value(value)
        self.sums[metric] += value

    def distribution(self, metric: str, scale: float = 1.0) -> dict[str, float | int | None]:
        """`distribution` of one metric of this window (its histogram with its exact sum)."""
        return distribution(self.hist[metric], self.sums[metric], scale)

    def merge(self, other: WindowMetrics) -> None:
        """Add `other`'s requests to this window."""
        for name, h in other.hist.items():
            if h.get_total_count():
                self.hist[name].add(h)
                self.sums[name] += other.sums[name]
        self.requests_ok += other.requests_ok
        self.output_tokens += other.output_tokens
        self.prompt_tokens += other.prompt_tokens
        self.token_events += other.token_events
        self.failures.update(other.failures)
        self.token_sources.update(other.token_sources)
        self.usage_event_mismatches += other.usage_event_mismatches

    def release(self) -> None:
        """Free the histograms' memory as soon as this window is dropped (see `release_histogram`)."""
        for hist in self.hist.values():
            release_histogram(hist)

    @property
    def requests_failed(self) -> int:
        """Failed requests, all kinds."""
        return sum(self.failures.values())

    def to_wire(self) -> dict[str, Any]:
        """A msgpack-able dict (what a worker sends); `from_wire` reverses it."""
        return {
            "hist": {n: h.encode() for n, h in self.hist.items() if h.get_total_count()},
            "sums": {n: self.sums[n] for n, h in self.hist.items() if h.get_total_count()},
            "requests_ok": self.requests_ok,
            "output_tokens": self.output_tokens,
            "prompt_tokens": self.prompt_tokens,
            "token_events": self.token_events,
            "failures": dict(self.failures),
            "token_sources": dict(self.token_sources),
            "usage_event_mismatches": self.usage_event_mismatches,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> WindowMetrics:
        """Rebuild a window from `to_wire` output."""
        window = cls()
        for name, encoded in data["hist"].items():
            decoded = HdrHistogram.decode(encoded)
            window.hist[name].add(decoded)
            release_histogram(decoded)
            window.sums[name] = data["sums"][name]
        window.requests_ok = data["requests_ok"]
        window.output_tokens = data["output_tokens"]
        window.prompt_tokens = data["prompt_tokens"]
        window.token_events = data["token_events"]
        window.failures = Counter(data["failures"])
        window.token_sources = Counter(data["token_sources"])
        window.usage_event_mismatches = data["usage_event_mismatches"]
        return window


def _us(seconds: float | None) -> int:
    """Seconds to whole microseconds, within the histograms' range."""
    return min(max(0, round(seconds * 1e6)), _HIGHEST_US) if seconds is not None else 0


class MetricsRecorder:
    """Per-process collector: finished requests into windows keyed by their start (epoch s)."""

    def __init__(self, interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval_s}")
        self.interval_s = interval_s
        self._pending: dict[int, WindowMetrics] = {}

    def window_start(self, t_wall_s: float) -> int:
        """Start (epoch seconds, whole) of the window holding wall-clock time `t_wall_s`."""
        return int(math.floor(t_wall_s / self.interval_s) * self.interval_s)

    def record(self, record: RequestRecord, t_wall_s: float) -> None:
        """Add a finished request, completed at wall-clock `t_wall_s` (time.time())."""
        key = self.window_start(t_wall_s)
        window = self._pending.get(key)
        if window is None:
            window = self._pending[key] = WindowMetrics()
        window.add(record)

    def take_delta(self) -> dict[int, WindowMetrics]:
        """The windows filled since the last call (and forget them)."""
        delta, self._pending = self._pending, {}
        return delta


def delta_to_wire(delta: dict[int, WindowMetrics]) -> dict[str, Any]:
    """A recorder delta as a msgpack-able dict with string keys."""
    return {str(start): window.to_wire() for start, window in delta.items()}


def delta_from_wire(data: dict[str, Any]) -> dict[int, WindowMetrics]:
    """Reverse of `delta_to_wire`."""
    return {int(start): WindowMetrics.from_wire(window) for start, window in data.items()}


class RunMetrics:
    """The merged metrics of a run: totals, plus windows until the time series takes them."""

    def __init__(self) -> None:
        self.total = WindowMetrics()
        self._windows: dict[int, WindowMetrics] = {}
        self.deltas_merged = 0

    def merge_delta(self, delta: dict[int, WindowMetrics]) -> None:
        """Merge one process's delta into the totals and its windows."""
        for start, window in delta.items():
            self.total.merge(window)
            mine = self._windows.get(start)
            if mine is None:
                self._windows[start] = window
            else:
                mine.merge(window)
                window.release()
        self.deltas_merged += 1

    def pop_windows(self, before_s: float) -> list[tuple[int, WindowMetrics]]:
        """Remove and return, oldest first, the windows that started before `before_s`."""
        ready = sorted(start for start in self._windows if start < before_s)
        return [(start, self._windows.pop(start)) for start in ready]
