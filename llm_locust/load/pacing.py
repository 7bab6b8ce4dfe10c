"""When the users of one process send: the load plan it was given, turned into tickets.

The master (or a local runner) decides the `Plan` — the current sweep step, this process's
share of the request rate and of the request quota — and each process's `runtime.pacer.Pacer` applies it.
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

from dataclasses import dataclass
from typing import Any, NamedTuple

from llm_locust.load.arrivals import ArrivalKind, Step

NO_STEP = -1


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
