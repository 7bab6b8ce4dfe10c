"""`llm-locust compare`: is the candidate slower than the baseline, or is it noise?

Each side is one or more results folders (repeated runs of the same setup). Per metric — the p50/p90/p99 of TTFT,
TPOT, ITL and E2E, output tokens/s and requests/s, all from llm_timeseries.csv — the change is
candidate / baseline - 1 with a bootstrap interval (`bootstrap`: windows within a run, runs within a side). Only
whole windows count (the first and last, cut by the run's start and end, are left out); latency windows weigh by
their successful requests. A run with sweep steps is compared step by step (the sides must have the same steps).

Verdict per metric: a *regression* (or an *improvement*) when the whole interval lies beyond `min_change` on the
worse (better) side; otherwise *no significant change*.

Accuracy (summary.json `accuracy`, of the run or of each step, when both sides scored answers) is a proportion, judged
by the test for one: each side's scored answers pooled over its runs, the pooled two-proportion z-test
(`scoring.proportion_test`). Its change is candidate − baseline in proportion units (0.1 = 10 points), its interval
the difference's normal interval at `confidence`; a regression (improvement) when the test is significant
(p < 1 − confidence) and the drop (rise) is at least `min_change` points; the gate fails it when it regressed by
more than its limit, in points. The band keeps the verdict from flagging shifts too small
to matter that the machine itself causes between two runs (other load, caches) — a single run per side cannot
measure that variation, repeated runs can. The gate (exit code 3) fails a metric when its whole interval lies
beyond its `--max-regression` limit on the worse side; without limits, every regression fails it.

Pure: reads results folders (`run_data`), imports no Locust. What it finds, and the console table: `compare_result`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from llm_locust.errors import ConfigError
from llm_locust.metrics.scoring import proportion_test
from llm_locust.report.bootstrap import RunSample, relative_change_interval, side_value
from llm_locust.report.compare_result import (
    ACCURACY,
    IMPROVEMENT,
    METRIC_NAMES,
    METRICS,
    NO_CHANGE,
    NO_DATA,
    REGRESSION,
    Comparison,
    MetricResult,
    MetricSpec,
)
from llm_locust.report.run_data import RunData

MIN_WINDOWS = 3
"""Whole time windows a run needs to be compared."""
_LIMIT = re.compile(r"^(?P<name>[a-z0-9_]+)=(?P<value>[0-9.]+)\s*%?$")


def parse_limits(texts: Iterable[str]) -> dict[str, float]:
    """`--max-regression` values (each may hold several, comma-separated: `ttft_p99_ms=10%`) as metric name ->
    largest tolerated worsening (a fraction: 10% -> 0.1); ConfigError naming the bad part."""
    limits: dict[str, float] = {}
    for part in (p.strip() for text in texts for p in text.split(",")):
        if not part:
            continue
        match = _LIMIT.match(part.lower())
        if match is None:
            raise ConfigError(f"--max-regression {part!r}: expected METRIC=PERCENT, e.g. ttft_p99_ms=10%")
        name = match["name"]
        if name not in METRIC_NAMES:
            raise ConfigError(f"--max-regression {part!r}: unknown metric {name!r} (one of {', '.join(METRIC_NAMES)})")
        try:
            value = float(match["value"])
        except ValueError:
            raise ConfigError(f"--max-regression {part!r}: {match['value']!r} is not a number") from None
        if not value > 0:
            raise ConfigError(f"--max-regression {part!r}: the limit must be > 0 %")
        limits[name] = value / 100
    return limits


def whole_windows(run: RunData) -> pd.DataFrame:
    """The rows of `run`'s time series whose window lies wholly inside the run; ConfigError naming the folder
    when it has no summary or time series, or fewer than `MIN_WINDOWS` whole windows."""
    if run.summary is None or run.timeseries is None:
        raise ConfigError(f"{run.path}: no summary.json or llm_timeseries.csv rows: compare needs llm-locust runs")
    interval_s = float((run.summary.get("timeseries") or {}).get("interval_s") or 0)
    duration_s = float(run.summary["run"].get("duration_s") or 0)
    frame = run.timeseries
    inside = (frame["elapsed_s"] >= -1e-3) & (frame["elapsed_s"] + interval_s <= duration_s + 1e-3)
    whole = frame[inside]
    if len(whole) < MIN_WINDOWS:
        raise ConfigError(
            f"{run.path}: {len(whole)} whole time window(s) of {interval_s:g} s, compare needs at least {MIN_WINDOWS} "
            "(run longer, or with a shorter --interval-s)"
        )
    return whole


def compare(
    baseline: Sequence[RunData],
    candidate: Sequence[RunData],
    limits: dict[str, float] | None = None,
    confidence: float = 0.95,
    min_change: float = 0.05,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Compare the runs of two sides metric by metric (see the module docstring); seeded and reproducible.

    `limits`: metric name -> tolerated worsening (fraction) for the gate; empty or None: every metric is gated at
    `min_change` (any regression fails). Raises ConfigError when a side has no run or a run cannot be compared.
    """
    if not baseline or not candidate:
        raise ConfigError("compare: give at least one results folder on each side: BASELINE... -- CANDIDATE...")
    if not 0 < confidence < 1:
        raise ConfigError(f"--confidence must be between 0 and 1 (e.g. 0.95), got {confidence:g}")
    if min_change < 0:
        raise ConfigError(f"--min-change must be >= 0 %, got {100 * min_change:g} %")
    sides = {
        "baseline": [whole_windows(run) for run in baseline],
        "candidate": [whole_windows(run) for run in candidate],
    }
    scopes = _scopes(baseline, candidate)
    limits = limits or {}
    results = []
    for index, (step, label) in enumerate(scopes):
        for number, metric in enumerate(METRICS):
            limit = limits.get(metric.name) if limits else min_change
            samples = [
                [_sample(frame, metric, step) for frame in frames] for frames in (sides["baseline"], sides["candidate"])
            ]
            results.append(
                _result(metric, label, samples, limit, confidence, min_change, resamples, seed + 1000 * index + number)
            )
        accuracy = [[_accuracy(run, step) for run in side] for side in (baseline, candidate)]
        if any(a is not None for a in accuracy[0]) and any(a is not None for a in accuracy[1]):
            limit = limits.get(ACCURACY.name) if limits else min_change
            results.append(_accuracy_result(label, accuracy, limit, confidence, min_change))
    notes = _load_differences([*baseline, *candidate])
    if len(baseline) == 1 or len(candidate) == 1:
        notes.append(
            "one run on a side: the intervals cover the variation between time windows of a run, not between runs; "
            "repeat the runs (several folders per side) to cover that too"
        )
    windows = {side: [len(frame) for frame in frames] for side, frames in sides.items()}
    return Comparison(list(baseline), list(candidate), windows, results, confidence, min_change, resamples, seed, notes)


_SAME_LOAD = ("model", "prompt_tokens", "max_tokens", "ignore_eos", "prefix_tokens", "prefix_pool", "prefix_zipf",
              "dataset", "request_rate", "arrival", "burstiness", "sweep_users", "sweep_rates",
              "interval_s")  # fmt: skip
"""Settings that make a different load: compared runs should share them."""


def _load_differences(runs: Sequence[RunData]) -> list[str]:
    """A note per setting (and the users) in which the runs differ: a change may then come from the load."""

    def settings(run: RunData) -> dict[str, Any]:
        summary = run.summary or {}
        return {**(summary.get("settings") or {}), "users": (summary.get("run") or {}).get("users_max")}

    values = [settings(run) for run in runs]
    notes = []
    for key in (*_SAME_LOAD, "users"):
        seen = [str(v.get(key)) for v in values]
        if len(set(seen)) > 1:
            shown = ", ".join(f"{run.name}: {value}" for run, value in zip(runs, seen, strict=True))
            notes.append(f"the runs differ in {key} ({shown}): a change may come from the load, not the endpoint")
    return notes


def run_steps(run: RunData) -> tuple[tuple[int, str], ...]:
    """The sweep steps of `run` as (index, label) pairs; () for a run without steps. Runs are compared only with
    runs of the same steps."""
    return tuple((step.get("index", i), step.get("label") or f"step {i}") for i, step in enumerate(run.steps))


def _scopes(baseline: Sequence[RunData], candidate: Sequence[RunData]) -> list[tuple[int | None, str]]:
    """[(None, "run")] for runs without steps; [(index, label), ...] when every run has the same sweep steps."""
    steps = {str(run.path): run_steps(run) for run in (*baseline, *candidate)}
    distinct = set(steps.values())
    if len(distinct) > 1:
        shown = "; ".join(f"{path}: {', '.join(label for _, label in s) or 'no steps'}" for path, s in steps.items())
        raise ConfigError(f"compare: the runs have different sweep steps ({shown}): compare runs of the same load")
    return list(distinct.pop()) or [(None, "run")]


def _sample(frame: pd.DataFrame, metric: MetricSpec, step: int | None) -> RunSample | None:
    """One run's windows (of sweep step `step`) with a value of `metric`, or None when fewer than 2 have one."""
    if step is not None:
        frame = frame[frame["step"] == step]
    values = frame[metric.column].to_numpy(dtype=float)
    weights = frame["requests_ok"].to_numpy(dtype=float) if metric.weighted else np.ones(len(values))
    usable = np.isfinite(values) & (weights > 0)
    if usable.sum() < 2:
        return None
    return RunSample(values[usable], weights[usable])


def _accuracy(run: RunData, step: int | None) -> tuple[float, int] | None:
    """(score sum, answers scored) of `run` (of its sweep step `step`) from summary.json, None when it scored none."""
    summary = run.summary or {}
    source = summary if step is None else next((s for s in run.steps if s.get("index") == step), {})
    accuracy = source.get("accuracy") or {}
    scored = accuracy.get("scored") or 0
    return (float(accuracy["score_sum"]), int(scored)) if scored else None


def _accuracy_result(
    scope: str,
    sides: list[list[tuple[float, int] | None]],
    limit: float | None,
    confidence: float,
    min_change: float,
) -> MetricResult:
    """The verdict and gate of the accuracy in one scope: each side's answers pooled over its runs, the
    two-proportion z-test (see the module docstring)."""
    (base_sum, base_n), (cand_sum, cand_n) = (
        (sum(a[0] for a in side if a), sum(a[1] for a in side if a)) for side in sides
    )
    test = proportion_test(base_sum, base_n, cand_sum, cand_n)
    if test is None:
        return MetricResult(ACCURACY, scope, None, None, None, None, None, NO_DATA, limit, False)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(test.base * (1 - test.base) / base_n + test.candidate * (1 - test.candidate) / cand_n)
    significant = test.p_value < 1 - confidence
    if significant and test.difference <= -min_change:
        verdict = REGRESSION
    elif significant and test.difference >= min_change:
        verdict = IMPROVEMENT
    else:
        verdict = NO_CHANGE
    failed = verdict == REGRESSION and limit is not None and -test.difference > limit
    low, high = test.difference - half, test.difference + half
    return MetricResult(ACCURACY, scope, round(test.base, 6), round(test.candidate, 6), test.difference, low, high,
                        verdict, limit, failed, test.p_value)  # fmt: skip


def _result(
    metric: MetricSpec,
    scope: str,
    samples: list[list[RunSample | None]],
    limit: float | None,
    confidence: float,
    min_change: float,
    resamples: int,
    seed: int,
) -> MetricResult:
    """The verdict and gate of one metric in one scope (see the module docstring)."""
    baseline, candidate = ([s for s in side if s is not None] for side in samples)
    if not baseline or not candidate:
        return MetricResult(metric, scope, None, None, None, None, None, NO_DATA, limit, False)
    base, cand = side_value(baseline), side_value(candidate)
    if base == 0:
        return MetricResult(metric, scope, base, cand, None, None, None, NO_DATA, limit, False)
    low, high = relative_change_interval(baseline, candidate, confidence, resamples, seed)
    worse_bound, better_bound = (low, -high) if metric.higher_is_worse else (-high, low)  # >0: beyond 0 that way
    if math.isnan(low):
        verdict = NO_DATA
    elif worse_bound > min_change:
        verdict = REGRESSION
    elif better_bound > min_change:
        verdict = IMPROVEMENT
    else:
        verdict = NO_CHANGE
    failed = limit is not None and not math.isnan(low) and worse_bound > limit
    return MetricResult(metric, scope, base, cand, cand / base - 1, low, high, verdict, limit, failed)
