"""The step's end decisions (`load.step_end`): the slope and its interval, steady state, precision, over-saturation."""

from __future__ import annotations

import random

import pytest

from llm_locust.load.step_end import (
    Estimate,
    Point,
    first_open_start,
    oversaturated,
    precise,
    rate_estimate,
    slope,
    steady_from,
    t_975,
    throughput_estimate,
)


def test_t_quantile() -> None:
    assert t_975(1) == pytest.approx(12.706, abs=1e-3)
    assert t_975(3) == pytest.approx(3.182, abs=1e-3)


def test_slope_exact_line_and_noise() -> None:
    fitted = slope([0, 1, 2, 3, 4], [1, 3, 5, 7, 9])
    assert fitted is not None
    assert fitted.per_s == pytest.approx(2.0)
    assert fitted.low == pytest.approx(2.0) and fitted.high == pytest.approx(2.0)
    assert fitted.positive
    assert slope([0, 1], [0, 1]) is None
    assert slope([1, 1, 1], [0, 1, 2]) is None
    # worked by hand: y = (0, 2, 1, 3, 2) -> b = 5 / 10, residuals² sum 2.7, s² = 0.9: half = 3.182 * sqrt(0.09)
    fitted = slope([0, 1, 2, 3, 4], [0, 2, 1, 3, 2])
    assert fitted is not None
    assert fitted.per_s == pytest.approx(0.5)
    assert fitted.high - fitted.per_s == pytest.approx(3.182 * 0.3, abs=1e-3)
    assert not fitted.positive


def test_flat_by_equivalence_when_noise_is_tiny() -> None:
    fitted = slope([0, 1, 2, 3, 4], [100.0, 100.01, 100.0, 100.02, 100.01])
    assert fitted is not None and fitted.flat(100.0, 4.0)
    rising = slope([0, 1, 2, 3, 4], [100.0, 110.0, 120.0, 130.0, 140.0])
    assert rising is not None and not rising.flat(120.0, 4.0)


def _drifting(drift_s: float, steps: int = 20, seed: int = 1) -> list[Point]:
    """A series whose TTFT decays from 3x to 1x of 100 ms over its first `drift_s` seconds, then only noise."""
    rng = random.Random(seed)
    points = []
    for t in range(steps):
        factor = 1 + 2 * max(0.0, 1 - t / drift_s)
        points.append(Point(1000.0 + t, 50 + rng.randint(-3, 3), 100 * factor + rng.gauss(0, 1)))
    return points


def test_steady_only_after_the_drift() -> None:
    points = _drifting(6.0)
    start = steady_from(points, 1.0, floor_s=1001.0)
    assert start is not None and start >= 1005.0  # the K windows from it end after the drift
    # the floor holds even in a steady series
    flat = [Point(1000.0 + t, 50, 100.0) for t in range(12)]
    assert steady_from(flat, 1.0, floor_s=1003.0) == 1003.0
    assert steady_from(flat[:4], 1.0, floor_s=1000.0) is None  # fewer windows than the test needs


def test_never_steady_when_latency_keeps_rising() -> None:
    rising = [Point(1000.0 + t, 50, 100.0 + 20 * t) for t in range(15)]
    assert steady_from(rising, 1.0, floor_s=1000.0) is None


def test_the_first_start_still_open_follows_the_tested_ones() -> None:
    """`first_open_start`: the starts `steady_from` tried and refused stay refused as windows close (their windows
    are closed), so the earliest it can still find is the first it has not tried: K - 1 windows back from the last."""
    rising = [Point(1000.0 + t, 50, 100.0 + 20 * t) for t in range(15)]
    assert first_open_start(rising, floor_s=1000.0) == 1011.0  # 15 windows: starts 1000..1010 tried, K = 5
    assert first_open_start(rising, floor_s=1002.0) == 1011.0  # the floor's windows only
    assert first_open_start(rising[:4], floor_s=1000.0) is None  # fewer windows than the test needs: none tried
    assert first_open_start(rising[:5], floor_s=1000.0) == 1001.0
    for n in range(5, 15):  # every start before it was refused; from it on, one still open
        open_from = first_open_start(rising[:n], floor_s=1000.0)
        assert steady_from(rising[:n], 1.0, floor_s=1000.0) is None and open_from == 1000.0 + n - 4


def test_rate_estimate_batch_means() -> None:
    points = [Point(float(t), n, 1.0) for t, n in enumerate((10, 12, 8, 10))]
    estimate = rate_estimate(points, 2.0)
    assert estimate.value == pytest.approx(5.0)
    # rates 5, 6, 4, 5: s = 0.8165, half = 3.182 * 0.8165 / 2
    assert estimate.high - estimate.value == pytest.approx(3.182 * 0.8165 / 2, abs=1e-3)
    assert rate_estimate(points[:1], 2.0).low is None
    assert rate_estimate([], 1.0).value is None


def test_precise_needs_requests_and_every_interval() -> None:
    tight = Estimate("ttft_p99_ms", 100.0, 97.0, 104.0)
    wide = Estimate("tpot_p99_ms", 10.0, 9.0, 11.0)
    none = Estimate("ttft_p99_ms", 100.0, None, None)
    assert precise([tight], requests=500, share=0.05)
    assert not precise([tight, wide], requests=500, share=0.05)
    assert precise([tight, wide], requests=500, share=0.10)
    assert not precise([tight], requests=50, share=0.05)
    assert not precise([none], requests=500, share=0.05)
    assert not precise([], requests=500, share=0.05)


def test_oversaturated_needs_shortfall_and_rising_ttft() -> None:
    growing = [Point(1000.0 + t, 30, 100.0 + 50 * t + (t % 2)) for t in range(8)]
    found = oversaturated(growing, 1.0, 1001.0, offered_per_s=40.0)
    assert found is not None
    assert found.achieved.value == pytest.approx(30.0)
    assert found.ttft_slope.per_s == pytest.approx(50.0, rel=0.01)
    assert "over-saturated" in str(found) and found.as_dict()["offered_rate_per_s"] == 40.0
    assert oversaturated(growing, 1.0, 1001.0, offered_per_s=None) is None  # closed loop: no offered rate
    assert oversaturated(growing, 1.0, 1001.0, offered_per_s=30.0) is None  # the offered rate is achieved
    flat = [Point(1000.0 + t, 30, 100.0 + (t % 2)) for t in range(8)]
    assert oversaturated(flat, 1.0, 1001.0, offered_per_s=40.0) is None  # short, but the latency does not grow
    assert oversaturated(growing[:4], 1.0, 1000.0, offered_per_s=40.0) is None  # too few windows


def test_a_drifting_first_window_is_not_steady() -> None:
    """One window still 17 % high at the start of an otherwise flat run tilts no slope enough, but is an outlier."""
    edge = [Point(1000.0 + t, 50, y) for t, y in enumerate((117.0, 100.0, 100.1, 99.9, 100.0, 100.0))]
    assert steady_from(edge, 1.0, floor_s=1000.0) == 1001.0
    noisy = [Point(1000.0 + t, 50, y) for t, y in enumerate((112.0, 95.0, 108.0, 92.0, 104.0, 99.0))]
    assert steady_from(noisy, 1.0, floor_s=1000.0) == 1000.0  # within the others' spread: steady from the floor


def test_throughput_of_an_open_loop_that_keeps_up_is_the_offered_rate() -> None:
    points = [Point(float(t), n, 1.0) for t, n in enumerate((7, 9, 8, 10, 6, 8))]  # Poisson-like around 8/s
    assert throughput_estimate(points, 1.0, offered_per_s=8.0) is None  # known: the offered rate
    short = throughput_estimate(points, 1.0, offered_per_s=20.0)  # fell short: its own interval is waited for
    assert short is not None and short.value == pytest.approx(8.0)
    assert throughput_estimate(points, 1.0, offered_per_s=None) == rate_estimate(points, 1.0)  # closed loop
