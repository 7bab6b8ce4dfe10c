"""The sweep's Locust load shape: steps of users (concurrency) or of request rate, one after the other.

Runs on the master (or the local runner). Each tick finds the step for the elapsed time and tells
the `LoadController` (which gives every process its plan); Locust then holds the step's users.
After the last step the load pauses (every process idle, `LoadController.pause`) until the requests sent in it have
finished — they count in that step, as each earlier step's do in theirs — or as long as the step lasted (at least
10 s) has passed (`load.limits.drain_over`); then the shape returns None and Locust ends the test.
"""

from __future__ import annotations

import time

from locust import LoadTestShape

from llm_locust.load.arrivals import step_at
from llm_locust.load.limits import drain_over
from llm_locust.runtime.control import DRAIN_MIN_S, LoadController
from llm_locust.runtime.plugin import run_state


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
        step = step_at(steps, self.get_run_time())
        control = lead.control
        if step is not None:
            if control is not None:  # None before the test starts (its start enters step 0)
                control.enter_step(step)
            return step.users, spawn_rate
        if control is None:
            return None
        now_s = time.monotonic()
        if control is not self._drained:  # the last step is over: no new request, the ones in flight finish
            self._drained, self._drain_from_s = control, now_s
            control.pause()
        max_s = max(10.0, steps[-1].duration_s)
        if drain_over(now_s - self._drain_from_s, lead.in_flight, DRAIN_MIN_S[lead.is_master], max_s):
            return None
        return steps[-1].users, spawn_rate
