"""When the users of one process send: the load plan it was given, turned into tickets.

The master (or a local runner) decides the `Plan` — the current sweep step, this process's
share of the request rate and of the request quota — and each process's `Pacer` applies it.
Before every request a user takes a `Ticket`:

- closed loop: at once;
- open loop: the pacer hands out the due times of its `ArrivalProcess` in order, and the user
  sleeps until its ticket is due. Idle users each hold the next due time, so a request waits
  for a free user only when all are busy: then it is sent late, and `t_send − t_sched` (the
  client queue delay) says by how much. A new plan (the next rate step) wakes every sleeping
  user to take a ticket of the new schedule.

Tickets also carry the step and whether the request counts for it (sent after its warm-up).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from time import perf_counter
from typing import Any, NamedTuple

from gevent.event import Event

from llm_locust.load.arrivals import ArrivalKind, ArrivalProcess, Step

NO_STEP = -1
_QUOTA_WAIT_S = 60.0


@dataclass(frozen=True, slots=True)
class Plan:
    """What one process does now: step (None outside sweeps), its rate share (req/s, None =
    closed loop), its request quota for the whole run (None = no limit), and the seconds of
    warm-up left in the step when the plan was made."""

    step: Step | None = None
    rate_per_s: float | None = None
    quota: int | None = None
    warmup_left_s: float = 0.0
    arrival: ArrivalKind = "poisson"
    burstiness: float = 1.0
    seed: int | None = None  # of this process's arrival times (None: unpredictable)

    @property
    def idle(self) -> bool:
        """True when this process may not send now: a rate share of 0 (it has no user)."""
        return self.rate_per_s == 0

    def to_wire(self) -> dict[str, Any]:
        """A msgpack-able dict (the master's message to a worker); `from_wire` reverses it."""
        return {
            "step": None if self.step is None else self.step.to_wire(),
            "rate_per_s": self.rate_per_s,
            "quota": self.quota,
            "warmup_left_s": self.warmup_left_s,
            "arrival": self.arrival,
            "burstiness": self.burstiness,
            "seed": self.seed,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Plan:
        """Rebuild a plan from `to_wire` output."""
        step = data["step"]
        return cls(**{**data, "step": None if step is None else Step(**step)})


class Ticket(NamedTuple):
    """Permission to send one request: when it was due (perf_counter s; None in closed loop),
    its step index (`NO_STEP` outside sweeps), and whether it counts for the step."""

    t_sched: float | None
    step: int
    measured: bool


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
