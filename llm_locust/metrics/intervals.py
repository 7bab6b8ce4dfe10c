"""Distribution-free confidence intervals for quantiles (docs/metrics.md "Intervals").

Order statistics: of n independent values, the number B at or below the true quantile ξ_q is binomial(n, q), so
the interval [x_(l), x_(u)] between the l-th and u-th smallest values holds ξ_q with probability
P(l <= B <= u - 1) = F(u - 1) - F(l - 1), whatever the distribution (F: the binomial's CDF). `quantile_ranks`
takes l and u with equal tails: l the largest rank with F(l - 1) <= α/2, u the smallest with F(u - 1) >= 1 - α/2
(α = 1 - confidence). The binomial is computed exactly for every n (no normal approximation): its log-probabilities
by their ratio recurrence, over the ranks within 12 standard deviations (+ 12) of nq, which hold all its mass but
< 1e-30. A rank outside 1 .. n has no value: that end is open (None) — too few values for that quantile.

From a histogram (`quantile_interval`), rank l is read as the low end of the bucket holding it and rank u as the
high end of the bucket holding it: the interval contains the exact order-statistic interval, wider by at most one
bucket at each end (HdrHistogram, 3 significant digits: exact below 2,048 µs, <= 0.1 % above).

Dependence: the requests of one user or session are not independent, so the binomial may understate the spread.
`widen_by_batches` takes the quantile of consecutive time windows (batches) and, when their spread says the
quantile's standard error is larger than the order-statistic interval allows, widens the interval around the point
estimate by that ratio (Student's t over the batches; the interval is never made narrower).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from hdrh.histogram import HdrHistogram

from llm_locust.metrics.hdr import cumulative
from llm_locust.metrics.vocabulary import PERCENTILES, ci_key, pct_key

CONFIDENCE = 0.95
"""The confidence of every interval llm-locust reports."""

MIN_BATCHES = 5
"""The fewest batches whose spread may widen an interval (`widen_by_batches`)."""

MIN_BATCH_TAIL = 5
"""A batch's quantile counts for the spread only with at least this many of its values on each side of it: n·q and
n·(1 - q) >= 5 (p50: 10 values, p90: 50, p99: 500), else that batch's quantile is mostly its extreme value."""


class Interval(NamedTuple):
    """A confidence interval of a quantile, in the unit of the values it was read from; an end is None where its
    rank falls outside the values (too few of them: that side is open)."""

    low: float | None
    high: float | None

    def covers(self, value: float) -> bool:
        """Whether `value` lies inside the interval (an open end holds everything on its side)."""
        return (self.low is None or self.low <= value) and (self.high is None or value <= self.high)


@functools.lru_cache(maxsize=1024)
def quantile_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """The 1-based ranks (l, u) of the order statistics bounding quantile `q` (0 < q < 1) of `n` values with
    probability >= `confidence`, equal-tailed, from the exact binomial(n, q). l = 0: open below; u = n + 1: open
    above. Remembered: a summary asks for the same few (most of a scope's metrics count one value per request)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be between 0 and 1 (exclusive), got {q}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    if n <= 0:
        return 0, 1
    tail = (1.0 - confidence) / 2.0
    ks, cdf = _binomial_cdf(n, q)
    # F(l - 1) <= tail: l - 1 is the largest k with F(k) <= tail (ranks below the window: F ~ 0)
    below = np.flatnonzero(cdf <= tail)
    low = int(ks[below[-1]]) + 1 if below.size else int(ks[0])
    # F(u - 1) >= 1 - tail: u - 1 is the smallest k with F(k) >= 1 - tail
    above = np.flatnonzero(cdf >= 1.0 - tail)
    high = int(ks[above[0]]) + 1 if above.size else n + 1
    return low, min(high, n + 1)


def _binomial_cdf(n: int, q: float) -> tuple[np.ndarray, np.ndarray]:
    """The ranks k within 12 standard deviations (+ 12) of n·q and binomial(n, q)'s CDF at each, exact: log P(k)
    at the window's first rank by lgamma, the others by the ratio P(k + 1) / P(k) = (n - k) / (k + 1) · q / (1 - q)."""
    spread = 12.0 * math.sqrt(n * q * (1.0 - q)) + 12.0
    first = max(0, math.floor(n * q - spread))
    last = min(n, math.ceil(n * q + spread))
    ks = np.arange(first, last + 1, dtype=np.float64)
    log_first = (
        math.lgamma(n + 1)
        - math.lgamma(first + 1)
        - math.lgamma(n - first + 1)
        + first * math.log(q)
        + (n - first) * math.log1p(-q)
    )
    steps = np.log((n - ks[:-1]) / (ks[:-1] + 1.0)) + math.log(q) - math.log1p(-q)
    log_pmf = log_first + np.concatenate(([0.0], np.cumsum(steps)))
    return ks.astype(np.int64), np.cumsum(np.exp(log_pmf))  # P(B < first) < 1e-30: left out


def sorted_interval(values: Sequence[float], q: float, confidence: float = CONFIDENCE) -> Interval:
    """The interval of quantile `q` of `values`, sorted ascending (exact order statistics, no histogram)."""
    low, high = quantile_ranks(len(values), q, confidence)
    return Interval(
        values[low - 1] if low >= 1 else None,
        values[high - 1] if high <= len(values) else None,
    )


def quantile_interval(
    hist: HdrHistogram | None, q: float, confidence: float = CONFIDENCE, scale: float = 1.0
) -> Interval:
    """The interval of quantile `q` of the values in `hist` (a merged histogram of `hdr.new_histogram`), each
    end divided by `scale`: rank l's bucket's low end, rank u's bucket's high end, within the histogram's min and
    max. No values: (None, None)."""
    if hist is None or hist.get_total_count() == 0:
        return Interval(None, None)
    return _read_interval(hist, cumulative(hist), q, confidence, scale)


def _read_interval(hist: HdrHistogram, cumulative: np.ndarray, q: float, confidence: float, scale: float) -> Interval:
    """`quantile_interval` of a histogram with values, given its `hdr.cumulative` counts."""
    n = int(cumulative[-1])
    low_rank, high_rank = quantile_ranks(n, q, confidence)
    low = high = None
    if low_rank >= 1:
        index = int(np.searchsorted(cumulative, low_rank, side="left"))
        low = round(max(hist.get_value_from_index(index), hist.get_min_value()) / scale, 3)
    if high_rank <= n:
        index = int(np.searchsorted(cumulative, high_rank, side="left"))
        value = hist.get_highest_equivalent_value(hist.get_value_from_index(index))
        high = round(min(value, hist.get_max_value()) / scale, 3)
    return Interval(low, high)


def quantile_interval_ms(hist: HdrHistogram | None, q: float, confidence: float = CONFIDENCE) -> Interval:
    """`quantile_interval` of a latency histogram (µs) in ms."""
    return quantile_interval(hist, q, confidence, scale=1000.0)


BatchValues = Mapping[str, Sequence[float]]
"""One metric's batch quantiles by percentile key ("p99": the p99 of each batch with enough values)."""


def with_intervals(
    hist: HdrHistogram | None, stats: Mapping[str, Any], scale: float, batches: BatchValues | None = None
) -> dict[str, Any]:
    """`stats` (`hdr.distribution` of `hist`, values divided by `scale`) with each percentile's 95 % interval
    right after it (`ci_key`: [low, high], an open end None; None without values): `quantile_interval`, widened by the
    batch quantiles of that percentile in `batches` (`widen_by_batches`)."""
    counts = None if hist is None or hist.get_total_count() == 0 else cumulative(hist)
    out: dict[str, Any] = {}
    for key, value in stats.items():
        out[key] = value
        p = _PERCENTILE_OF.get(key)
        if p is None:
            continue
        if hist is None or counts is None:
            out[ci_key(p)] = None
            continue
        interval = _read_interval(hist, counts, p / 100.0, CONFIDENCE, scale)
        interval = widen_by_batches(interval, value, (batches or {}).get(key, ()))
        out[ci_key(p)] = [interval.low, interval.high]
    return out


_PERCENTILE_OF = {pct_key(p): p for p in PERCENTILES}


class Batches:
    """The batches of a run: the quantiles of each closed time window per scope (None: the run; an int: that sweep
    step), metric key (`ttft_ms`, `output_tokens`) and percentile key, kept only when the window holds enough values
    for that percentile (`batch_counts_enough`): what `with_intervals` widens by."""

    def __init__(self) -> None:
        self.values: dict[int | None, dict[str, dict[str, list[float]]]] = {}

    def add(self, scopes: Sequence[int | None], stats: Mapping[str, Mapping[str, Any]]) -> None:
        """Count one window's distributions (`stats`: by metric key) as a batch of each of `scopes`."""
        for key, dist in stats.items():
            for p in PERCENTILES:
                value = dist.get(pct_key(p))
                if value is None or not batch_counts_enough(dist["count"], p / 100.0):
                    continue
                for scope in scopes:
                    self.values.setdefault(scope, {}).setdefault(key, {}).setdefault(pct_key(p), []).append(value)

    def of(self, scope: int | None) -> Mapping[str, BatchValues]:
        """The batch quantiles of `scope` by metric key, its first and last batch left out (empty: none left): a window
        holds the requests that finished in it, so the first of a run or step holds only the quick ones of its start
        and the last only the slow ones of its drain — their quantiles would spread for no other reason."""
        return {
            key: {p: values[1:-1] for p, values in by_p.items()} for key, by_p in self.values.get(scope, {}).items()
        }


def half_width(value: float, interval: Sequence[float | None]) -> float | None:
    """The larger distance from a percentile `value` to an end of its `interval` (summary.json's `[low, high]`): the
    `value ± h` that holds the interval; None when an end is open."""
    low, high = interval
    if low is None or high is None:
        return None
    return max(value - low, high - value, 0.0)


def batch_counts_enough(count: int, q: float) -> bool:
    """Whether a batch of `count` values has `MIN_BATCH_TAIL` of them on each side of quantile `q`."""
    return count * min(q, 1.0 - q) >= MIN_BATCH_TAIL


def widen_by_batches(
    interval: Interval, point: float | None, batch_values: Sequence[float], confidence: float = CONFIDENCE
) -> Interval:
    """`interval` (of a quantile whose estimate is `point`) widened for dependence between values: with k >=
    `MIN_BATCHES` batch quantiles (`batch_values`, one per batch of consecutive time windows, each with enough values:
    `batch_counts_enough`), the batch-means half-width h_b = t(k - 1) · s / sqrt(k) (s: the batches' standard
    deviation) estimates the half-width the estimate's real spread calls for; when it exceeds the order-statistic
    interval's half-width h, each side of `interval` is stretched away from `point` by h_b / h. Never narrower; an open
    end stays open; too few batches or no point: `interval` unchanged."""
    k = len(batch_values)
    if point is None or k < MIN_BATCHES or interval.low is None or interval.high is None:
        return interval
    half = (interval.high - interval.low) / 2.0
    batch_half = t_quantile(k - 1, 0.5 + confidence / 2.0) * statistics.stdev(batch_values) / math.sqrt(k)
    if half <= 0.0 or batch_half <= half:
        return interval
    ratio = batch_half / half
    return Interval(
        round(point - ratio * (point - interval.low), 3),
        round(point + ratio * (interval.high - point), 3),
    )


def t_quantile(df: int, p: float) -> float:
    """Student's t quantile at probability `p` (0.5 < p < 1) with `df` >= 1 degrees of freedom, by bisection on its
    exact CDF for an integer df."""
    low, high = 0.0, 1.0
    while _t_cdf(df, high) < p:
        low, high = high, high * 2.0
    for _ in range(100):
        mid = (low + high) / 2.0
        if _t_cdf(df, mid) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2.0


def _t_cdf(df: int, t: float) -> float:
    """Student's t CDF at `t` >= 0 for an integer `df`: the closed forms of the series in θ = atan(t / sqrt(df))
    (Abramowitz & Stegun 26.7.3/26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2 == 1:
        term, total = math.cos(theta), 0.0
        if df > 1:
            total = term
            for j in range(1, (df - 3) // 2 + 1):
                term *= cos2 * (2 * j) / (2 * j + 1)
                total += term
        a = (2.0 / math.pi) * (theta + math.sin(theta) * total)
    else:
        term, total = 1.0, 1.0
        for j in range(1, (df - 2) // 2 + 1):
            term *= cos2 * (2 * j - 1) / (2 * j)
            total += term
        a = math.sin(theta) * total
    return 0.5 + a / 2.0
