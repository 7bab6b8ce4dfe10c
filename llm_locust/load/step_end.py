"""When a sweep step (or a search trial) is steady, when its answer is known, and when its server's queue grows
without bound: the decisions, free of I/O, on the step's series of time windows (docs/load-models.md "Steady state,
precision and over-saturation").

The series: one `Point` per time window (`--interval-s` wide, by completion time) of the requests sent in the step,
warm-up or not: how many finished (the achieved rate is that count over the window's width) and their mean TTFT.

- Steady state (`steady_from`): the first window W at or after the `--warmup-s` floor such that, over the
  `STEADY_WINDOWS` windows from W, neither the achieved rate nor the mean TTFT trends: the least-squares slope of
  each has a 95 % interval that includes zero, or lies within ± `FLAT_SHARE` of the series' mean over the windows'
  span (a trend too small to matter); and W's own value is one of the others' (`_flat_series`). The step is measured
  from W on.
- Precision (`precise`): every estimate (the SLO percentiles, the throughput: `throughput_estimate`) has an
  interval, and it lies within ± `share` of its value, with at least `min_requests` measured.
- Over-saturation (`oversaturated`): in an open loop, over the step's windows after the floor, the achieved rate's
  95 % interval lies below the offered rate and TTFT's slope is positive with 95 % confidence: the server's queue
  grows, and every further second of the step (and every higher step) only measures the queue.

Times are epoch seconds (the master's clock) unless a name says otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_locust.metrics.intervals import t_quantile
from llm_locust.metrics.step_check import OVERSATURATED

STEADY_WINDOWS = 5
"""Windows of the trend test (K): the slope over K points has K - 2 degrees of freedom."""
FLAT_SHARE = 0.05
"""A slope whose whole 95 % interval changes the series by at most this share of its mean over the K windows is flat."""
MIN_REQUESTS = 100
"""The fewest measured requests on which `--precision` may end a step (`--precision-min-requests`' default)."""

ENDED_DURATION = "duration"
ENDED_PRECISION = "precision"
ENDED_OVERSATURATED = OVERSATURATED
ENDED_STOPPED = "stopped"
END_REASONS = (ENDED_DURATION, ENDED_PRECISION, ENDED_OVERSATURATED, ENDED_STOPPED)
"""Why a step ended: its --step-duration-s was up, its figures reached --precision, its server's queue grew without
bound, or the test stopped (a limit, the user, the search's budget)."""


def t_975(dof: int) -> float:
    """The 97.5 % quantile of Student's t with `dof` >= 1 degrees of freedom: the two-sided 95 % intervals' factor."""
    return t_quantile(dof, 0.975)


@dataclass(frozen=True)
class Slope:
    """A least-squares slope (units of y per second) with its 95 % interval."""

    per_s: float
    low: float
    high: float

    @property
    def positive(self) -> bool:
        """Rising with 95 % confidence (the interval lies above zero)."""
        return self.low > 0

    def flat(self, mean: float, span_s: float, share: float = FLAT_SHARE) -> bool:
        """No trend: the interval includes zero, or the most it lets the series change over `span_s` is within
        `share` of `mean`."""
        return self.low <= 0 <= self.high or max(abs(self.low), abs(self.high)) * span_s <= share * abs(mean)


def slope(xs: Sequence[float], ys: Sequence[float]) -> Slope | None:
    """The least-squares slope of ys against xs (seconds) and its 95 % interval, b ± t(n-2) · s / sqrt(Σ(x - x̄)²)
    with s² = Σ residual² / (n - 2); None with fewer than 3 points or all xs equal."""
    n = len(xs)
    if n < 3 or n != len(ys):
        return None
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    if sxx <= 0:
        return None
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx
    residuals = sum((y - mean_y - b * (x - mean_x)) ** 2 for x, y in zip(xs, ys, strict=True))
    half = t_975(n - 2) * math.sqrt(residuals / (n - 2) / sxx)
    return Slope(b, b - half, b + half)


@dataclass(frozen=True)
class Point:
    """One time window of a step's series: its start, how many of the step's requests finished in it, and their
    mean TTFT in ms (None: no request with a TTFT)."""

    start_s: float
    requests: int
    ttft_ms: float | None


@dataclass(frozen=True)
class Estimate:
    """A figure and its 95 % interval (None: it has none yet): `name` as in summary.json (`ttft_p99_ms`,
    `achieved_rate_per_s`)."""

    name: str
    value: float | None
    low: float | None
    high: float | None

    def within(self, share: float) -> bool:
        """The interval lies within ± `share` of the value."""
        if self.value is None or self.low is None or self.high is None or self.value <= 0:
            return False
        return self.low >= self.value * (1 - share) and self.high <= self.value * (1 + share)

    def as_dict(self) -> dict[str, Any]:
        """As written to summary.json."""
        return {"name": self.name, "value": _round(self.value), "low": _round(self.low), "high": _round(self.high)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def rates_per_s(points: Sequence[Point], interval_s: float) -> list[float]:
    """The achieved rate of each window, requests/s."""
    return [p.requests / interval_s for p in points]


def rate_estimate(points: Sequence[Point], interval_s: float) -> Estimate:
    """The achieved rate (req/s) over `points` with its 95 % interval by batch means: each window one batch,
    mean ± t(n-1) · s / sqrt(n) (requests of one window are not independent; windows nearly are). No interval
    with fewer than 2 windows."""
    rates = rates_per_s(points, interval_s)
    n = len(rates)
    if n == 0:
        return Estimate("achieved_rate_per_s", None, None, None)
    mean = sum(rates) / n
    if n < 2:
        return Estimate("achieved_rate_per_s", mean, None, None)
    half = t_975(n - 1) * math.sqrt(sum((r - mean) ** 2 for r in rates) / (n - 1) / n)
    return Estimate("achieved_rate_per_s", mean, mean - half, mean + half)


def throughput_estimate(points: Sequence[Point], interval_s: float, offered_per_s: float | None) -> Estimate | None:
    """The throughput `precise` waits for: the achieved rate (`rate_estimate`), or None in an open loop whose
    achieved rate's interval holds the offered rate — the server delivered what was offered, a rate known exactly,
    whose windows only vary as the seeded arrivals do (a Poisson count needs ~1,500 arrivals to be known to 5 %)."""
    estimate = rate_estimate(points, interval_s)
    low, high = estimate.low, estimate.high
    if offered_per_s is not None and low is not None and high is not None and low <= offered_per_s <= high:
        return None
    return estimate


def _flat_series(xs: Sequence[float], ys: Sequence[float], span_s: float) -> bool:
    """No trend in ys (see `Slope.flat`), and the first value is one of the others: within their 95 % prediction
    interval, m ± t(n-2) · s · sqrt(1 + 1/(n-1)), or within ± `FLAT_SHARE` of their mean m (a step's first windows
    that still drift show as an outlier before they tilt a slope). Too few points is no evidence of steadiness."""
    fitted = slope(xs, ys)
    if fitted is None or not fitted.flat(sum(ys) / len(ys), span_s):
        return False
    first, rest = ys[0], ys[1:]
    mean = sum(rest) / len(rest)
    spread = math.sqrt(sum((y - mean) ** 2 for y in rest) / (len(rest) - 1))
    allowed = max(t_975(len(rest) - 1) * spread * math.sqrt(1 + 1 / len(rest)), FLAT_SHARE * abs(mean))
    return abs(first - mean) <= allowed


def steady_from(
    points: Sequence[Point], interval_s: float, floor_s: float, windows: int = STEADY_WINDOWS
) -> float | None:
    """The start of the first window, at or after `floor_s`, from which `windows` windows show no trend in the
    achieved rate nor the mean TTFT (see the module docstring); None: not (yet) steady. `points`: the step's whole
    windows, oldest first, one per window (a window where nothing finished has 0 requests)."""
    after = [p for p in points if p.start_s >= floor_s]
    span_s = (windows - 1) * interval_s
    for i in range(len(after) - windows + 1):
        run = after[i : i + windows]
        xs = [p.start_s for p in run]
        if not _flat_series(xs, rates_per_s(run, interval_s), span_s):
            continue
        timed = [p for p in run if p.ttft_ms is not None]
        if len(timed) < windows - 1:  # a latency seen in too few windows says nothing of its trend
            continue
        if _flat_series([p.start_s for p in timed], [p.ttft_ms for p in timed], span_s):  # type: ignore[misc]
            return run[0].start_s
    return None


def first_open_start(points: Sequence[Point], floor_s: float, windows: int = STEADY_WINDOWS) -> float | None:
    """The earliest start `steady_from` can still find once more windows close (None: every start still can): each
    earlier one began `windows` whole windows that were tested and failed, and closed windows do not change."""
    after = [p for p in points if p.start_s >= floor_s]
    tested = len(after) - windows + 1  # the starts steady_from tried
    return after[tested].start_s if 0 < tested < len(after) else None


def precise(estimates: Sequence[Estimate], requests: int, share: float, min_requests: int = MIN_REQUESTS) -> bool:
    """The step's answer is known: at least `min_requests` measured and every estimate's interval within ± `share`."""
    return requests >= min_requests and bool(estimates) and all(e.within(share) for e in estimates)


@dataclass(frozen=True)
class Oversaturation:
    """Why a step's queue grows without bound: the rate offered and achieved (req/s) and TTFT's slope (ms/s)."""

    offered_per_s: float
    achieved: Estimate
    ttft_slope: Slope

    def __str__(self) -> str:
        rate, ttft = self.achieved, self.ttft_slope
        return (
            f"over-saturated: achieved {rate.value:.3g} req/s (95 % interval {rate.low:.3g}-{rate.high:.3g}) "
            f"of {self.offered_per_s:g} offered, TTFT rising {ttft.per_s:.3g} ms/s "
            f"(95 % interval {ttft.low:.3g}-{ttft.high:.3g})"
        )

    def as_dict(self) -> dict[str, Any]:
        """As written to summary.json."""
        return {
            "offered_rate_per_s": self.offered_per_s,
            "achieved_rate_per_s": self.achieved.as_dict(),
            "ttft_slope_ms_per_s": {k: round(v, 6) for k, v in vars(self.ttft_slope).items()},
        }


def oversaturated(
    points: Sequence[Point],
    interval_s: float,
    floor_s: float,
    offered_per_s: float | None,
    windows: int = STEADY_WINDOWS,
) -> Oversaturation | None:
    """The step's queue grows without bound (see the module docstring), judged on its windows from `floor_s` on
    (at least `windows` of them); None: it does not, or cannot be told (closed loop: `offered_per_s` None)."""
    if offered_per_s is None:
        return None
    after = [p for p in points if p.start_s >= floor_s]
    if len(after) < windows:
        return None
    achieved = rate_estimate(after, interval_s)
    if achieved.high is None or achieved.high >= offered_per_s:
        return None
    timed = [p for p in after if p.ttft_ms is not None]
    fitted = slope([p.start_s for p in timed], [p.ttft_ms for p in timed])  # type: ignore[misc]
    if fitted is None or not fitted.positive:
        return None
    return Oversaturation(offered_per_s, achieved, fitted)
