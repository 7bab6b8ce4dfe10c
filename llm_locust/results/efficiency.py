"""Energy and cost per token: summary.json's `energy` and `cost`, for the run and for each step (docs/metrics.md
"Energy and cost").

Energy is the integral of the GPUs' power over the window measured, from the DCGM power scraped
(`scrape.hardware.TelemetrySeries.power`): per DCGM-exporter URL, the power (W, summed over its GPUs at each scrape)
is taken as linear between two scrapes (the trapezoid rule) and as constant before its first and after its last
scrape; the URLs' energies add up. Cost is the `--cost-per-hour` price times the window's length. Both are divided
by the tokens and requests of the same window: the run's (start to end), or a step's measurement window (warm-up
excluded), whose requests are those sent in it. Pure: plain numbers in, plain dicts out.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import pairwise

from llm_locust.scrape.hardware import PowerSamples

SECONDS_PER_HOUR = 3600.0
MILLION = 1_000_000


def energy_j(samples: PowerSamples, start_s: float, end_s: float) -> float | None:
    """Joules drawn from `start_s` to `end_s` (epoch s) by the power `samples` ((epoch s, W), any order): the
    trapezoid between successive samples, the first / last sample's power held before / after them. None without
    samples; 0 for an empty window. Cost: a sort of the samples (linear when they come in time order, as scraped)
    and the samples inside the window."""
    if not samples:
        return None
    if end_s <= start_s:
        return 0.0
    points = sorted(samples)
    first = bisect_right(points, (start_s, math.inf))
    last = bisect_left(points, (end_s, -math.inf))
    edges = [(start_s, _power_at(points, first, start_s)), *points[first:last], (end_s, _power_at(points, last, end_s))]
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in pairwise(edges))


def _power_at(points: list[tuple[float, float]], after: int, t_s: float) -> float:
    """The power at `t_s` on the line through the sorted `points`, `after` the index of the first point after `t_s`
    (held constant outside the points)."""
    if after == 0:
        return points[0][1]
    if after == len(points):
        return points[-1][1]
    (t0, w0), (t1, w1) = points[after - 1], points[after]
    return w0 + (w1 - w0) * (t_s - t0) / (t1 - t0) if t1 > t0 else w1


def energy(
    power: Sequence[PowerSamples], start_s: float, end_s: float, output_tokens: int, requests_ok: int
) -> dict[str, float | None] | None:
    """summary.json's `energy` of the window `start_s`..`end_s` (epoch s): `joules_per_output_token`,
    `joules_per_request` (successful requests; None when there are no such tokens / requests) and `mean_power_w`
    (the energy over the window's length), with the total `joules`; None without power samples (no DCGM-exporter
    among the --metrics-url, or none answered)."""
    energies = [e for e in (energy_j(samples, start_s, end_s) for samples in power) if e is not None]
    if not energies:
        return None
    joules = sum(energies)
    duration_s = end_s - start_s
    return {
        "joules_per_output_token": _ratio(joules, output_tokens),
        "joules_per_request": _ratio(joules, requests_ok),
        "mean_power_w": _ratio(joules, duration_s),
        "joules": _significant(joules),
    }


def cost(
    usd_per_hour: float, duration_s: float, output_tokens: int, input_tokens: int
) -> dict[str, float | None] | None:
    """summary.json's `cost` of a window of `duration_s` seconds at `usd_per_hour` (--cost-per-hour): dollars per
    million output and input tokens of the window (None when it has none), with the window's `usd`; None without a
    price (0)."""
    if not usd_per_hour:
        return None
    usd = usd_per_hour * duration_s / SECONDS_PER_HOUR
    return {
        "usd_per_hour": usd_per_hour,
        "usd_per_million_output_tokens": _ratio(usd * MILLION, output_tokens),
        "usd_per_million_input_tokens": _ratio(usd * MILLION, input_tokens),
        "usd": _significant(usd),
    }


def _ratio(numerator: float, denominator: float) -> float | None:
    """`numerator / denominator` to 6 significant digits; None when the denominator is not > 0."""
    return _significant(numerator / denominator) if denominator > 0 else None


def _significant(value: float) -> float:
    """`value` rounded to 6 significant digits."""
    return float(f"{value:.6g}")
