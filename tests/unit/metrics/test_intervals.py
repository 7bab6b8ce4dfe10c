"""Quantile confidence intervals (metrics/intervals.py): the binomial ranks against the binomial summed term by
term, their coverage over many seeded synthetic samples, the histogram's reading of them, and the widening for
dependent values."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from llm_locust.metrics.hdr import new_histogram, record_values
from llm_locust.metrics.intervals import (
    Interval,
    batch_counts_enough,
    quantile_interval,
    quantile_interval_ms,
    quantile_ranks,
    sorted_interval,
    t_quantile,
    widen_by_batches,
)


def _cdf_by_terms(n: int, q: float) -> np.ndarray:
    """The binomial(n, q)'s CDF summed term by term, each term from lgamma on its own."""
    log_terms = [
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(q) + (n - k) * math.log1p(-q)
        for k in range(n + 1)
    ]
    return np.cumsum(np.exp(log_terms))


def _ranks_by_terms(n: int, q: float, confidence: float) -> tuple[int, int]:
    """The equal-tailed ranks from the binomial's CDF summed term by term."""
    cdf = _cdf_by_terms(n, q)
    tail = (1 - confidence) / 2
    low = max((k + 1 for k in range(n + 1) if cdf[k] <= tail), default=0)
    high = min((k + 1 for k in range(n + 1) if cdf[k] >= 1 - tail), default=n + 1)
    return low, high


@pytest.mark.parametrize("q", [0.1, 0.5, 0.9, 0.95, 0.99, 0.999])
@pytest.mark.parametrize("n", [1, 2, 5, 10, 37, 100, 250, 600])
def test_ranks_are_the_exact_binomials(n: int, q: float) -> None:
    assert quantile_ranks(n, q, 0.95) == _ranks_by_terms(n, q, 0.95)


def test_ranks_hold_the_confidence_and_are_tight() -> None:
    for n, q in [(100, 0.5), (1000, 0.99), (5000, 0.9), (20, 0.5)]:
        low, high = quantile_ranks(n, q)
        cdf = _cdf_by_terms(n, q)

        def coverage(lo: int, hi: int, cdf: np.ndarray = cdf) -> float:
            return cdf[min(hi, len(cdf)) - 1] - (cdf[lo - 1] if lo >= 1 else 0.0)

        assert coverage(low, high) >= 0.95
        assert coverage(low + 1, high) < 0.975 or coverage(low, high - 1) < 0.975  # one rank less is under a tail


def test_large_n_ranks_match_the_normal_limit() -> None:
    n, q = 10_000_000, 0.99
    low, high = quantile_ranks(n, q)
    z = NormalDist().inv_cdf(0.975)
    sd = math.sqrt(n * q * (1 - q))
    assert abs(low - (n * q - z * sd)) < 3 and abs(high - (n * q + z * sd)) < 3


def test_too_few_values_leave_an_end_open() -> None:
    assert quantile_ranks(0, 0.5) == (0, 1)
    low, high = quantile_ranks(100, 0.99)
    assert low >= 1 and high == 101
    assert sorted_interval([1.0, 2.0, 3.0], 0.5) == Interval(None, None)
    interval = sorted_interval(list(range(1, 101)), 0.99)
    assert interval.high is None and interval.low is not None and interval.covers(1e9)
    assert quantile_interval(None, 0.5) == Interval(None, None)


def test_bad_quantile_or_confidence_is_refused() -> None:
    with pytest.raises(ValueError, match="quantile"):
        quantile_ranks(10, 1.0)
    with pytest.raises(ValueError, match="confidence"):
        quantile_ranks(10, 0.5, 1.5)


def test_order_statistic_coverage_over_many_seeds() -> None:
    """Independent lognormal samples: each interval covers its true quantile in about 95 % of 2,000 seeded draws."""
    median, sigma, n, runs = 50.0, 0.5, 1_000, 2_000
    for q in (0.5, 0.9, 0.99):
        truth = median * math.exp(sigma * NormalDist().inv_cdf(q))
        covered = 0
        for seed in range(runs):
            values = np.sort(np.random.default_rng(seed).lognormal(math.log(median), sigma, n))
            covered += sorted_interval(values, q).covers(truth)
        assert 0.935 * runs <= covered <= 0.99 * runs, (q, covered)


def test_histogram_interval_contains_the_exact_one_within_hdr_precision() -> None:
    rng = np.random.default_rng(7)
    for scale_us in (500.0, 50_000.0, 2_000_000.0):
        values_us = np.maximum(rng.lognormal(math.log(scale_us), 0.7, 3_000).astype(np.int64), 1)
        hist = new_histogram("ttft")
        record_values(hist, values_us)
        exact = sorted_interval(np.sort(values_us), 0.9)
        read = quantile_interval(hist, 0.9)
        assert read.low is not None and read.high is not None and exact.low is not None and exact.high is not None
        assert read.low <= exact.low <= read.low * 1.001 + 1
        assert read.high * 0.999 - 1 <= exact.high <= read.high
        ms = quantile_interval_ms(hist, 0.9)
        assert ms.low == round(read.low / 1000, 3) and ms.high == round(read.high / 1000, 3)


def test_histogram_interval_coverage_over_many_seeds() -> None:
    truth_us = 50_000.0 * math.exp(0.5 * NormalDist().inv_cdf(0.99))
    covered = 0
    for seed in range(300):
        hist = new_histogram("ttft")
        record_values(hist, np.random.default_rng(seed).lognormal(math.log(50_000.0), 0.5, 2_000).astype(np.int64))
        covered += quantile_interval(hist, 0.99).covers(truth_us)
    assert covered >= 0.93 * 300


def _dependent_windows(rng: np.random.Generator, windows: int, per_window: int, shift_sd: float) -> list[np.ndarray]:
    """Values of `windows` time windows, each shifted by its own normal draw (a server state its requests share):
    marginally normal(0, 1 + shift_sd²)."""
    return [rng.normal(rng.normal(0.0, shift_sd), 1.0, per_window) for _ in range(windows)]


def test_batches_widen_the_interval_of_dependent_values() -> None:
    shift_sd, q, runs = 0.5, 0.5, 400
    truth = NormalDist(0.0, math.sqrt(1 + shift_sd**2)).inv_cdf(q)
    plain = widened = 0
    for seed in range(runs):
        windows = _dependent_windows(np.random.default_rng(seed), 20, 100, shift_sd)
        pooled = np.sort(np.concatenate(windows))
        interval = sorted_interval(pooled, q)
        point = float(np.quantile(pooled, q))
        batch_values = [float(np.quantile(w, q)) for w in windows]
        plain += interval.covers(truth)
        widened += widen_by_batches(interval, point, batch_values).covers(truth)
    assert plain < 0.8 * runs  # the binomial alone is far too narrow for them
    assert widened >= 0.92 * runs


def test_batches_rarely_widen_independent_values() -> None:
    rng = np.random.default_rng(3)
    widths = []
    for _ in range(200):
        windows = _dependent_windows(rng, 20, 100, 0.0)
        pooled = np.sort(np.concatenate(windows))
        interval = sorted_interval(pooled, 0.5)
        out = widen_by_batches(interval, float(np.quantile(pooled, 0.5)), [float(np.median(w)) for w in windows])
        assert out.low is not None and out.high is not None and interval.low is not None and interval.high is not None
        assert out.low <= interval.low and out.high >= interval.high  # never narrower
        widths.append((out.high - out.low) / (interval.high - interval.low))
    assert float(np.median(widths)) < 1.2


def test_widening_needs_batches_a_point_and_closed_ends() -> None:
    interval = Interval(1.0, 2.0)
    assert widen_by_batches(interval, 1.5, [0.0, 10.0, 0.0, 10.0]) == interval  # 4 < MIN_BATCHES
    assert widen_by_batches(interval, None, [0.0, 10.0] * 5) == interval
    assert widen_by_batches(Interval(1.0, None), 1.5, [0.0, 10.0] * 5) == Interval(1.0, None)
    wide = widen_by_batches(interval, 1.5, [0.0, 10.0] * 5)
    assert wide.low is not None and wide.high is not None and wide.low < 1.0 and wide.high > 2.0
    assert batch_counts_enough(10, 0.5) and not batch_counts_enough(499, 0.99) and batch_counts_enough(500, 0.99)


def test_t_quantiles_match_the_tables() -> None:
    for df, value in [(1, 12.706), (2, 4.303), (5, 2.571), (9, 2.262), (30, 2.042)]:
        assert t_quantile(df, 0.975) == pytest.approx(value, abs=1e-3)
    assert t_quantile(1000, 0.975) == pytest.approx(NormalDist().inv_cdf(0.975), abs=3e-3)
