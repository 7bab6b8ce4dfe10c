"""Each process's `Pacer`: follows the `load.pacing.Plan` it is given and blocks a user's greenlet on a gevent Event
until its next `Ticket` is due (the pure plan and ticket live in `load/pacing.py`)."""

from __future__ import annotations

import random
from dataclasses import replace
from time import perf_counter

from gevent.event import Event

from llm_locust.load.arrivals import ArrivalProcess
from llm_locust.load.pacing import NO_STEP, Plan, Ticket

_QUOTA_WAIT_S = 60.0


class Pacer:
    """Hands out tickets for one process's users under the current `Plan`."""

    def __init__(self) -> None:
        self.plan = Plan()
        self._arrivals: ArrivalProcess | None = None
        self._measure_from_s = 0.0
        self._changed = Event()
        self.sent = 0

    def apply(self, plan: Plan) -> None:
        """Follow `plan` from now on; users waiting for a ticket of the old plan take a new one.
        The same plan again (the master repeats plans) changes nothing."""
        old = self.plan
        if plan == replace(old, warmup_left_s=plan.warmup_left_s):
            return
        now_s = perf_counter()
        self.plan = plan
        self._measure_from_s = now_s + plan.warmup_left_s
        if not plan.rate_per_s:
            self._arrivals = None
        elif self._arrivals is None or (plan.rate_per_s, plan.arrival, plan.burstiness) != (
            old.rate_per_s,
            old.arrival,
            old.burstiness,
        ):
            rng = random.Random(plan.seed)
            self._arrivals = ArrivalProcess(plan.rate_per_s, plan.arrival, plan.burstiness, now_s, rng)
        changed, self._changed = self._changed, Event()
        changed.set()

    def take(self) -> Ticket:
        """Wait until this user may send its next request; return its ticket.

        With a rate share of 0, or once the process's quota is used up, the user waits (the master ends the run when all
        quotas are done); the runner stopping the user ends the wait.
        """
        while True:
            plan, changed = self.plan, self._changed
            if plan.idle or (plan.quota is not None and self.sent >= plan.quota):
                changed.wait(_QUOTA_WAIT_S)
                continue
            arrivals = self._arrivals
            if arrivals is None:
                return self._issue(None, plan)
            due_s = arrivals.next_s()
            delay_s = due_s - perf_counter()
            if (delay_s <= 0 or not changed.wait(delay_s)) and self.plan is plan:
                return self._issue(due_s, plan)
            # else a new plan arrived while this ticket waited: it no longer holds

    def _issue(self, t_sched: float | None, plan: Plan) -> Ticket:
        self.sent += 1
        step = NO_STEP if plan.step is None else plan.step.index
        return Ticket(t_sched, step, perf_counter() >= self._measure_from_s)
