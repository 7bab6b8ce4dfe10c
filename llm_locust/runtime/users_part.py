"""The part of llm-locust's state in a process that runs users (`UsersPart`: local runner, worker) — all a user
reaches (`llm_client.UserContext`), never the lead's part (`lead.Lead`).

Its users' pacer, the model they request, the replicas they share, the shared prefix pool, the timeout watchdog (their
requests in flight), back-off accounting, the run's clock (`load.clock.RunClock`: the master's wall clock, on which
every time that leaves the process is read; a worker learns its offset by `clock_sync`); its listeners take each
finished request's record into the `MetricsRecorder` (and --requests-jsonl's lines) and count the requests the test's
end cut (`metrics.unfinished`). Worker: its delta, requests in flight, requests cut, low-water mark, saturation sample,
request lines and clock offset ride on Locust's stats report (`runner_ops` keys); it follows the master's plans (an
open loop's once its clock's offset is measured: its origin is the master's) and sends a last report when it quits
mid-test. A local runner's `lead.Lead` reads the same figures in-process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gevent
import gevent.lock
from gevent import GreenletExit
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import STATE_RUNNING, STATE_SPAWNING

from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.load.clock import RunClock
from llm_locust.load.pacing import Plan
from llm_locust.metrics.length_buckets import add_prompt_group
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.recorder import MetricsRecorder, ProcessLatency, delta_to_wire
from llm_locust.metrics.unfinished import Unfinished, unfinished_of
from llm_locust.results.request_lines import RequestLines
from llm_locust.runtime.gc_policy import RunCollector
from llm_locust.runtime.pacer import Pacer, Periodic
from llm_locust.runtime.route import RECORD_KEY
from llm_locust.runtime.runner_ops import (
    CLOCK_KEY,
    IN_FLIGHT_KEY,
    INTERRUPTED_MESSAGE,
    LOW_WATER_KEY,
    QUEUE_DELAY_KEY,
    REQUEST_LINES_DROPPED_KEY,
    REQUEST_LINES_KEY,
    SATURATION_KEY,
    TOKENS_KEY,
    UNFINISHED_KEY,
    WIRE_KEY,
    report_now,
    stop_test,
)
from llm_locust.runtime.saturation import LoopMonitor
from llm_locust.runtime.secret_wire import refuse
from llm_locust.runtime.shared import Shared
from llm_locust.runtime.token_keeper import TokenKeeper
from llm_locust.transport.auth import RequestAuth
from llm_locust.transport.replicas import ReplicaSet
from llm_locust.transport.timeouts import TimeoutWatchdog
from llm_locust.transport.tokens import token_source
from llm_locust.workload.builder import prefix_pool
from llm_locust.workload.prefix_pool import PrefixPool
from llm_locust.workload.traces import Trace

logger = logging.getLogger("llm_locust")

STOP_WAIT_S = 10.0
"""After a user error, how long users wait to be stopped by the runner before stopping themselves."""
DONE_LOOK_S = 0.1
"""Worker: how often it looks whether its share of the test is done (`UsersPart._report_when_done`)."""
HOLD_AHEAD_S = 0.1
"""A graceful stop (Locust's --stop-timeout S): sends are held this long before the runner kills the users still in a
task, so that every request the kill cuts was in flight when they were held (`UsersPart.hold_if_stopping`)."""


class UsersPart:
    """llm-locust's state for the users of one process (see the module docstring); fresh per test (`start_test`)."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._model_lock = gevent.lock.Semaphore()
        self.clock = RunClock()  # the master's wall clock (a worker's offset: `clock_sync`)
        self._clock_ready = shared.leads  # False on a worker until its offset is measured (`clock_measured`)
        self._held_plan: Plan | None = None  # worker: an open-loop plan, held until then
        self.pacer = Pacer(clock=self.clock)
        self._report = Periodic()  # a worker's report to the master
        self.watchdog: TimeoutWatchdog | None = None
        self.monitor, self.collector = LoopMonitor(), RunCollector()
        self.tokens: TokenKeeper | None = None
        self._done_watch: gevent.Greenlet | None = None  # worker: `_report_when_done`, while a test runs
        self._reset()

    @property
    def settings(self) -> Settings:
        """The test's settings (rebuilt at each test's start)."""
        return self._shared.settings

    @property
    def trace(self) -> Trace | None:
        """The `--trace` replayed, else None."""
        return self._shared.trace

    @property
    def worker_index(self) -> int:
        """This process's index among the workers (0 on a local runner)."""
        return self._shared.worker_index

    def start_test(self) -> None:
        """A test starts (its settings rebuilt): fresh per-test state; the loop monitor and the run's garbage
        collector start; the bearer token fetched if the settings now ask for one (`start_auth`; refused: a worker
        refuses the test, a local runner stops it, exit code 2)."""
        try:
            self.start_auth()
        except ConfigError as e:
            environment = self._shared.environment
            if self._shared.leads:
                logger.error("%s", e)
                environment.process_exit_code = 2
                gevent.spawn(stop_test, environment)
            else:
                refuse(environment, environment.runner, str(e))
        self._reset()
        self.monitor.start()
        self.collector.start()
        if not self._shared.leads:
            self._stop_done_watch()
            self._done_watch = gevent.spawn(self._report_when_done)

    def _reset(self) -> None:
        """Fresh per-test state from the current settings (a worker may create its state after the test started:
        the pacer learns of an open loop here, before any user asks it for a ticket)."""
        settings = self.settings
        open_loop = bool(settings.load.trace or settings.load.request_rate or settings.load.sweep_rates)
        trace = self.trace
        self.pacer.use_trace(trace.due_s if trace is not None else (), open_loop)
        self.model = settings.endpoint.model
        self._model_error: str | None = None
        self.succeeded = False  # some request of this process succeeded in this test (`load.backoff`)
        self.recorder = MetricsRecorder(settings.output.interval_s, settings.objectives.slo)
        self.queue_delay = ProcessLatency("queue_delay")  # this process's own send error (open loop)
        self.prefix_pool: PrefixPool | None = prefix_pool(settings.workload)  # shared by this test's users
        self.pacer.sent = 0  # its plan stays: a worker may get the new test's plan before the test starts
        self.unfinished = Unfinished()  # requests the test's end cut
        self.stopping = False  # the test is stopping its users: no request is sent any more (`hold_if_stopping`)
        self._stopping: tuple[list[RequestRecord], float] | None = None  # in flight then, and when
        self._cut: list[tuple[RequestRecord, float]] = []  # in flight when the runner stopped their user, and when
        self._hold_timer: gevent.Greenlet | None = None  # a graceful stop: when sends are held
        self._unfinished_unsent = False  # not yet reported (to the master, on a worker)
        if self.watchdog is not None:
            self.watchdog.stop()
        self.watchdog = TimeoutWatchdog(
            settings.timeouts.read_timeout_s,
            settings.timeouts.request_timeout_s,
            settings.timeouts.first_token_timeout_s,
        )
        self._replica_sets: dict[str, ReplicaSet] = {}
        output = settings.output
        self.request_lines = (  # --requests-jsonl: this process's requests' lines
            RequestLines(output.requests_sample, settings.workload.seed, self.worker_index, run_clock=self.clock)
            if output.requests_jsonl
            else None
        )

    def start_auth(self) -> None:
        """Fetch this process's first bearer token with its own credentials and keep it fresh (`TokenKeeper`), when the
        settings ask for one (`EndpointSettings.token_flow`) and it is not kept yet; ConfigError, one line naming what
        to fix, when the credentials are missing or refused."""
        point = self.settings.endpoint
        if self.tokens is not None and self.tokens.flow == point.token_flow:
            return
        self.stop_auth()
        if point.token_flow:
            workspace = self._shared.environment.host or ""
            fetch = token_source(point.token_flow, workspace, point.ca_bundle or not point.insecure)
            keeper = TokenKeeper(point.token_flow, fetch)
            keeper.start()
            self.tokens = keeper

    def stop_auth(self, **_: Any) -> None:
        """Stop refreshing the bearer token (the process quits, or a new test needs another flow or none)."""
        if self.tokens is not None:
            self.tokens.stop()
            self.tokens = None

    def token_counts(self) -> dict[str, object]:
        """This process's OAuth flow, its token refreshes and failed refresh attempts (summary.json `auth`)."""
        tokens = self.tokens
        assert tokens is not None
        return {"flow": tokens.flow, "refreshes": tokens.refreshes, "refresh_failures": tokens.refresh_failures}

    @property
    def request_auth(self) -> RequestAuth | None:
        """What computes each request's auth headers as it is sent (the current bearer token), or None."""
        return self.tokens.auth if self.tokens is not None else None

    @property
    def in_flight(self) -> int:
        """This process's requests in flight now."""
        return self.watchdog.in_flight if self.watchdog is not None else 0

    def replicas(self, host: str) -> ReplicaSet:
        """The replicas of `host` (a user's --host) and this process's pick among them, shared by its users."""
        replica_set = self._replica_sets.get(host)
        if replica_set is None:
            replica_set = self._replica_sets[host] = ReplicaSet(host, self.settings.endpoint.balance, self.worker_index)
        return replica_set

    def resolve_model(self, fetch: Callable[[], str]) -> str:
        """The model to request: `fetch()` it once per process; on failure stop the user (and, in a process that
        leads the run, the test)."""
        leads = self._shared.leads
        with self._model_lock:
            if not self.model and self._model_error is None:
                try:
                    self.model = fetch()
                    logger.info("model: %s (first of /v1/models)", self.model)
                except ConfigError as e:
                    self._model_error = str(e)
                    logger.error("%s", e)
                    environment = self._shared.environment
                    environment.process_exit_code = 2
                    if leads:  # nothing can run without a model: end the test now
                        gevent.spawn(stop_test, environment)
        if self._model_error is not None:
            if leads:  # `stop_test` is stopping the test: let the runner stop this user
                gevent.sleep(STOP_WAIT_S)  # (a user that ends itself meanwhile makes Locust log an error)
            raise StopUser()
        return self.model

    def back_off(self, pause_s: float, record: RequestRecord) -> None:
        """Pause the calling user `pause_s` seconds after its failed request `record` (`load.backoff`), and count the
        time it paused — the part it did when the runner stops it meanwhile — in the metrics."""
        if pause_s <= 0:
            return
        t0_s = time.perf_counter()
        try:
            gevent.sleep(pause_s)
        finally:
            self.recorder.paused(time.perf_counter() - t0_s, self.clock.now_s(), record.step, record.measured)

    # -- listeners (registered by the role: `state.LocalRole`, `state.WorkerRole`) ----------------------------
    def _on_request(self, context: dict[str, Any] | None = None, **_: Any) -> None:
        """Take the record of a finished LLM request into the metrics."""
        record: RequestRecord | None = (context or {}).get(RECORD_KEY)
        if record is not None:
            if record.ok:
                self.succeeded = True
            if self.settings.prompt_buckets:
                add_prompt_group(record)
            now_s = self.clock.now_s()
            self.recorder.record(record, now_s, now_s - (time.perf_counter() - record.t_send))
            self.queue_delay.add(record)
            if self.request_lines is not None:
                self.request_lines.add(record)

    def hold_if_stopping(self, arrival: bool = False) -> None:
        """Called by a user right before it sends a request: once the test is stopping its users, none is sent — the
        user waits here for the runner to stop it (its kill ends the wait), `STOP_WAIT_S` at most, then stops itself.
        So every request the server gets is either in flight when sends are held, or finishes: counted (`unfinished`
        for those the stop cuts). `arrival`: a task's first request — in a graceful stop none begins (Locust lets a
        user end its task; one it killed in its wait may run once more, its wait just over): the user stops at once."""
        if arrival and self._hold_timer is not None:
            raise StopUser()
        if self.stopping:
            gevent.sleep(STOP_WAIT_S)
            raise StopUser()

    @contextmanager
    def cutting(self, record: RequestRecord) -> Iterator[None]:
        """A request in flight (`record`): when the runner stops its user meanwhile (the kill ending a graceful stop,
        a ramp-down), the stop cut it — in `unfinished` at the test's end, with those in flight when sends were held."""
        try:
            yield
        except GreenletExit:
            self._cut.append((record, time.perf_counter()))
            raise

    def _on_users_stopping(self, environment: Environment, **_: Any) -> None:
        """The test begins to stop its users: hold every send from now on (`hold_if_stopping`) and note the requests
        in flight — with Locust's --stop-timeout S, whose users end their task first, `HOLD_AHEAD_S` before the runner
        kills those still in one."""
        grace_s = environment.stop_timeout or 0.0
        if grace_s > HOLD_AHEAD_S:
            self._hold_timer = gevent.spawn_later(grace_s - HOLD_AHEAD_S, self._hold_sends)
        else:
            self._hold_sends()

    def _hold_sends(self) -> None:
        """No request is sent from now on; note those in flight now (the stop cuts those that never finish)."""
        self.stopping = True
        if self.watchdog is not None:
            self._stopping = (self.watchdog.records(), time.perf_counter())

    def _on_users_stopped(self, **_: Any) -> None:
        """The test is over, the garbage collector back to automatic; count the requests its end cut (in flight when
        sends were held or their user was stopped, never finished; a worker reports them next)."""
        self.collector.stop()
        self._stop_done_watch()
        if self._hold_timer is not None:  # every user ended its task within the grace
            self._hold_timer.kill(block=False)
            self._hold_timer, self.stopping = None, True
        if self._stopping is not None or self._cut:
            held, t_held_s = self._stopping or ([], 0.0)
            self.unfinished = unfinished_of(held, t_held_s)
            for record, t_cut_s in self._cut:  # their user stopped before sends were held (a kill, a ramp-down)
                if not any(record is other for other in held):
                    self.unfinished = self.unfinished.merge(unfinished_of([record], t_cut_s))
            self._stopping, self._cut = None, []
        self._unfinished_unsent = True  # a worker's next report is its last of the test (the master waits for it)

    # -- worker --------------------------------------------------------------------------
    def _report_when_done(self) -> None:
        """Worker, while a test runs: report at once when this process's share of it is done — its plan gives it no
        request more (`Pacer.done`: its quota used, an open loop's arrivals all sent) and none was in flight at two
        looks in a row (the last request's record is taken after it left the watchdog) — instead of at Locust's next
        report, up to `WORKER_REPORT_INTERVAL` later: the master ends a run at its limit (`--max-requests`, the
        trace's end) from the counts its workers reported. Once per plan and count of requests sent."""
        reported: tuple[Plan, int] | None = None
        looks = 0
        while True:
            gevent.sleep(DONE_LOOK_S)
            pacer = self.pacer
            done = pacer.done and self.in_flight == 0 and (pacer.plan, pacer.sent) != reported
            looks = looks + 1 if done else 0
            if looks >= 2:
                reported, looks = (pacer.plan, pacer.sent), 0
                report_now(self._shared.environment.runner)

    def _stop_done_watch(self) -> None:
        if self._done_watch is not None:
            self._done_watch.kill(block=False)
            self._done_watch = None

    def _on_report_to_master(self, client_id: str, data: dict[str, Any]) -> None:
        """Worker: attach the windows filled since the last report, the requests in flight, and once after the test
        stopped its users, the requests its end cut; in a gap between an open loop's sends (`pacer.Periodic`)."""
        self._report.run(lambda: self._attach_report(data))

    def _attach_report(self, data: dict[str, Any]) -> None:
        delta = self.recorder.take_delta()
        if delta:
            data[WIRE_KEY] = delta_to_wire(delta)
            delta.release()
        if self.watchdog is not None:
            data[IN_FLIGHT_KEY] = self.watchdog.in_flight
        if self._unfinished_unsent:
            data[UNFINISHED_KEY] = self.unfinished.as_dict()
            self._unfinished_unsent = False
        if self.pacer.plan.open_loop:
            data[LOW_WATER_KEY] = self.pacer.low_water
        data[SATURATION_KEY] = self.monitor.take()
        if self.tokens is not None:
            data[TOKENS_KEY] = self.token_counts()
        if self.clock.offset is not None:
            data[CLOCK_KEY] = self.clock.offset.to_wire()
        if self.queue_delay.hist.get_total_count():
            data[QUEUE_DELAY_KEY] = self.queue_delay.distribution_ms()
        if self.request_lines is not None:
            lines, dropped = self.request_lines.take()
            if lines or dropped:
                data[REQUEST_LINES_KEY] = lines
                data[REQUEST_LINES_DROPPED_KEY] = dropped

    def _on_plan(self, environment: Environment, msg: Any, **_: Any) -> None:
        """Worker: the master's plan for this process (step, rate share, quota); an open loop's is held until this
        process's clock offset is measured (its origin is an epoch second of the master's clock: `clock_measured`)."""
        plan = Plan.from_wire(msg.data)
        if plan.assignment is not None and not self._clock_ready:
            self._held_plan = plan
            return
        self._held_plan = None
        self.pacer.apply(plan)

    def clock_measured(self) -> None:
        """Worker: the clock's offset is measured (`clock_sync`, again after each later round trip): follow the
        open-loop plan held meanwhile, if any; a running sequence's origin follows the offset."""
        self._clock_ready = True
        plan, self._held_plan = self._held_plan, None
        if plan is not None:
            self.pacer.apply(plan)
        else:
            self.pacer.follow_clock()

    def _on_worker_quitting(self, environment: Environment, **_: Any) -> None:
        """Worker stopped mid-test (SIGTERM, Ctrl-C): send what it measured before it says goodbye.

        Locust's own "quit" message to the master is sent by a listener registered before this
        one; `quitting` fires in reverse order, so this final report goes out first.
        """
        runner = environment.runner
        if runner is not None and runner.state in (STATE_RUNNING, STATE_SPAWNING):
            self.pacer.close()  # its low-water mark is final: the master hands the rest of its share over
            try:
                report_now(runner)
                runner.send_message(INTERRUPTED_MESSAGE)
            except Exception as e:  # the master may be gone already: nothing more to save
                logger.warning("could not send the last measurements to the master: %s", e)
