"""The sweep's Locust load shape: steps of users (concurrency) or of request rate, one after the other.

Runs on the master (or the local runner). Each tick finds the step for the elapsed time and tells
the `LoadController` (which gives every process its plan); Locust then holds the step's users.
After the last step the shape returns None and Locust ends the test.
"""

from __future__ import annotations

from locust import LoadTestShape

from llm_locust.load.arrivals import step_at
from llm_locust.runtime.plugin import run_state


class SweepShape(LoadTestShape):
    """Steps from `--sweep-users` or `--sweep-rates`, `--step-duration-s`, `--warmup-s`."""

    abstract = True

    def tick(self) -> tuple[int, float] | None:
        """(users, spawn rate) of the current step, all users at once — up or down (a grid goes from its highest load
        back to its lowest: Locust stops users at the spawn rate too, and holds the shape meanwhile); None after the
        last step."""
        state = run_state(self.runner.environment)
        steps = state.settings.load.steps
        step = step_at(steps, self.get_run_time())
        if step is None:
            return None
        if state.control is not None:  # None before the test starts (its start enters step 0)
            state.control.enter_step(step)
        return step.users, float(max(s.users for s in steps))
