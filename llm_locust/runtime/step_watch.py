"""The master's (or local runner's) watch over sweep steps and search trials, on the merged data: when each step is
steady (`settle`) and why the running one should end now (`end_reason`). The decisions are `load.step_end`'s; this
module reads them their series and applies the answer.

A time window is read once it is closed: it ended `lag_s` ago (on a master, every worker has reported since,
`control.DRAIN_MIN_S`). Windows are `--interval-s` wide and aligned on the epoch, so a step's series starts at the
first window boundary after its warm-up floor and holds the windows that end before the step does.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from llm_locust.load.arrivals import StepSpan
from llm_locust.load.settings import LoadSettings
from llm_locust.load.step_end import (
    ENDED_DURATION,
    ENDED_OVERSATURATED,
    ENDED_PRECISION,
    STEADY_WINDOWS,
    Estimate,
    Point,
    first_open_start,
    oversaturated,
    precise,
    steady_from,
    throughput_estimate,
)
from llm_locust.metrics.intervals import quantile_interval_ms
from llm_locust.metrics.run_metrics import RunMetrics
from llm_locust.metrics.slo import Slo
from llm_locust.metrics.window import WindowMetrics

logger = logging.getLogger("llm_locust")

DEFAULT_PRECISION_STATS = (("ttft", "p90"), ("tpot", "p90"))
"""The percentiles `--precision` waits for when no `--slo` names one."""


def series(run: RunMetrics, span: StepSpan, interval_s: float, before_s: float) -> list[Point]:
    """The step's windows from its floor on that end before `before_s` and before the step ends (a window where
    nothing finished: 0 requests)."""
    counts = run.step_windows.series.get(span.step.index, {})
    first = math.ceil(span.floor_s / interval_s) * interval_s
    end_s = min(before_s, span.end_s if span.end_s is not None else math.inf)
    points = []
    start = first
    while start + interval_s <= end_s:
        window = counts.get(int(start))
        points.append(Point(start, 0, None) if window is None else Point(start, window.requests, window.ttft_ms))
        start += interval_s
    return points


def settle(
    spans: tuple[StepSpan, ...], run: RunMetrics, interval_s: float, now_s: float, lag_s: float, final: bool
) -> None:
    """Settle each step whose steady state is not yet known: from the first steady window found (its measured window
    starts there: `span.measure_from_s`), or never steady once every window of the ended step is closed (`final`: the
    run is over, whatever is still open)."""
    for span in spans:
        index = span.step.index
        if run.step_windows.settled(index):
            continue
        points = series(run, span, interval_s, now_s - lag_s)
        steady_s = steady_from(points, interval_s, span.floor_s)
        if steady_s is not None:
            span.measure_from_s = max(span.measure_from_s, steady_s)
            run.step_windows.settle(index, span.measure_from_s)
            logger.info("step %d steady after %.3g s", index, span.measure_from_s - span.start_s)
            continue
        if final or (span.end_s is not None and now_s - lag_s >= span.end_s):
            judged = len(points) >= STEADY_WINDOWS  # fewer whole windows after the floor: too short to tell
            run.step_windows.settle(index, None, judged)
            logger.info(
                "step %d %s: measured from its --warmup-s floor",
                index,
                "never steady" if judged else f"too short to tell steady state (< {STEADY_WINDOWS} windows)",
            )
        elif (open_from := first_open_start(points, span.floor_s)) is not None:
            run.step_windows.rule_out_before(index, open_from)  # what no steady start can keep: out of the pending


def percentile_estimates(window: WindowMetrics | None, slos: tuple[Slo, ...]) -> list[Estimate]:
    """Each SLO percentile of the step (else `DEFAULT_PRECISION_STATS`) with its 95 % interval (order statistics of
    the merged histogram, `metrics.intervals`); means and maxima have none and are left out."""
    stats = [(slo.metric, slo.stat) for slo in slos if slo.stat.startswith("p")] or list(DEFAULT_PRECISION_STATS)
    estimates = []
    for metric, stat in dict.fromkeys(stats):
        name = f"{metric}_{stat}_ms"
        if window is None:
            estimates.append(Estimate(name, None, None, None))
            continue
        q = float(stat[1:].replace("_", ".")) / 100
        interval = quantile_interval_ms(window.hist.get(metric), q)
        estimates.append(Estimate(name, window.distribution(metric, 1000.0)[stat], interval.low, interval.high))
    return estimates


def end_reason(
    span: StepSpan,
    run: RunMetrics,
    load: LoadSettings,
    slos: tuple[Slo, ...],
    interval_s: float,
    now_s: float,
    lag_s: float,
) -> tuple[str, dict[str, Any] | None] | None:
    """Why the running step ends now — its duration is up, its server is over-saturated, or (with `--precision`)
    its answer is known — with what the decision saw; None: it goes on."""
    step = span.step
    if now_s - span.start_s >= step.duration_s:
        return ENDED_DURATION, None
    points = series(run, span, interval_s, now_s - lag_s)
    found = oversaturated(points, interval_s, span.floor_s, step.rate_per_s)
    if found is not None:
        return ENDED_OVERSATURATED, {"reason": str(found), **found.as_dict()}
    share = load.precision_share
    steady_s = run.step_windows.steady_from.get(step.index)
    if share is None or steady_s is None:
        return None
    window = run.step_windows.measured(step.index)
    measured = [p for p in points if p.start_s >= steady_s]
    throughput = throughput_estimate(measured, interval_s, step.rate_per_s)
    estimates = [*percentile_estimates(window, slos), *(() if throughput is None else (throughput,))]
    requests = 0 if window is None else window.requests_finished
    if not precise(estimates, requests, share, load.precision_min_requests):
        return None
    return ENDED_PRECISION, {"share": share, "requests": requests, "estimates": [e.as_dict() for e in estimates]}
