"""The sweep's Locust load shape: steps of users (concurrency) or of request rate, one after the other.

Runs on the master (or the local runner). Each tick settles the steps' steady states and asks whether the running
step ends now (`step_watch.end_reason`: its `--step-duration-s` is up, its answer is known with `--precision`, or its
server is over-saturated), then tells the `LoadController` (which gives every process its plan) the step to run;
Locust then holds the step's users. An over-saturated step is the sweep's last: the steps above it would only measure
a queue that grows (`run.stop_reason` says so). After the last step the load pauses (every process idle,
`LoadController.pause`) until the requests sent in it have finished — they count in that step, as each earlier step's
do in theirs — or as long as the step lasted (at least 10 s) has passed (`load.limits.drain_over`); then the shape
returns None and Locust ends the test.
"""

from __future__ import annotations

import logging
import time

from locust import LoadTestShape

from llm_locust.load.arrivals import Step
from llm_locust.load.limits import drain_over
from llm_locust.load.step_end import ENDED_OVERSATURATED
from llm_locust.runtime.control import DRAIN_MIN_S, LoadController
from llm_locust.runtime.lead import Lead
from llm_locust.runtime.plugin import run_state
from llm_locust.runtime.step_watch import end_reason, settle

logger = logging.getLogger("llm_locust")


class SweepShape(LoadTestShape):
    """Steps from `--sweep-users` or `--sweep-rates`, `--step-duration-s`, `--warmup-s`."""

    abstract = True

    def __init__(self) -> None:
        super().__init__()
        self._drained: LoadController | None = None  # the test whose last step is draining
        self._drain_from_s = 0.0  # time.monotonic() when that drain began

    def tick(self) -> tuple[int, float] | None:
        """(users, spawn rate) of the current step, all users at once — up or down (a grid goes from its highest load
        back to its lowest: Locust stops users at the spawn rate too, and holds the shape meanwhile); after the last
        step its users, idle, while its requests finish; then None."""
        lead = run_state(self.runner.environment).lead
        assert lead is not None  # the shape runs where the run is led
        steps = lead.settings.load.steps
        spawn_rate = float(max(s.users for s in steps))
        control = lead.control
        if control is None:  # before the test starts (its start enters step 0)
            return steps[0].users, spawn_rate
        now_s = time.time()
        lag_s = DRAIN_MIN_S[lead.is_master]
        interval_s = lead.settings.output.interval_s
        settle(tuple(control.spans), lead.run, interval_s, now_s, lag_s, final=False)
        span = control.spans[-1] if control.spans and control.spans[-1].end_s is None else None
        if span is not None and control is not self._drained:
            objectives = lead.settings.objectives
            ended = end_reason(span, lead.run, lead.settings.load, objectives.slo, interval_s, now_s, lag_s)
            if ended is None:
                return span.step.users, spawn_rate
            reason, detail = ended
            control.end_step(now_s, reason, detail)
            following = span.step.index + 1
            if reason == ENDED_OVERSATURATED:
                control.stop_reason = f"sweep stopped at step {span.step.index} ({span.step.label}): {detail['reason']}"
                logger.warning("%s", control.stop_reason)
            elif following < len(steps):
                logger.info("step %d ended: %s", span.step.index, reason)
                control.enter_step(steps[following])
                return steps[following].users, spawn_rate
        return self._drain(lead, control, steps)

    def _drain(self, lead: Lead, control: LoadController, steps: tuple[Step, ...]) -> tuple[int, float] | None:
        """After the last step: its users, idle, while its requests finish; then None."""
        spawn_rate = float(max(s.users for s in steps))
        now_s = time.monotonic()
        if control is not self._drained:  # the last step is over: no new request, the ones in flight finish
            self._drained, self._drain_from_s = control, now_s
            control.pause()
        max_s = max(10.0, steps[-1].duration_s)
        if drain_over(now_s - self._drain_from_s, lead.in_flight, DRAIN_MIN_S[lead.is_master], max_s):
            return None
        return control.spans[-1].step.users if control.spans else steps[-1].users, spawn_rate
