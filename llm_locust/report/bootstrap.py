"""The two-level bootstrap behind `llm-locust compare`: windows within a run, runs within a side.

A side is one or more runs of the same thing; a run is its time windows (rows of llm_timeseries.csv), each with
one statistic (e.g. that window's TTFT p99 in ms) and a weight (its successful requests, or 1 for rates). A run's
value is the weighted mean of its windows' statistics; a side's value is the mean of its runs' values. One
resample draws the side's runs with replacement (when it has several), then each drawn run's windows with
replacement, and takes the same means: the spread of the resampled values covers the window-to-window variation
within a run and, with repeated runs, the run-to-run variation.

Pure numpy: seeded `numpy.random.Generator`s in, arrays out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RunSample:
    """One run's windows of one metric: `values` (the per-window statistic) and `weights` (both 1-D, same length)."""

    values: np.ndarray
    weights: np.ndarray

    @property
    def value(self) -> float:
        """The run's value: the weighted mean of its windows' statistics."""
        return float(np.average(self.values, weights=self.weights))


def side_value(runs: Sequence[RunSample]) -> float:
    """The side's value: the mean of its runs' values (same unit as the statistic)."""
    return float(np.mean([run.value for run in runs]))


def resample_side(runs: Sequence[RunSample], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """`resamples` bootstrap values of the side (1-D array, the statistic's unit): windows drawn with replacement
    within each run, and runs drawn with replacement when there are several."""
    per_run = np.empty((len(runs), resamples))
    for i, run in enumerate(runs):
        picks = rng.integers(0, len(run.values), size=(resamples, len(run.values)))
        weights = run.weights[picks]
        per_run[i] = (run.values[picks] * weights).sum(axis=1) / weights.sum(axis=1)
    if len(runs) == 1:
        return per_run[0]
    chosen = rng.integers(0, len(runs), size=(resamples, len(runs)))
    return per_run[chosen, np.arange(resamples)[:, None]].mean(axis=1)


def relative_change_interval(
    baseline: Sequence[RunSample],
    candidate: Sequence[RunSample],
    confidence: float,
    resamples: int,
    seed: int,
) -> tuple[float, float]:
    """The percentile bootstrap interval (at `confidence`, 0..1) of candidate / baseline - 1, as a fraction:
    (low, high). Seeded: the same inputs and `seed` give the same interval."""
    rng = np.random.default_rng(seed)
    base = resample_side(baseline, resamples, rng)
    cand = resample_side(candidate, resamples, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = cand / base - 1.0
    ratios = ratios[np.isfinite(ratios)]
    if not ratios.size:
        return (float("nan"), float("nan"))
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)
