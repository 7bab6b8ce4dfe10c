"""Each process's `Pacer`: follows the `load.pacing.Plan` it is given and blocks a user's greenlet on a gevent Event
until its next `Ticket` is due (the pure plan, ticket, arrival sequence, assignment and the walk through it live in
`load/`).

Open loop: the pacer walks the global arrival sequence (`load.sequence.DueTimes`) with a `load.sequence.Cursor` and
hands out the arrivals the plan's assignment gives to this process, in order. When a new assignment gives it arrivals
it had walked past (another process left before sending them), it sends those first, late. `low_water` — the first
of its arrivals not handed out yet — goes to the master with every report, so that a process leaving hands over
exactly what it had not sent.

On time: a user gets its ticket `PREPARE_AHEAD_S` before the arrival is due (a gevent timer, up to ~5 ms late under
load: early enough), builds its request, and waits for the due time itself right before sending it (`until_due`: a
timer until `EARLY_WAKE_S` before, then yielding until the due time). From the moment a user takes an arrival until
its request leaves, the arrival's due time is in the process's `load.due_sends.SENDS`, and the rest of the loop's work
makes way for it: the stream pump ends its turn by then, and a build, a request's end and report, the results tick and
a worker's report start only when they would end before it (`make_way`, `Periodic`). Between the due time and the
first byte written there is only the send.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from time import perf_counter

import gevent
from gevent.event import Event

from llm_locust.load.clock import RunClock
from llm_locust.load.due_sends import SENDS, STALE_S, DueSends
from llm_locust.load.pacing import NO_STEP, Plan, Ticket
from llm_locust.load.sequence import Cursor, DueTimes

_QUOTA_WAIT_S = 60.0
PREPARE_AHEAD_S = 0.010
"""Open loop: a user gets its ticket this long before its request is due, to build the request before the due time
(a trace's 600-token prompt: ~0.1 ms) and then wait for it (`Pacer.until_due`). The timer that wakes it fires late
under load — p50 0.9 ms, p99 4.8 ms at 85 % of a core: libev's epoll waits in whole milliseconds, and a timer waits
for the greenlet running when it expires (a pump turn, a build, a send) — so 4 ms ahead was not enough for 1 % of the
requests at that load. A build longer than the time left makes the request late by the difference."""
EARLY_WAKE_S = 0.0015
"""Open loop: a user's timer wakes it this long before its request is due, then it yields until the due time: the
event loop's timers fire up to ~1 ms late (epoll waits in whole milliseconds)."""
BUILD_S = 0.0005
"""Open loop: what a request's build may cost (a trace's 600-token prompt: ~0.1 ms), and what its end does (the
record's close, its report to Locust: ~0.2 ms): each starts only when no other send is due within this long."""
END_WAIT_S = 0.02
"""Open loop: the longest a finished request waits for a gap between sends to end in (`make_way`)."""
PERIODIC_GAP_S = 0.005
"""Open loop: the longest gap between sends a periodic job (`Periodic`) waits for: a longer job cannot expect one."""
PERIODIC_WAIT_S = 0.5
"""Open loop: the longest a periodic job waits for its gap."""


class Pacer:
    """Hands out tickets for one process's users under the current `Plan`. `trace_due_s`: the due times of the
    run's trace (seconds from its start, speed-up applied), for plans whose arrival is "trace". `clock`: the run's
    clock of this process (`load.clock.RunClock`: a plan's origin is an epoch second of the master's clock)."""

    def __init__(
        self, trace_due_s: Sequence[float] = (), clock: RunClock | None = None, sends: DueSends = SENDS
    ) -> None:
        self.plan = Plan()
        self.sends = sends  # the due times of the arrivals this process's users hold
        self.clock = clock or RunClock()
        self.trace_due_s = trace_due_s
        self.open_loop = False  # the run's settings ask for an open loop: wait for the plan that says how
        self._due: DueTimes | None = None
        self._origin_s = 0.0  # perf_counter of the sequence's time 0
        self._origin_offset_s = 0.0  # the run clock's offset `_origin_s` was computed with
        self._cursor = Cursor()
        self._measure_from_s = 0.0
        self._changed = Event()
        self._closed = False
        self._issued: dict[int, tuple[DueTimes, int]] = {}  # arrivals handed out, not sent yet: their sequence and
        # their handle in `sends`
        self.sent = 0
        self.sessions_started = 0  # agent sessions begun by this process's users (`take(new_session=True)`)

    def apply(self, plan: Plan) -> None:
        """Follow `plan` from now on; users waiting for a ticket of the old plan take a new one.
        The same plan again (the master repeats plans) changes nothing."""
        old = self.plan
        if plan == replace(old, warmup_left_s=plan.warmup_left_s):
            return
        now_s = perf_counter()
        self.plan = plan
        self._measure_from_s = now_s + plan.warmup_left_s
        if plan.assignment is None:
            self._due = None
        elif self._due is None or plan.sequence() != old.sequence() or old.assignment is None:
            self._start_sequence(plan)
        else:
            self._cursor.reassigned(old.assignment, plan.assignment, plan.me)
        changed, self._changed = self._changed, Event()
        changed.set()

    def use_trace(self, trace_due_s: Sequence[float], open_loop: bool) -> None:
        """The test's settings (a worker learns them from the master when the test starts, maybe after its first
        plan): the trace's due times, and whether the run is open loop."""
        self.open_loop = open_loop
        if trace_due_s != self.trace_due_s:
            self.trace_due_s = trace_due_s
            if self.plan.arrival == "trace" and self.plan.assignment is not None:
                self._start_sequence(self.plan)

    def _start_sequence(self, plan: Plan) -> None:
        """Walk `plan`'s arrival sequence from its start."""
        if plan.arrival == "trace":
            self._due = DueTimes(self.trace_due_s, limit=plan.limit)
        else:
            rate = plan.rate_per_s or 0.0
            self._due = DueTimes.of_process(rate, plan.arrival, plan.burstiness, plan.seed, plan.limit)  # type: ignore[arg-type]
        self._anchor(plan)
        self._cursor.restart()
        for _due, handle in self._issued.values():
            left(self.sends, handle)
        self._issued.clear()

    def _anchor(self, plan: Plan) -> None:
        """Place the sequence's time 0 (`plan`'s origin, an epoch second of the master's clock) on perf_counter's."""
        self._origin_offset_s = self.clock.offset_s
        self._origin_s = self.clock.perf_at(plan.origin_epoch_s)

    def follow_clock(self) -> None:
        """The run clock's offset from the master's was measured again: a running sequence's time 0 moves with it
        (by the change: within the two estimates' uncertainties) for the arrivals no user waits for yet."""
        if self._due is not None and self.clock.offset_s != self._origin_offset_s:
            self._anchor(self.plan)

    def close(self) -> None:
        """Hand out no more tickets (this process is leaving: `low_water` is final)."""
        self._closed = True
        changed, self._changed = self._changed, Event()
        changed.set()

    @property
    def done(self) -> bool:
        """This process sends no more requests under its plan: its quota is used up (`--max-requests` in a closed
        loop), or an open loop's sequence has no arrival left for it (`Cursor.exhausted`) and every one handed out
        has left."""
        plan, due = self.plan, self._due
        if plan.quota is not None and self.sent >= plan.quota:
            return True
        return due is not None and not self._issued and self._cursor.exhausted(due)

    @property
    def low_water(self) -> int:
        """Open loop: the first arrival of this process not handed out yet (every one before it was)."""
        return self._cursor.low_water

    def take(self, new_session: bool = False) -> Ticket:
        """Wait until this user may send its next request (`new_session`: the first of an agent session); return its
        ticket. In an open loop that is `PREPARE_AHEAD_S` before the request is due: build it, then `until_due`.

        With no arrival for this process (the sequence is over, or it sends none), before the first plan of an open
        loop, once the process's quota (of requests, or of sessions for a request that begins one) is used up, or
        after `close`, the user waits (the master ends the run when all are done); the runner stopping the user ends
        the wait.
        """
        while True:
            plan, changed = self.plan, self._changed
            waiting_for_plan = self.open_loop and plan.assignment is None
            sessions_over = (
                new_session and plan.session_quota is not None and self.sessions_started >= plan.session_quota
            )
            if (
                self._closed
                or waiting_for_plan
                or (plan.quota is not None and self.sent >= plan.quota)
                or sessions_over
            ):
                changed.wait(_QUOTA_WAIT_S)
                continue
            due = self._due
            if due is None:
                self.sessions_started += new_session
                return self._issue(None, plan, None)
            assert plan.assignment is not None  # with `_due`
            index = self._cursor.next_index(due, plan.assignment, plan.me)
            if index is None:
                changed.wait(_QUOTA_WAIT_S)
                continue
            ticket = self._wait_for(index, due)
            if ticket is not None:
                if ticket.t_sched is not None:  # the build starts in a gap between the other users' sends
                    try:
                        make_way(BUILD_S, ticket.t_sched - BUILD_S - EARLY_WAKE_S, self.sends)
                    except BaseException:  # GreenletExit: the runner stopped this user
                        self._give_back(ticket.index)
                        raise
                return ticket

    def until_due(self, ticket: Ticket) -> None:
        """Wait until `ticket` is due, on time; at once without a due time or past it. A user stopped while it waits
        puts the arrival back for another user of this process, as in `take`."""
        if ticket.t_sched is None:
            return
        try:
            wait_until(ticket.t_sched)
        except BaseException:  # GreenletExit: the runner stopped this user
            self._give_back(ticket.index)
            raise
        self.forget(ticket)

    def forget(self, ticket: Ticket) -> None:
        """The request of `ticket` left, or ended without leaving (it failed before): its arrival is no longer pending
        (nothing when it was forgotten already)."""
        self._release(ticket.index)

    def _give_back(self, index: int | None) -> None:
        """A user stopped between taking arrival `index` and sending it: the arrival goes back to this process's
        other users (unless a new sequence began meanwhile), and out of the due sends."""
        due = self._release(index)
        if index is not None and due is not None and self._due is due:
            self._cursor.put_back(index)
            self.sent -= 1

    def _release(self, index: int | None) -> DueTimes | None:
        """Take arrival `index` out of those handed out and out of the due sends; the sequence it was handed out of
        (None: not handed out, or released already)."""
        if index is None:
            return None
        due, handle = self._issued.pop(index, (None, None))
        if handle is not None:
            left(self.sends, handle)
        return due

    def yield_to_sends(self) -> None:
        """A request ended: what follows (its report, the next ticket) starts when no other user's send is due within
        `BUILD_S`, waiting `END_WAIT_S` at most (`make_way`); at once in a closed loop."""
        make_way(BUILD_S, perf_counter() + END_WAIT_S, self.sends)

    def _wait_for(self, index: int, due: DueTimes) -> Ticket | None:
        """Hold arrival `index` until it is due in `PREPARE_AHEAD_S`; its ticket, or None when a new plan took it
        away. A user stopped while it waits (fewer users, the test ending) puts the arrival back for another user of
        this process."""
        t_sched = self._origin_s + (due.due_s(index) or 0.0)
        self._cursor.hold(index)
        handle: int | None = self.sends.add(t_sched)
        try:
            while True:
                plan, changed = self.plan, self._changed
                delay_s = t_sched - perf_counter() - PREPARE_AHEAD_S
                if (delay_s <= 0 or not changed.wait(delay_s)) and self.plan is plan and not self._closed:
                    self._issued[index] = (due, handle)
                    handle = None  # sent when the request leaves (`until_due`)
                    return self._issue(t_sched, plan, index)
                plan = self.plan
                if self._closed:  # still this process's to send (or to hand over: `low_water` counts it)
                    self._cursor.put_back(index)
                    return None
                if self._due is not due or plan.assignment is None:
                    return None
                if plan.assignment.owner(index) != plan.me:
                    return None
        except BaseException:  # GreenletExit: the runner stopped this user
            if self._due is due:
                self._cursor.put_back(index)
            raise
        finally:
            self._cursor.release(index)
            if handle is not None:
                left(self.sends, handle)

    def _issue(self, t_sched: float | None, plan: Plan, index: int | None) -> Ticket:
        self.sent += 1
        step = NO_STEP if plan.step is None else plan.step.index
        sent_s = perf_counter() if t_sched is None else max(perf_counter(), t_sched)
        return Ticket(t_sched, step, sent_s >= self._measure_from_s, index)


def wait_until(t_s: float) -> None:
    """Block this greenlet until perf_counter instant `t_s` (at once when it has passed): a gevent timer until
    `EARLY_WAKE_S` before it, then yield (`gevent.sleep(0)`: other greenlets run meanwhile) until it."""
    delay_s = t_s - perf_counter() - EARLY_WAKE_S
    if delay_s > 0:
        gevent.sleep(delay_s)
    while perf_counter() < t_s:
        gevent.sleep(0)


class _Departures:
    """Wakes the work waiting for a gap between sends (`make_way`) when a request leaves: an event, not polling (a
    greenlet yielding with `gevent.sleep(0)` in a loop keeps the event loop from firing timers for up to gevent's switch
    interval, 5 ms: the very timers that wake the users due)."""

    def __init__(self) -> None:
        self.event = Event()

    def wait(self, timeout_s: float) -> None:
        self.event.wait(timeout_s)

    def left(self) -> None:
        if self.event.linkcount():
            event, self.event = self.event, Event()
            event.set()


_DEPARTURES = _Departures()


def left(sends: DueSends, handle: int) -> None:
    """The request of `handle` left (or will not): take it out of `sends`, wake the work that waited for it."""
    sends.sent(handle)
    _DEPARTURES.left()


def make_way(cost_s: float, until_s: float, sends: DueSends = SENDS) -> None:
    """Before `cost_s` seconds of work that is not a send: wait while an open loop's send is due before that work would
    end (`load.due_sends.DueSends.next_s`), until perf_counter instant `until_s` at most; at once when none is (a
    closed loop: always). The wait ends when a request leaves (`left`), or, if none does, at `until_s` or once the
    send is stale (`load.due_sends.STALE_S`)."""
    now_s = perf_counter()
    while now_s < until_s:
        next_s = sends.next_s(now_s)
        if next_s is None or next_s >= now_s + cost_s:
            return
        _DEPARTURES.wait(min(until_s, next_s + STALE_S) - now_s)
        now_s = perf_counter()


class Periodic:
    """A periodic job of this process (the results write, a worker's report to the master), run in a gap between an
    open loop's sends: it waits for a gap as long as its last run took (`PERIODIC_GAP_S` at most, `PERIODIC_WAIT_S` at
    most: `make_way`); at once in a closed loop."""

    def __init__(self, sends: DueSends = SENDS) -> None:
        self.sends = sends
        self.cost_s = 0.0  # its last run

    def run(self, job: Callable[[], None]) -> None:
        make_way(min(self.cost_s, PERIODIC_GAP_S), perf_counter() + PERIODIC_WAIT_S, self.sends)
        t_start_s = perf_counter()
        try:
            job()
        finally:
            self.cost_s = perf_counter() - t_start_s
