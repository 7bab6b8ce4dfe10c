"""The master's (or local runner's) side of the load model: steps, each process's plan, limits.

- Plans: every process that runs users paces them with a `Pacer`; the controller gives each its
  `Plan` — the current sweep step; in closed loop its share of `--max-requests` in proportion to its
  users (Locust spreads users evenly); in open loop the run's global arrival sequence (`load/sequence.py`:
  the request rate's arrival process or the trace, seeded, from a common origin, `--max-requests` arrivals at
  most) and the assignment of its arrivals to the processes that have users — and sends a new one whenever
  the step, the workers or their users change. When a process joins or leaves, the assignment changes from
  the first arrival due `REASSIGN_LEAD_S` ahead; a process that left hands its arrivals over from the low-water
  mark of its last report (`note_low_water`). Workers get the plan as a custom Locust message
  (`PLAN_MESSAGE`); a local runner's own pacer directly.
- Steps: a sweep's load shape calls `enter_step`; the controller logs when each step started,
  when its warm-up ended and when it ended (wall clock), which the summary reports per step.
- Search: with `--search-max-rate` the controller holds the `load.search.RateSearch`; its load shape
  (`runtime.search_shape`) enters each trial as a step and `pause`s the load between trials (every process idle)
  while the last trial's requests finish. A search starts paused: the shape's first tick enters the first trial.
- Limits: `--max-requests` (every quota used and reported) and `--abort-error-rate` end the run;
  so does a command that cannot work: every request so far failed with the same configuration-class error — TLS
  (certificate rejected, wrong URL scheme) or HTTP 4xx (wrong model, missing or wrong key, bad request) — and none
  succeeded (`load.limits.configuration_failure`).

The decisions are pure and live in `load/`: the sequence's assignment as processes come and go
(`load.sequence.Sharing`), the limits (`load.limits`); this module sends the plans and keeps the time.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from locust.runners import STATE_INIT, STATE_RUNNING, STATE_SPAWNING, WORKER_REPORT_INTERVAL, MasterRunner

from llm_locust.config.settings import Settings
from llm_locust.load.arrivals import Step, StepSpan, integer_shares
from llm_locust.load.limits import Limits
from llm_locust.load.pacing import Plan
from llm_locust.load.search import RateSearch
from llm_locust.load.sequence import DueTimes, Sharing
from llm_locust.load.step_end import ENDED_DURATION
from llm_locust.metrics.window import WindowMetrics
from llm_locust.runtime.pacer import Pacer
from llm_locust.workload.traces import Trace

logger = logging.getLogger("llm_locust")

PLAN_MESSAGE = "llm_locust_plan"
"""Custom message type master -> worker carrying a `Plan.to_wire()`."""
RESEND_S = 5.0
START_LEAD_S = 0.5
"""Arrival time 0 of a new sequence is this long after the plan is made (the plan reaches the workers first)."""
REASSIGN_LEAD_S = 2.0
"""A new assignment starts with the first arrival due this long ahead: no process has sent it when the plan
arrives (plans reach workers in milliseconds; a worker's users hold no ticket past its due time)."""
_LOCAL = "local"


DRAIN_MIN_S = {True: WORKER_REPORT_INTERVAL + 1.5, False: 1.0}
"""The shortest pause after a step (a sweep's last, a search's trial) before it is over, on a master (True: every
worker has reported since) or locally (`load.limits.drain_over`)."""


class LoadController:
    """See the module docstring. `pacer` is the local runner's own (None on a master)."""

    def __init__(self, environment: Any, settings: Settings, pacer: Pacer | None, trace: Trace | None = None) -> None:
        self.environment = environment
        self.settings = settings
        self.pacer = pacer
        self.trace = trace
        self.trace_due_s: Sequence[float] = trace.due_s if trace is not None else ()
        self.spans: list[StepSpan] = []
        self.stop_reason: str | None = None
        self.search: RateSearch | None = None
        if settings.load.search_max_rate:
            self.search = RateSearch(
                settings.load.search_max_rate, settings.load.search_precision, settings.load.search_budget_s
            )
        self.paused = self.search is not None  # no process sends while paused
        self._sent: dict[str, Plan] = {}
        self._resent_s = time.monotonic()
        self._sequence: Plan | None = None  # the sequence now running (assignment and me left out)
        self._sharing: Sharing | None = None  # its assignment to the processes
        trace_requests = len(trace.requests) if trace is not None else 0  # a session's later turns included
        self._limits = Limits(
            trace_requests, settings.load.max_requests, settings.load.abort_error_rate, settings.load.max_sessions
        )
        self._seed = settings.workload.seed if settings.workload.seed is not None else random.randrange(2**31)

    @property
    def origin_epoch_s(self) -> float | None:
        """Open loop: wall-clock time of the running sequence's time 0 (None in closed loop)."""
        return None if self._sequence is None else self._sequence.origin_epoch_s

    def note_low_water(self, process: str, index: int) -> None:
        """A process reported the first arrival of its share it has not handed out yet."""
        if self._sharing is not None:
            self._sharing.note_low_water(process, index)

    @property
    def step(self) -> Step | None:
        """The step running now (None outside sweeps)."""
        return self.spans[-1].step if self.spans and self.spans[-1].end_s is None else None

    def enter_step(self, step: Step) -> None:
        """The load shape moved to `step` (idempotent while it stays there)."""
        if self.spans and self.spans[-1].step == step:
            return
        self.paused = False
        now_s = time.time()
        self.end_step(now_s)
        self.spans.append(StepSpan(step, now_s, now_s + step.warmup_s))
        logger.info("step %d: %s for %g s (%g s warm-up)", step.index, step.label, step.duration_s, step.warmup_s)
        self.update()

    def end_step(
        self, now_s: float | None = None, reason: str = ENDED_DURATION, detail: dict[str, Any] | None = None
    ) -> None:
        """Close the running step (the sweep moved on, or the test stopped), saying why (`step_end.END_REASONS`)."""
        if self.spans and self.spans[-1].end_s is None:
            span = self.spans[-1]
            span.end_s, span.ended, span.ended_detail = now_s or time.time(), reason, detail

    def pause(self) -> None:
        """End the running step and hold every process idle (a quota of 0) until the next `enter_step`."""
        self.end_step()
        self.paused = True
        self.update()

    def update(self) -> None:
        """Send each process its plan if it changed, and every `RESEND_S` anyway (a worker drops
        messages that arrive before it registered their handler; a repeated plan is a no-op)."""
        runner = self.environment.runner
        step = self.step
        warmup_left_s = 0.0
        if step is not None:
            warmup_left_s = max(0.0, self.spans[-1].measure_from_s - time.time())
        users = self._users_by_process(runner)
        now_s = time.monotonic()
        resend = now_s - self._resent_s >= RESEND_S
        if resend:
            self._resent_s = now_s
        sequence = None if self.paused else self._open_loop(step, users)
        quotas = {}
        if self.paused:  # a search between trials: every process idle
            quotas = dict.fromkeys(users, 0)
        elif sequence is None and self.settings.load.max_requests:
            quotas = integer_shares(self.settings.load.max_requests, users)
        max_sessions = self.settings.load.max_sessions
        session_quotas = integer_shares(max_sessions, users) if sequence is None and max_sessions else {}
        for process in sorted(users):
            if sequence is None:
                plan = Plan(step=step, quota=quotas.get(process), warmup_left_s=warmup_left_s,
                            session_quota=session_quotas.get(process))  # fmt: skip
            else:
                assignment = None if self._sharing is None else self._sharing.assignment
                plan = replace(sequence, warmup_left_s=warmup_left_s, assignment=assignment, me=process)
            if self._same(self._sent.get(process), plan) and not resend:
                continue
            self._sent[process] = plan
            if self.pacer is not None:
                self.pacer.apply(plan)
            else:
                runner.send_message(PLAN_MESSAGE, plan.to_wire(), client_id=process)

    def _open_loop(self, step: Step | None, users: dict[str, int]) -> Plan | None:
        """The sequence to follow now (None: closed loop); keeps its `_sharing` up to date with the processes."""
        settings = self.settings
        trace = bool(self.trace_due_s)
        rate_per_s = settings.load.request_rate or None
        if step is not None:
            rate_per_s = step.rate_per_s
        if rate_per_s is None and not trace:
            self._sequence = self._sharing = None
            return None
        members = sorted(p for p, n in users.items() if n > 0) or sorted(users)  # users can send; else all alive
        if not members:  # no process to send: nothing to assign yet
            return self._sequence
        index = -1 if step is None else step.index
        key = (index, rate_per_s)
        current = self._sequence
        if current is None or (-1 if current.step is None else current.step.index, current.rate_per_s) != key:
            limit = settings.load.max_requests or None
            seed = self._seed * 1000 + index + 1
            arrival = "trace" if trace else settings.load.arrival
            current = self._sequence = Plan(step=step, rate_per_s=rate_per_s, arrival=arrival,
                                            burstiness=settings.load.burstiness, seed=seed,
                                            origin_epoch_s=time.time() + START_LEAD_S, limit=limit)  # fmt: skip
            if trace:
                due = DueTimes(self.trace_due_s, limit=limit)
            else:
                due = DueTimes.of_process(
                    rate_per_s or 0.0, settings.load.arrival, settings.load.burstiness, seed, limit
                )
            self._sharing = Sharing(due, members)
        elif self._sharing is not None and self._sharing.changed(members, set(users)):
            # processes joined, left, or have no user now: from the first arrival REASSIGN_LEAD_S ahead
            t_s = time.time() - current.origin_epoch_s + REASSIGN_LEAD_S
            switch, gone = self._sharing.reassign(members, set(users), t_s)
            for process, mark in gone:
                logger.info("%s left: its arrivals from #%d on go to the others", process, mark)
            logger.info("arrivals from #%d on go to %d process(es)", switch, len(members))
        return current

    @staticmethod
    def _same(old: Plan | None, new: Plan) -> bool:
        """Plans equal but for the warm-up left (which only matters when the step changes)."""
        return old is not None and old == replace(new, warmup_left_s=old.warmup_left_s)

    @staticmethod
    def _users_by_process(runner: Any) -> dict[str, int]:
        """Users per worker that can run users now (master), or the local process's users."""
        if not isinstance(runner, MasterRunner):
            return {_LOCAL: runner.user_count}
        states = (STATE_INIT, STATE_SPAWNING, STATE_RUNNING)
        return {str(w.id): w.user_count for w in runner.clients.values() if w.state in states}

    def limit_reached(self, total: WindowMetrics) -> str | None:
        """The reason to end the run now, a limit reached by the counts `total` (`load.limits.Limits`), kept as
        `stop_reason`; None when none is, or when the run is ending for a reason already (so given once)."""
        if self.stop_reason is not None:
            return None
        self.stop_reason = self._limits.stop_reason(
            total.requests_finished, total.requests_ok, total.failures, sessions=total.agent_sessions
        )
        return self.stop_reason
