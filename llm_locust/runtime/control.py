"""The master's (or local runner's) side of the load model: steps, each process's plan, limits.

- Plans: every process that runs users paces them with a `Pacer`; the controller gives each its
  `Plan` — the current sweep step, its share of the request rate and of `--max-requests`, in
  proportion to its users (Locust spreads users evenly) — and sends a new one whenever the step,
  the workers or their users change. Workers get it as a custom Locust message
  (`PLAN_MESSAGE`); a local runner's own pacer directly.
- Steps: a sweep's load shape calls `enter_step`; the controller logs when each step started,
  when its warm-up ended and when it ended (wall clock), which the summary reports per step.
- Limits: `--max-requests` (every quota used and reported) and `--abort-error-rate` end the run;
  so does a rejected TLS certificate while no request has succeeded.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from locust.runners import STATE_INIT, STATE_RUNNING, STATE_SPAWNING, MasterRunner

from llm_locust.config.settings import Settings
from llm_locust.load.arrivals import Step, StepSpan, integer_shares, worker_shares
from llm_locust.load.pacing import Plan
from llm_locust.metrics.histograms import WindowMetrics
from llm_locust.metrics.record import ErrorKind
from llm_locust.runtime.pacer import Pacer

logger = logging.getLogger("llm_locust")

PLAN_MESSAGE = "llm_locust_plan"
"""Custom message type master -> worker carrying a `Plan.to_wire()`."""
ABORT_MIN_REQUESTS = 20
RESEND_S = 5.0
_LOCAL = "local"


class LoadController:
    """See the module docstring. `pacer` is the local runner's own (None on a master)."""

    def __init__(self, environment: Any, settings: Settings, pacer: Pacer | None) -> None:
        self.environment = environment
        self.settings = settings
        self.pacer = pacer
        self.spans: list[StepSpan] = []
        self.stop_reason: str | None = None
        self._sent: dict[str, Plan] = {}
        self._resent_s = time.monotonic()

    @property
    def step(self) -> Step | None:
        """The step running now (None outside sweeps)."""
        return self.spans[-1].step if self.spans and self.spans[-1].end_s is None else None

    def enter_step(self, step: Step) -> None:
        """The load shape moved to `step` (idempotent while it stays there)."""
        if self.spans and self.spans[-1].step == step:
            return
        now_s = time.time()
        self.end_step(now_s)
        self.spans.append(StepSpan(step, now_s, now_s + step.warmup_s))
        logger.info("step %d: %s for %g s (%g s warm-up)", step.index, step.label, step.duration_s, step.warmup_s)
        self.update()

    def end_step(self, now_s: float | None = None) -> None:
        """Close the running step (the sweep moved on, or the test stopped)."""
        if self.spans and self.spans[-1].end_s is None:
            self.spans[-1].end_s = now_s or time.time()

    def update(self) -> None:
        """Send each process its plan if it changed, and every `RESEND_S` anyway (a worker drops
        messages that arrive before it registered their handler; a repeated plan is a no-op)."""
        runner = self.environment.runner
        step = self.step
        rate_per_s = self.settings.request_rate or None
        if step is not None:
            rate_per_s = step.rate_per_s
        warmup_left_s = 0.0
        if step is not None:
            warmup_left_s = max(0.0, self.spans[-1].measure_from_s - time.time())
        users = self._users_by_process(runner)
        now_s = time.monotonic()
        resend = now_s - self._resent_s >= RESEND_S
        if resend:
            self._resent_s = now_s
        rates = worker_shares(rate_per_s, users) if rate_per_s else {}
        quotas = integer_shares(self.settings.max_requests, users) if self.settings.max_requests else {}
        seed = self.settings.seed
        for ordinal, process in enumerate(sorted(users)):
            plan = Plan(
                step=step,
                rate_per_s=rates.get(process),
                quota=quotas.get(process),
                warmup_left_s=warmup_left_s,
                arrival=self.settings.arrival,
                burstiness=self.settings.burstiness,
                seed=None if seed is None else seed * 1000 + ordinal,
            )
            if self._same(self._sent.get(process), plan) and not resend:
                continue
            self._sent[process] = plan
            if self.pacer is not None:
                self.pacer.apply(plan)
            else:
                runner.send_message(PLAN_MESSAGE, plan.to_wire(), client_id=process)

    @staticmethod
    def _same(old: Plan | None, new: Plan) -> bool:
        """Plans equal but for the warm-up left (which only matters when the step changes)."""
        if old is None:
            return False
        return old.step == new.step and old.quota == new.quota and _close(old.rate_per_s, new.rate_per_s)

    @staticmethod
    def _users_by_process(runner: Any) -> dict[str, int]:
        """Users per worker that can run users now (master), or the local process's users."""
        if not isinstance(runner, MasterRunner):
            return {_LOCAL: runner.user_count}
        states = (STATE_INIT, STATE_SPAWNING, STATE_RUNNING)
        return {str(w.id): w.user_count for w in runner.clients.values() if w.state in states}

    def check_limits(self, total: WindowMetrics) -> str | None:
        """The reason to end the run now (a limit reached), or None."""
        done = total.requests_finished
        limit = self.settings.max_requests
        if limit and done >= limit:
            return f"--max-requests {limit} reached"
        if total.failures.get(ErrorKind.TLS) and not total.requests_ok:  # no later request can do better
            return "the server's TLS certificate was rejected"
        abort = self.settings.abort_error_rate
        if abort and done >= ABORT_MIN_REQUESTS and total.requests_failed / done > abort:
            return f"error rate {total.requests_failed / done:.0%} exceeded --abort-error-rate {abort:g}"
        return None


def _close(a: float | None, b: float | None) -> bool:
    """Two rate shares equal within 1 % (user counts reported mid-spawn move them a little)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 0.01 * max(a, b)
