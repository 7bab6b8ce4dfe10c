"""Capacity under SLOs: each step checked against every objective and the error-rate limit, and the capacity pick.

A step passes when `llm_locust.metrics.step_check.check_step` says so: every SLO statistic of its `metrics` object
in summary.json within its threshold, at most `max_error_rate` of its requests failed (`DEFAULT_MAX_ERROR_RATE`
unless given), and — open loop — it kept its schedule. Steps are ordered by load (users, or offered rate for
open-loop runs and capacity searches); the capacity is the highest passing step below the first failing one. Passing
steps above a failing one (a non-monotone curve: noise, or a server that recovers) are listed in `above_failure`,
never picked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_locust.metrics.slo import Slo, SloResult
from llm_locust.metrics.step_check import DEFAULT_MAX_ERROR_RATE, Failure, StepResult, check_step
from llm_locust.report.run_data import RunData
from llm_locust.report.tables import load_axis, step_sources


@dataclass(frozen=True)
class StepCheck:
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
    checks: list[StepCheck]
    best: StepCheck | None
    max_error_rate: float
    above_failure: list[StepCheck] = field(default_factory=list)


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
        StepCheck(
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
