"""Capacity under SLOs: each step checked against every objective and the error-rate limit, and the capacity pick.

A step passes when `llm_locust.metrics.step_check.check_step` says so: every SLO statistic of its `metrics` object
in summary.json within its threshold, at most `max_error_rate` of its requests failed (`DEFAULT_MAX_ERROR_RATE`
unless given), and — open loop — it kept its schedule. Steps are ordered by load (users, or offered rate for
open-loop runs and capacity searches); the capacity is the highest passing step below the first failing one. Passing
steps above a failing one (a non-monotone curve: noise, or a server that recovers) are listed in `above_failure`,
never picked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from llm_locust.metrics.slo import Slo, SloResult
from llm_locust.metrics.step_check import DEFAULT_MAX_ERROR_RATE, Failure, StepResult, check_step
from llm_locust.report.run_data import RunData
from llm_locust.report.tables import load_axis, step_sources


@dataclass(frozen=True)
class CheckedStep:
    """One step (index None: the whole run) checked against the SLOs and the error-rate limit."""

    step: int | None
    label: str
    load: float | None
    check: StepResult
    output_tokens_per_s: float
    requests_per_s: float

    @property
    def results(self) -> list[SloResult]:
        """Each SLO's result."""
        return self.check.results

    @property
    def failure(self) -> Failure | None:
        """The first check the step failed, or None."""
        return self.check.failure

    @property
    def ok(self) -> bool:
        """True when every objective is met and the error rate is within the limit."""
        return self.check.ok


@dataclass(frozen=True)
class Capacity:
    """The checks of one run, in order of load, and its pick (None when no step below the first failing one passes).

    `above_failure`: passing steps with more load than the first failing step (shown, not picked).
    """

    run: str
    load_title: str
    checks: list[CheckedStep]
    best: CheckedStep | None
    max_error_rate: float
    above_failure: list[CheckedStep] = field(default_factory=list)


def capacity(run: RunData, slos: tuple[Slo, ...], max_error_rate: float | None = None) -> Capacity | None:
    """Check every step of `run` (or the run itself) against `slos` and the error-rate limit (`max_error_rate`, else
    the run's own --max-error-rate, else `DEFAULT_MAX_ERROR_RATE`); None without summary or SLOs."""
    if not slos or run.summary is None:
        return None
    if max_error_rate is None:
        max_error_rate = (run.summary.get("settings") or {}).get("max_error_rate")
    if max_error_rate is None:
        max_error_rate = DEFAULT_MAX_ERROR_RATE
    load_key, load_title = load_axis(run)
    checks = [
        CheckedStep(
            step=index,
            label=label,
            load=source.get(load_key),
            check=check_step(source, slos, max_error_rate),
            output_tokens_per_s=source["throughput"].get("output_tokens_per_s") or 0.0,
            requests_per_s=source["throughput"].get("requests_per_s") or 0.0,
        )
        for index, label, source in step_sources(run)
    ]
    checks.sort(key=lambda c: c.load if c.load is not None else -1)  # stable: equal loads keep the run's order
    first_failing = next((i for i, c in enumerate(checks) if not c.ok), len(checks))
    below = checks[:first_failing]
    return Capacity(
        run=run.name,
        load_title=load_title,
        checks=checks,
        best=below[-1] if below else None,
        max_error_rate=max_error_rate,
        above_failure=[c for c in checks[first_failing:] if c.ok],
    )


KNEE_MIN_POINTS = 3
"""A curve needs this many points to have a knee."""


def knee_index(throughput: Sequence[float], latency_ms: Sequence[float]) -> int | None:
    """The knee of a latency-against-throughput curve given in order of load: the index of the point farthest above
    the diagonal once both axes are scaled to 0..1 over their range (throughput − latency largest, the "Kneedle"
    rule) — the last step that still bought throughput before latency climbed with little gain. None with fewer
    than `KNEE_MIN_POINTS` points, a missing value, or a flat axis."""
    if len(throughput) < KNEE_MIN_POINTS or len(throughput) != len(latency_ms):
        return None
    values = [(float(x), float(y)) for x, y in zip(throughput, latency_ms, strict=True)]
    if any(x != x or y != y for x, y in values):  # NaN: a step without the statistic
        return None
    xs, ys = [x for x, _ in values], [y for _, y in values]
    x_span, y_span = max(xs) - min(xs), max(ys) - min(ys)
    if x_span <= 0 or y_span <= 0:
        return None
    scores = [(x - min(xs)) / x_span - (y - min(ys)) / y_span for x, y in values]
    return max(range(len(scores)), key=scores.__getitem__)
