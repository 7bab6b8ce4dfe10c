"""The capacity search's Locust load shape: trials of request rate, decided one after the other on the master.

Runs on the master (or the local runner), ticked by Locust about once a second. Each trial is a rate step
(`--step-duration-s` at most, measured from its steady state, `--warmup-s` the least left out) that the
`LoadController` hands to every process as its plan. A trial ends as a sweep's step does (`step_watch.end_reason`: its
duration is up, its answer is known with `--precision`, or its server is over-saturated — a failed trial). Then the
shape pauses the load (every process idle) until the trial's requests have finished
and been reported — no request in flight, and on a master every worker has reported since (`DRAIN_MIN_S`) — or
`drain_max_s` passed; then it judges the trial from the very step object summary.json will hold for it
(`results.sections.step_summary`) and asks the `load.search.RateSearch` for the next rate. After the last trial the
shape returns None and Locust ends the test.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from locust import LoadTestShape

from llm_locust.load.arrivals import Step
from llm_locust.load.limits import drain_over
from llm_locust.load.search import Trial
from llm_locust.metrics.step_check import check_step
from llm_locust.results.sections import step_summary
from llm_locust.runtime.control import DRAIN_MIN_S, LoadController
from llm_locust.runtime.lead import Lead
from llm_locust.runtime.plugin import run_state
from llm_locust.runtime.step_watch import end_reason, settle

logger = logging.getLogger("llm_locust")


class SearchShape(LoadTestShape):
    """Trials of `--search-max-rate`'s search; see the module docstring."""

    abstract = True
    capacity_search = True  # the options check (`plugin`) asks for this shape with --search-max-rate

    def __init__(self) -> None:
        super().__init__()
        self._control: LoadController | None = None
        self._drain_from_s: float | None = None  # when the pause after a trial began (None: a trial runs)
        self._start_s = 0.0

    def tick(self) -> tuple[int, float] | None:
        """(users, spawn rate) while the search runs, all users at once; None once it is over."""
        lead = run_state(self.runner.environment).lead
        assert lead is not None  # the shape runs where the run is led
        users = lead.settings.load.max_concurrency
        control = lead.control
        if control is None or control.search is None:  # before the test starts
            return users, float(users)
        now_s = time.monotonic()
        if control is not self._control:  # a new test: the search begins
            self._control, self._start_s, self._drain_from_s = control, now_s, now_s
            return self._next_trial(lead, control, now_s, judge=False)
        if self._drain_from_s is None:
            ended = self._trial_ended(lead, control)
            if ended is None:
                return users, float(users)
            control.end_step(None, *ended)
            control.pause()
            self._drain_from_s = now_s
        elapsed_s = now_s - self._drain_from_s
        if not drain_over(elapsed_s, lead.in_flight, DRAIN_MIN_S[lead.is_master], self._drain_max_s(lead)):
            return users, float(users)
        return self._next_trial(lead, control, now_s, judge=True)

    def _next_trial(self, lead: Lead, control: LoadController, now_s: float, judge: bool) -> tuple[int, float] | None:
        """Judge the trial just over (`judge`), then start the next one; None when the search is over."""
        search = control.search
        assert search is not None
        settings = lead.settings
        if judge:
            if lead.in_flight:
                logger.warning("judging the trial with %d requests still in flight", lead.in_flight)
            search.trials.append(self._judge(lead, control))
        rate = search.next_rate(now_s - self._start_s, settings.load.step_duration_s)
        if rate is None:
            logger.info("capacity search over: %s", search.stopped)
            return None
        step = Step(
            len(control.spans),
            settings.load.max_concurrency,
            rate,
            settings.load.step_duration_s,
            settings.load.warmup_s,
        )
        control.enter_step(step)
        self._drain_from_s = None
        return step.users, float(step.users)

    @staticmethod
    def _trial_ended(lead: Lead, control: LoadController) -> tuple[str, dict[str, Any] | None] | None:
        """Why the running trial ends now (`step_watch.end_reason`), None: it goes on; settles the trials' steady
        states first."""
        now_s, lag_s, interval_s = time.time(), DRAIN_MIN_S[lead.is_master], lead.settings.output.interval_s
        settle(tuple(control.spans), lead.run, interval_s, now_s, lag_s, final=False)
        span = control.spans[-1]
        slos = lead.settings.objectives.slo
        return end_reason(span, lead.run, lead.settings.load, slos, interval_s, now_s, lag_s)

    @staticmethod
    def _judge(lead: Lead, control: LoadController) -> Trial:
        """The trial of the last step, checked on its summary.json step object."""
        lead.merge_local()
        span = control.spans[-1]
        now_s, lag_s = time.time(), DRAIN_MIN_S[lead.is_master]
        settle((span,), lead.run, lead.settings.output.interval_s, now_s, lag_s, final=True)
        index = span.step.index
        steady = lead.run.step_windows.to_summary(index, span.start_s)
        source = step_summary(span, lead.run.step_windows.measured(index), lead.run.warmup_requests[index], steady)
        check = check_step(source, lead.settings.objectives.slo, lead.settings.objectives.max_error_rate)
        throughput = source["throughput"]
        trial = Trial(
            step=index,
            rate_per_s=span.step.rate_per_s or 0.0,
            achieved_rate_per_s=throughput["achieved_rate_per_s"],
            goodput_per_s=throughput["goodput_per_s"],
            requests=throughput["requests_ok"] + throughput["requests_failed"],
            check=check,
        )
        failure = check.failure
        logger.info(
            "trial %d at %g req/s: %s", index, trial.rate_per_s, "passed" if failure is None else f"failed: {failure}"
        )
        return trial

    @staticmethod
    def _drain_max_s(lead: Lead) -> float:
        """The longest pause after a trial: its own length, at least 10 s (requests still in flight then are left
        out of its judgement)."""
        return max(10.0, lead.settings.load.step_duration_s)
