"""Capacity search, free of I/O: the highest request rate at which a trial holds every objective.

Each trial is an open-loop step (`arrivals.Step`) at one rate, with warm-up, judged by `metrics.step_check` (every
SLO, the error rate, the schedule). The rates tried:

1. bracket: the first trial runs at `max_rate_per_s / 8`; while trials pass the rate doubles (capped at the maximum),
   while they fail it halves — until one rate passed and a higher one failed (or the maximum passed: the answer is
   at least the maximum; or `MAX_HALVINGS` halvings all failed: no rate passes);
2. bisection: the midpoint of the highest passing and the lowest failing rate, until they are within `precision`
   (their gap at most that share of the failing rate).

The search also stops when the next trial would end after the time budget; the answer is then the highest rate that
passed so far. Times are seconds on the caller's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_locust.metrics.step_check import StepResult

START_DIVISOR = 8.0
"""The first trial runs at --search-max-rate divided by this."""
MAX_HALVINGS = 10
"""Below --search-max-rate / (START_DIVISOR * 2**MAX_HALVINGS) the search gives up: no rate passes."""


@dataclass(frozen=True)
class Trial:
    """One trial: the step it ran as, its offered and achieved rates (req/s), goodput (req/s meeting every SLO) and
    the check of its measurement window."""

    step: int
    rate_per_s: float
    achieved_rate_per_s: float
    goodput_per_s: float
    requests: int
    check: StepResult

    def as_dict(self) -> dict[str, Any]:
        """As written to summary.json's `search.trials`."""
        failure = self.check.failure
        return {
            "step": self.step,
            "rate_per_s": round(self.rate_per_s, 6),
            "passed": failure is None,
            "failed": None if failure is None else failure.as_dict(),
            "achieved_rate_per_s": self.achieved_rate_per_s,
            "goodput_per_s": self.goodput_per_s,
            "requests": self.requests,
            "error_rate": None if self.check.error_rate is None else round(self.check.error_rate, 6),
        }


@dataclass
class RateSearch:
    """The state of one search: the trials so far and the rate of the next (see the module docstring)."""

    max_rate_per_s: float
    precision: float
    budget_s: float
    trials: list[Trial] = field(default_factory=list)
    stopped: str | None = None  # why the search ended (None while it runs)

    @property
    def best(self) -> Trial | None:
        """The passing trial with the highest rate below every failing one (None: none passed)."""
        failing = self.lowest_failing
        ceiling = float("inf") if failing is None else failing.rate_per_s
        passing = [t for t in self.trials if t.check.ok and t.rate_per_s < ceiling]
        return max(passing, key=lambda t: t.rate_per_s, default=None)

    @property
    def lowest_failing(self) -> Trial | None:
        """The failing trial with the lowest rate (None: none failed)."""
        return min((t for t in self.trials if not t.check.ok), key=lambda t: t.rate_per_s, default=None)

    def next_rate(self, elapsed_s: float, trial_s: float) -> float | None:
        """The rate (req/s) of the next trial, or None when the search is over (`stopped` says why); `elapsed_s`:
        time since the search began, `trial_s`: how long a trial runs."""
        if self.stopped is not None:
            return None
        rate = self._next_rate()
        if rate is not None and elapsed_s + trial_s > self.budget_s:
            self.stopped = (
                f"time budget: another {trial_s:g} s trial would end after --search-budget-s {self.budget_s:g}"
            )
            return None
        return rate

    def _next_rate(self) -> float | None:
        if not self.trials:
            return self.max_rate_per_s / START_DIVISOR
        best, failing = self.best, self.lowest_failing
        if failing is None:
            if best is not None and best.rate_per_s >= self.max_rate_per_s:
                self.stopped = "every objective held at --search-max-rate: the capacity is at least that"
                return None
            return min(2 * self.trials[-1].rate_per_s, self.max_rate_per_s)
        if best is None:
            floor_s = self.max_rate_per_s / (START_DIVISOR * 2**MAX_HALVINGS)
            if failing.rate_per_s / 2 < floor_s:
                self.stopped = f"no rate passed down to {failing.rate_per_s:g} req/s"
                return None
            return failing.rate_per_s / 2
        if failing.rate_per_s - best.rate_per_s <= self.precision * failing.rate_per_s:
            self.stopped = f"precision reached: {best.rate_per_s:g} passed, {failing.rate_per_s:g} failed"
            return None
        return (best.rate_per_s + failing.rate_per_s) / 2

    def as_dict(self) -> dict[str, Any]:
        """summary.json's `search`: the answer, goodput there, the bracket, why it stopped and every trial."""
        best, failing = self.best, self.lowest_failing
        return {
            "max_rate_per_s": None if best is None else round(best.rate_per_s, 6),
            "goodput_per_s": None if best is None else best.goodput_per_s,
            "lowest_failing_rate_per_s": None if failing is None else round(failing.rate_per_s, 6),
            "failed_there": None if failing is None else failing.check.failure.as_dict(),  # type: ignore[union-attr]
            "search_max_rate_per_s": self.max_rate_per_s,
            "precision": self.precision,
            "budget_s": self.budget_s,
            "stopped": self.stopped,
            "trials": [trial.as_dict() for trial in self.trials],
        }


def search_line(search: dict[str, Any]) -> str:
    """The answer of a search (`RateSearch.as_dict`) in one console line."""
    trials = len(search["trials"])
    if search["max_rate_per_s"] is None:
        return f"Capacity search: no rate met every objective ({trials} trials; {search['stopped'] or 'not finished'})"
    line = f"Capacity search: {search['max_rate_per_s']:g} req/s (goodput {search['goodput_per_s']:g} req/s)"
    failed = search["failed_there"]
    if failed is not None:
        value = "no data" if failed["value"] is None else f"{failed['value']:g}"
        failing = search["lowest_failing_rate_per_s"]
        line += f"; {failing:g} req/s failed {failed['statistic']} {value} > {failed['limit']:g}"
    return f"{line} ({trials} trials; {search['stopped'] or 'not finished'})"
