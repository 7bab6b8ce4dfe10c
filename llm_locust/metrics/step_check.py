"""Does one step (a sweep step, a search trial, or a whole run) hold its objectives? The one check that the capacity
pick (`report.capacity`) and the capacity search (`load.search`) share.

A step passes when:
- every `--slo` statistic of its successful requests is within its threshold (`metrics.slo.evaluate`);
- its error rate, failed / (successful + failed), is at most the limit (`--max-error-rate`, else
  `DEFAULT_MAX_ERROR_RATE`): a step where most requests were throttled (HTTP 429) is no capacity, however fast its
  few successes were;
- its server was not over-saturated (the step ended because its queue grew without bound, `load.step_end`);
- in an open loop, it kept its schedule: the p90 client queue delay is at most `SCHEDULE_LAG_MS` (else every user
  was busy and the offered rate was not sent: the latencies measured from sending hide the wait).

Pure: reads a summary.json step object (or the summary itself: `metrics`, `throughput`, optional `rate_per_s`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_locust.metrics.slo import Slo, SloResult, evaluate

DEFAULT_MAX_ERROR_RATE = 0.01
"""The error-rate limit when no --max-error-rate was given — of a step, a search trial and the whole run's verdict
(`ObjectiveSettings.max_error_rate`): at most 1 % of the requests failed. One limit, so that a run the verdict
passes is a run the capacity pick would count; 1 turns it off."""
OVERSATURATED = "oversaturated"
"""The `Failure` of a step whose server's queue grew without bound (`load.step_end`): its value the achieved rate, its
limit the offered rate (req/s)."""
SCHEDULE_LAG_MS = 100.0
"""Open loop: a p90 client queue delay (ms) above this means the requests left late (every user busy)."""


@dataclass(frozen=True)
class Failure:
    """The first statistic a step failed: its name (`ttft_p90_ms`, `error_rate`, `queue_delay_p90_ms`, `requests`),
    the measured value (None: no data) and the limit."""

    statistic: str
    value: float | None
    limit: float

    def __str__(self) -> str:
        if self.statistic == OVERSATURATED:
            return f"over-saturated: achieved {self.value:.3g} of {self.limit:g} req/s offered, TTFT rising"
        measured = "no data" if self.value is None else f"{self.value:g}"
        return f"{self.statistic} {measured} > {self.limit:g}"

    def as_dict(self) -> dict[str, Any]:
        """As written to summary.json."""
        return {"statistic": self.statistic, "value": self.value, "limit": self.limit}


@dataclass(frozen=True)
class StepResult:
    """A step checked: each SLO's result, its error rate (None: no request), the limit it was held to, and the p90
    client queue delay in ms (None: closed loop or no data)."""

    results: list[SloResult]
    error_rate: float | None
    max_error_rate: float
    queue_delay_p90_ms: float | None
    oversaturated: Failure | None = None

    @property
    def failure(self) -> Failure | None:
        """The first check the step failed (no request, the error rate, the schedule, then each SLO), or None."""
        if self.error_rate is None:
            return Failure("requests", 0, 1)
        if self.oversaturated is not None:
            return self.oversaturated
        if self.error_rate > self.max_error_rate:
            return Failure("error_rate", round(self.error_rate, 6), self.max_error_rate)
        if self.queue_delay_p90_ms is not None and self.queue_delay_p90_ms > SCHEDULE_LAG_MS:
            return Failure("queue_delay_p90_ms", self.queue_delay_p90_ms, SCHEDULE_LAG_MS)
        for result in self.results:
            if not result.ok:
                return Failure(result.slo.name, result.value_ms, result.slo.max_ms)
        return None

    @property
    def ok(self) -> bool:
        """True when the step passed every check."""
        return self.failure is None


def check_step(source: Mapping[str, Any], slos: Iterable[Slo], max_error_rate: float | None) -> StepResult:
    """Check one summary.json step object (or the summary: a run without steps) against `slos` and the error-rate
    limit (`DEFAULT_MAX_ERROR_RATE` when None)."""
    throughput = source["throughput"]
    attempted = throughput["requests_ok"] + throughput["requests_failed"]
    delay = source["metrics"].get("queue_delay_ms") or {}
    open_loop = source.get("rate_per_s") is not None
    ended = source.get("ended") or {}
    oversaturated = None
    if ended.get("reason") == OVERSATURATED:
        detail = ended["detail"]
        oversaturated = Failure(OVERSATURATED, detail["achieved_rate_per_s"]["value"], detail["offered_rate_per_s"])
    return StepResult(
        results=evaluate(slos, source["metrics"]),
        error_rate=throughput["requests_failed"] / attempted if attempted else None,
        max_error_rate=DEFAULT_MAX_ERROR_RATE if max_error_rate is None else max_error_rate,
        queue_delay_p90_ms=delay.get("p90") if open_loop else None,
        oversaturated=oversaturated,
    )
