"""When the users of one process send: the load plan it was given, turned into tickets.

The master (or a local runner) decides the `Plan` — the current sweep step, this process's
share of the request rate and of the request quota — and each process's `runtime.pacer.Pacer` applies it.
Before every request a user takes a `Ticket`:

- closed loop: at once;
- open loop: the run's arrivals are one global sequence (`load/sequence.py`: an arrival process's or a trace's
  due times from `origin_epoch_s`); the plan's `assignment` says which arrivals this process (`me`) sends. The
  pacer hands them out in order and the user sleeps until its ticket is due. Idle users each hold the next due
  time, so a request waits for a free user only when all are busy: then it is sent late, and `t_send − t_sched`
  (the client queue delay) says by how much. A new plan wakes every sleeping user: a ticket the new assignment
  gives to another process is dropped; a new sequence (the next rate step) starts over.

Tickets also carry the step and whether the request counts for it (sent after its warm-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from llm_locust.load.arrivals import Step
from llm_locust.load.sequence import Assignment

NO_STEP = -1


@dataclass(frozen=True, slots=True)
class Plan:
    """What one process does now: step (None outside sweeps), its request quota for the whole run in closed loop
    (None = no limit), the seconds of warm-up left in the step when the plan was made, and in open loop the
    global arrival sequence — the total `rate_per_s` of its `arrival` process (or "trace": the trace's times),
    its `seed`, `origin_epoch_s` (wall clock of arrival time 0), `limit` (arrivals, None = unbounded) — and the
    `assignment` of its arrivals to processes, this one being `me`; in closed loop with `--max-sessions`, the agent
    sessions it may start (`session_quota`, None = no limit)."""

    step: Step | None = None
    rate_per_s: float | None = None
    quota: int | None = None
    warmup_left_s: float = 0.0
    arrival: str = "poisson"  # an ArrivalKind, or "trace"
    burstiness: float = 1.0
    seed: int = 0
    origin_epoch_s: float = 0.0
    limit: int | None = None
    assignment: Assignment | None = None  # None: closed loop
    me: str = "local"
    session_quota: int | None = None  # closed loop, --max-sessions: agent sessions this process may start

    @property
    def open_loop(self) -> bool:
        """True when requests follow the global arrival sequence."""
        return self.assignment is not None

    def sequence(self) -> tuple[object, ...]:
        """What defines the arrival sequence (two plans with the same send the same arrivals)."""
        index = None if self.step is None else self.step.index
        return (index, self.rate_per_s, self.arrival, self.burstiness, self.seed, self.origin_epoch_s, self.limit)

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
            "origin_epoch_s": self.origin_epoch_s,
            "limit": self.limit,
            "assignment": None if self.assignment is None else self.assignment.to_wire(),
            "me": self.me,
            "session_quota": self.session_quota,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Plan:
        """Rebuild a plan from `to_wire` output."""
        step, assignment = data["step"], data["assignment"]
        return cls(
            **{
                **data,
                "step": None if step is None else Step(**step),
                "assignment": None if assignment is None else Assignment.from_wire(assignment),
            }
        )


class Ticket(NamedTuple):
    """Permission to send one request: when it was due (perf_counter s; None in closed loop),
    its step index (`NO_STEP` outside sweeps), whether it counts for the step, and its arrival's index in the
    global sequence (None in closed loop; a trace's request index)."""

    t_sched: float | None
    step: int
    measured: bool
    index: int | None = None
