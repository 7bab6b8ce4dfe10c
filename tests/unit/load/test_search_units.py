"""Pure parts of the capacity search and of the capacity pick: the step check, the rates tried, the pick's order."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_locust.load.search import MAX_HALVINGS, START_DIVISOR, RateSearch, Trial, search_line
from llm_locust.metrics.slo import parse_slos
from llm_locust.metrics.step_check import DEFAULT_MAX_ERROR_RATE, SCHEDULE_LAG_MS, StepResult, check_step
from llm_locust.report.capacity import capacity
from llm_locust.report.run_data import RunData


def step(ok: int, failed: int, ttft_p90_ms: float | None, rate: float | None = None, delay_p90_ms: float = 1.0):
    """A summary.json step object with the fields the check reads."""
    return {
        "label": f"rate={rate:g}/s" if rate else "users=1",
        "users": 4,
        "rate_per_s": rate,
        "metrics": {"ttft_ms": {"p90": ttft_p90_ms}, "queue_delay_ms": {"p90": delay_p90_ms}},
        "throughput": {"requests_ok": ok, "requests_failed": failed, "output_tokens_per_s": 10.0 * ok},
    }


SLOS = parse_slos(["ttft_p90_ms=100"])


def test_step_check_names_the_first_failure():
    assert check_step(step(100, 0, 50.0), SLOS, None).ok
    assert str(check_step(step(100, 0, 150.0), SLOS, None).failure) == "ttft_p90_ms 150 > 100"
    throttled = check_step(step(40, 60, 50.0), SLOS, None)  # fast, but most requests got 429
    assert throttled.failure.statistic == "error_rate" and throttled.failure.value == 0.6
    assert throttled.failure.limit == DEFAULT_MAX_ERROR_RATE
    assert check_step(step(98, 2, 50.0), SLOS, 0.05).ok  # the given limit, not the default
    assert check_step(step(0, 0, None), SLOS, None).failure.statistic == "requests"
    late = check_step(step(100, 0, 50.0, rate=5.0, delay_p90_ms=2 * SCHEDULE_LAG_MS), SLOS, None)
    assert late.failure.statistic == "queue_delay_p90_ms"
    assert check_step(step(100, 0, 50.0, delay_p90_ms=2 * SCHEDULE_LAG_MS), SLOS, None).ok  # closed loop: no schedule


def run_search(capacity_per_s: float, max_rate: float, precision: float, budget_s: float = 1e9) -> RateSearch:
    """Drive a search whose trials pass exactly at rates up to `capacity_per_s` (10 s per trial)."""
    search = RateSearch(max_rate, precision, budget_s)
    elapsed_s = 0.0
    while (rate := search.next_rate(elapsed_s, 10.0)) is not None:
        ok = rate <= capacity_per_s
        check = StepResult([], 0.0 if ok else 0.5, DEFAULT_MAX_ERROR_RATE, None)
        search.trials.append(Trial(len(search.trials), rate, rate, rate if ok else 0.0, 100, check))
        elapsed_s += 10.0
        assert len(search.trials) < 40
    return search


@pytest.mark.parametrize("capacity_per_s", [3.0, 17.0, 40.0, 99.0])
def test_search_brackets_then_bisects_to_the_precision(capacity_per_s):
    search = run_search(capacity_per_s, max_rate=100.0, precision=0.05)
    rates = [t.rate_per_s for t in search.trials]
    assert rates[0] == 100.0 / START_DIVISOR
    best, failing = search.best.rate_per_s, search.lowest_failing.rate_per_s
    assert best <= capacity_per_s < failing and failing - best <= 0.05 * failing
    assert search.stopped.startswith("precision reached")
    document = search.as_dict()
    assert document["max_rate_per_s"] == pytest.approx(best) and document["lowest_failing_rate_per_s"] == pytest.approx(
        failing
    )
    assert document["failed_there"] == {"statistic": "error_rate", "value": 0.5, "limit": DEFAULT_MAX_ERROR_RATE}
    assert [t["passed"] for t in document["trials"]] == [r <= capacity_per_s for r in rates]
    best, failing = document["max_rate_per_s"], document["lowest_failing_rate_per_s"]
    assert search_line(document).startswith(f"Capacity search: {best:g} req/s (goodput {best:g} req/s); {failing:g}")


def test_search_stops_at_its_ceiling_its_floor_and_its_budget():
    ceiling = run_search(1000.0, max_rate=100.0, precision=0.05)
    assert [t.rate_per_s for t in ceiling.trials] == [12.5, 25.0, 50.0, 100.0]
    assert ceiling.best.rate_per_s == 100.0 and "at least" in ceiling.stopped
    nothing = run_search(0.0, max_rate=100.0, precision=0.05)
    assert len(nothing.trials) == MAX_HALVINGS + 1 and nothing.best is None
    assert nothing.as_dict()["max_rate_per_s"] is None and "no rate passed" in nothing.stopped
    assert search_line(nothing.as_dict()).startswith("Capacity search: no rate met every objective")
    short = run_search(17.0, max_rate=100.0, precision=0.001, budget_s=45.0)  # 4 trials of 10 s fit in 45 s
    assert len(short.trials) == 4 and short.stopped.startswith("time budget")
    assert short.best.rate_per_s <= 17.0 < short.lowest_failing.rate_per_s


def summary_with_steps(steps: list[dict], model: str = "rate_sweep") -> RunData:
    return RunData(path=Path("x"), name="x", summary={"load": {"model": model}, "settings": {}, "steps": steps})


def test_capacity_is_the_highest_step_below_the_first_failure_and_the_rest_is_shown():
    steps = [step(100, 0, 50.0, 1.0), step(100, 0, 150.0, 2.0), step(100, 0, 60.0, 4.0), step(30, 70, 10.0, 8.0)]
    cap = capacity(summary_with_steps(steps), SLOS)
    assert cap.best.label == "rate=1/s"  # not rate=4/s, although it met the SLO: rate=2/s failed below it
    assert [c.label for c in cap.above_failure] == ["rate=4/s"]
    assert [c.ok for c in cap.checks] == [True, False, True, False]
    assert cap.checks[3].failure.statistic == "error_rate"  # the old pick took it: its few successes were fast
    assert capacity(summary_with_steps(steps), SLOS, max_error_rate=0.8).checks[3].ok
    # a search's trials ran out of order: checked by rate
    trials = [step(100, 0, 50.0, 12.5), step(100, 0, 300.0, 25.0), step(100, 0, 80.0, 18.75)]
    cap = capacity(summary_with_steps(trials, "rate_search"), SLOS)
    assert [c.load for c in cap.checks] == [12.5, 18.75, 25.0] and cap.best.load == 18.75 and not cap.above_failure
