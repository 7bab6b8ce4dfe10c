"""llm-locust's state in one Locust process: settings, metrics, pacing, and the listeners of Locust's events.

Every process: the test's settings and metrics. Processes running users: each finished request's record into the
`MetricsRecorder`, and the requests the test's end cut (`metrics.unfinished`). Worker: its delta, requests in flight,
requests cut and saturation sample ride on Locust's stats report (`runner_ops` keys). Master: merges those into
`RunMetrics`. Master/local: the `ResultsWriter` of the test.
The process's `Role` (`LocalRole`, `MasterRole`, `WorkerRole`) registers only the listeners of its own part.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
import gevent.lock
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import (
    STATE_MISSING,
    STATE_RUNNING,
    STATE_SPAWNING,
    WORKER_REPORT_INTERVAL,
    MasterRunner,
    WorkerRunner,
)

from llm_locust import redact
from llm_locust.config.settings import Settings, keep_secrets, secret_options
from llm_locust.errors import ConfigError
from llm_locust.export.live import LiveGauges
from llm_locust.load.arrivals import StepSpan
from llm_locust.load.pacing import Plan
from llm_locust.metrics.histograms import MetricsRecorder, RunMetrics, delta_from_wire, delta_to_wire
from llm_locust.metrics.length_buckets import add_prompt_group
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.unfinished import Unfinished, unfinished_of
from llm_locust.results.request_lines import RequestLines
from llm_locust.runtime.control import PLAN_MESSAGE, LoadController
from llm_locust.runtime.gc_policy import RunCollector, freeze_heap
from llm_locust.runtime.interrupt import SignalWatch
from llm_locust.runtime.live_export import LiveExport
from llm_locust.runtime.master_watch import watch_master
from llm_locust.runtime.pacer import Pacer
from llm_locust.runtime.results_folder import folder_for
from llm_locust.runtime.results_writer import ResultsWriter, WriterInputs
from llm_locust.runtime.route import RECORD_KEY
from llm_locust.runtime.runner_ops import (
    IN_FLIGHT_KEY,
    INTERRUPTED_MESSAGE,
    LOW_WATER_KEY,
    REQUEST_LINES_DROPPED_KEY,
    REQUEST_LINES_KEY,
    SATURATION_KEY,
    UNFINISHED_KEY,
    WIRE_KEY,
    collect_last_reports,
    redact_exceptions,
    stop_test,
)
from llm_locust.runtime.saturation import LoopMonitor, SaturationTracker
from llm_locust.runtime.secret_wire import master_sends_no_secret, worker_takes_own_secrets
from llm_locust.transport.replicas import ReplicaSet, without_api_root
from llm_locust.transport.timeouts import TimeoutWatchdog
from llm_locust.transport.tls import check_connection
from llm_locust.workload.builder import prefix_pool
from llm_locust.workload.traces import Trace, load_trace

logger = logging.getLogger("llm_locust")

STOP_WAIT_S = 10.0
"""After a user error, how long users wait to be stopped by the runner before stopping themselves."""


class Role:
    """What one Locust process is in a run, and the Locust listeners only that part needs (`register`)."""

    name = ""
    runs_users = True  # records its users' requests and paces them
    leads = True  # controls the load, writes the results, watches the signals

    def register(self, state: RunState, events: Any, runner: Any) -> None:
        """Add `state`'s listeners of this role to Locust's `events` (and messages to `runner`)."""
        events.test_start.add_listener(state._on_test_start)


class LocalRole(Role):
    """A local runner: runs the users and leads the run."""

    name = "local"

    def register(self, state: RunState, events: Any, runner: Any) -> None:
        super().register(state, events, runner)
        events.request.add_listener(state._on_request)
        events.test_stopping.add_listener(state._on_users_stopping)
        events.test_stop.add_listener(state._on_users_stopped)
        events.test_stop.add_listener(state._on_test_stop)
        events.quitting.add_listener(state._on_quitting)


class WorkerRole(Role):
    """A worker: runs its users, reports to the master, follows the master's plans, quits when the master is gone."""

    name = "worker"
    leads = False

    def register(self, state: RunState, events: Any, runner: Any) -> None:
        super().register(state, events, runner)
        events.request.add_listener(state._on_request)
        events.test_stopping.add_listener(state._on_users_stopping)
        events.test_stop.add_listener(state._on_users_stopped)
        events.report_to_master.add_listener(state._on_report_to_master)
        runner.register_message(PLAN_MESSAGE, state._on_plan)
        events.quitting.add_listener(state._on_worker_quitting)
        watch_master(state.environment, runner)
        worker_takes_own_secrets(state, runner)


class MasterRole(Role):
    """The master: runs no user; merges the workers' reports and leads the run."""

    name = "master"
    runs_users = False

    def register(self, state: RunState, events: Any, runner: Any) -> None:
        super().register(state, events, runner)
        events.test_stop.add_listener(state._on_test_stop)
        events.quitting.add_listener(state._on_quitting)
        events.worker_report.add_listener(state._on_worker_report)
        runner.register_message(INTERRUPTED_MESSAGE, state._on_worker_interrupted)
        master_sends_no_secret(state, runner)


def role_of(runner: Any) -> Role:
    """The role of the process whose runner is `runner`."""
    if isinstance(runner, MasterRunner):
        return MasterRole()
    return WorkerRole() if isinstance(runner, WorkerRunner) else LocalRole()


@dataclass(frozen=True)
class LiveSnapshot:
    """What the web UI's live view reads of a run (`RunState.live`): a snapshot, never the state itself."""

    results_dir: Path | None  # None before the first test
    summary: dict[str, Any] | None  # summary.json once written (`final`), else the summary so far
    final: bool
    history: tuple[dict[str, Any], ...]  # the time series' last rows, then the open windows ("partial")
    in_flight: int
    interval_s: float
    settings: dict[str, Any]  # `Settings.public()`
    spans: tuple[StepSpan, ...]  # sweep steps so far


class RunState:
    """llm-locust's state in one Locust process, for one environment."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.settings = Settings.from_options(environment.parsed_options)  # registers the secrets
        self._startup_secrets = secret_options(environment.parsed_options)  # command line or config file
        runner = environment.runner
        self.role = role_of(runner)
        self.is_worker = not self.role.leads
        self.is_master = not self.role.runs_users
        self._said_api_root = False
        self._base_host(environment)
        self._host = environment.host  # of the last test (or given at start-up), credentials included
        proxy = check_connection(environment.host, self.settings.endpoint)
        redact.install_log_filter()
        if proxy is not None and not self.is_worker:
            logger.info("connecting through the proxy %s", proxy.shown)
        if self.settings.endpoint.insecure and not self.is_worker:
            logger.warning("--insecure: TLS certificates and host names are not verified (the API key goes to "
                           "whichever server answers)")  # fmt: skip
        self.signals = SignalWatch()
        if not self.is_worker:
            self.signals.start()
            if runner is not None:
                redact_exceptions(runner)
        self._model_lock = gevent.lock.Semaphore()
        self.trace = self._load_trace()
        self.pacer = Pacer()
        self.control: LoadController | None = None  # master / local: steps, plans, limits
        self._results: ResultsWriter | None = None
        self.watchdog: TimeoutWatchdog | None = None
        self._in_flight_by_worker: dict[str, int] = {}
        self.monitor = None if self.is_master else LoopMonitor()  # processes running users
        self.collector = None if self.is_master else RunCollector()
        self.saturation = SaturationTracker()  # master / local: every process's samples
        self._reset()
        export, otel = self.settings.export, bool(getattr(environment.parsed_options, "otel", False))
        self.export = LiveExport(export, otel) if (export.prometheus_port or otel) and not self.is_worker else None
        self.role.register(self, environment.events, runner)

    # -- every process ------------------------------------------------------------------
    def _on_test_start(self, environment: Environment, **_: Any) -> None:
        """Rebuild the settings from the (now complete) options and reset the metrics."""
        if self._results is not None:  # a previous test of this process (web UI) not yet closed
            self._results.close()
        options = environment.parsed_options
        if options is not None:  # the web UI form's secret fields left empty, its host as shown
            keep_secrets(options, self._startup_secrets)
            host = self._host
            if host and environment.host == redact.redact(host) != host:
                environment.host = options.host = host
        self._base_host(environment)
        self._host = environment.host
        try:
            old, self.settings = self.settings, Settings.from_options(environment.parsed_options)
            if _trace_of(old) != _trace_of(self.settings):  # a worker learns the options from the master now
                self.trace = self._load_trace()
        except ConfigError as e:  # options changed in the web UI: keep the old ones, say why
            logger.error("%s (keeping the previous settings)", e)
        self._reset()
        if self.monitor is not None:
            self.monitor.start()
        if self.collector is not None:
            self.collector.start()
        else:
            freeze_heap()
        if not self.is_worker:
            self.control = LoadController(
                environment, self.settings, None if self.is_master else self.pacer, self.trace
            )
            steps = self.settings.load.steps
            if steps and environment.shape_class is not None:  # the sweep starts now
                self.control.enter_step(steps[0])
            self.control.update()
            sources = WriterInputs(
                environment=environment,
                settings=self.settings,
                is_master=self.is_master,
                run=self.run,
                window_start=self.recorder.window_start,
                control=self.control,
                saturation=self.saturation,
                requests_by_worker=self.requests_by_worker,
                unfinished=self.unfinished_requests,
                merge_local=self.merge_local,
                sample_local=self.sample_local,
                local_lines=self.request_lines,
            )
            folder = folder_for(environment, Path(self.settings.output.results_dir))
            self._results = ResultsWriter(sources, folder)
            if self.export is not None:
                run = folder.name
                self.export.start_test(run, functools.partial(self._live_gauges, run, self._results))

    def _base_host(self, environment: Environment) -> None:
        """A --host ending in /v1 (the OpenAI SDK's base_url) is accepted: the base URL is what precedes it (the API
        paths add /v1), said once (on the master or local runner; a worker gets the master's host)."""
        host = environment.host
        if not host or self.settings.endpoint.provider in ("azure", "databricks"):  # their paths do not start with /v1
            return
        base = without_api_root(host)
        if base != host:
            environment.host = base
            if environment.parsed_options is not None:
                environment.parsed_options.host = base
            if not self.is_worker and not self._said_api_root:
                self._said_api_root = True
                logger.info("--host %s: the base URL is %s (llm-locust's API paths start with /v1)",
                            redact.redact(host), redact.redact(base))  # fmt: skip

    def _on_users_stopping(self, **_: Any) -> None:
        """Processes running users: the test begins to stop its users; note the requests in flight now."""
        if self.watchdog is not None:
            self._stopping = (self.watchdog.records(), time.perf_counter())

    def _on_users_stopped(self, **_: Any) -> None:
        """Processes running users: the test is over, the garbage collector back to automatic; count the requests its
        end cut (in flight when it began to stop, never finished; a worker reports them next)."""
        if self.collector is not None:
            self.collector.stop()
        if self._stopping is not None:
            self.unfinished = unfinished_of(*self._stopping)
            self._stopping = None
            self._unfinished_unsent = self.is_worker

    def _reset(self) -> None:
        """Fresh per-test state from the current settings (a worker may create its state after the test started:
        the pacer learns of an open loop here, before any user asks it for a ticket)."""
        settings = self.settings
        open_loop = bool(settings.load.trace or settings.load.request_rate or settings.load.sweep_rates)
        self.pacer.use_trace(self.trace.due_s if self.trace is not None else (), open_loop)
        self.model = self.settings.endpoint.model
        self._model_error: str | None = None
        self.succeeded = False  # some request of this process succeeded in this test (`load.backoff`)
        self.recorder = MetricsRecorder(self.settings.output.interval_s, self.settings.objectives.slo)
        self.prefix_pool = prefix_pool(self.settings.workload)  # the users of this test share it (and its reuse count)
        self.pacer.sent = 0  # its plan stays: a worker may get the new test's plan before the test starts
        self.run = RunMetrics()
        self.requests_by_worker: Counter[str] = Counter()  # master: finished requests each worker reported
        self.unfinished = Unfinished()  # requests the test's end cut: this process's, or on a master its workers'
        self._stopping: tuple[list[RequestRecord], float] | None = None  # in flight as the stop began, and when
        self._unfinished_unsent = False  # worker: not yet reported to the master
        self.saturation = SaturationTracker()
        if self.watchdog is not None:
            self.watchdog.stop()
        self.watchdog = TimeoutWatchdog(
            settings.timeouts.read_timeout_s,
            settings.timeouts.request_timeout_s,
            settings.timeouts.first_token_timeout_s,
        )
        self._replica_sets: dict[str, ReplicaSet] = {}
        output = settings.output
        self.request_lines = (  # --requests-jsonl, processes running users: their requests' lines
            RequestLines(
                output.requests_sample, settings.workload.seed, getattr(self.environment.runner, "worker_index", 0)
            )
            if output.requests_jsonl and self.role.runs_users
            else None
        )

    def replicas(self, host: str) -> ReplicaSet:
        """The replicas of `host` (a user's --host) and this process's pick among them, shared by its users."""
        replica_set = self._replica_sets.get(host)
        if replica_set is None:
            start = getattr(self.environment.runner, "worker_index", 0)
            replica_set = self._replica_sets[host] = ReplicaSet(host, self.settings.endpoint.balance, start)
        return replica_set

    def _load_trace(self) -> Trace | None:
        """`--trace` read and selected (every process reads the same file: workers build the requests of their
        share, the master the due times it assigns); None without a trace."""
        settings = self.settings
        if not settings.load.trace:
            return None
        trace = load_trace(settings.load.trace, settings.load.trace_format, settings.load.trace_window())
        if not self.is_worker:
            logger.info("trace %s: %d requests over %.1f s (speed-up %g)", redact.redact(settings.load.trace),
                        len(trace.requests), trace.due_s[-1], settings.load.trace_speedup)  # fmt: skip
        return trace

    def resolve_model(self, fetch: Callable[[], str]) -> str:
        """The model to request: `fetch()` it once per process; on failure stop the user."""
        with self._model_lock:
            if not self.model and self._model_error is None:
                try:
                    self.model = fetch()
                    logger.info("model: %s (first of /v1/models)", self.model)
                except ConfigError as e:
                    self._model_error = str(e)
                    logger.error("%s", e)
                    self.environment.process_exit_code = 2
                    if not self.is_worker:  # nothing can run without a model: end the test now
                        gevent.spawn(stop_test, self.environment)
        if self._model_error is not None:
            if not self.is_worker:  # `stop_test` is stopping the test: let the runner stop this user
                gevent.sleep(STOP_WAIT_S)  # (a user that ends itself meanwhile makes Locust log an error)
            raise StopUser()
        return self.model

    def live(self) -> LiveSnapshot:
        """A read-only snapshot of the current (or last) test for the web UI's live view."""
        writer = self._results
        control = self.control
        summary = None
        if writer is not None:  # while running: the summary so far, which is not a complete run yet
            summary = writer.final_summary or writer.summary(self.run, final=False)
        return LiveSnapshot(
            results_dir=None if writer is None else writer.results_dir,
            summary=summary,
            final=writer is not None and writer.final_summary is not None,
            history=() if writer is None else tuple(writer.recent_rows()),
            in_flight=self.in_flight,
            interval_s=self.settings.output.interval_s,
            settings=self.settings.public(),
            spans=tuple(control.spans) if control is not None else (),
        )

    def _live_gauges(self, run: str, writer: ResultsWriter) -> LiveGauges:
        """Master/local: the live export's sample of test `run`, whose results `writer` writes (closed, too: the last
        scrape after the end reads its last row) (`export.live.LiveGauges`)."""
        runner = self.environment.runner
        return LiveGauges(
            run=run,
            in_flight=self.in_flight,
            users=runner.user_count if runner is not None else 0,
            last_window=writer.history[-1] if writer.history else None,
            total=self.run.total,
        )

    def back_off(self, pause_s: float, record: RequestRecord) -> None:
        """Pause the calling user `pause_s` seconds after its failed request `record` (`load.backoff`), and count the
        time it paused — the part it did when the runner stops it meanwhile — in the metrics."""
        if pause_s <= 0:
            return
        t0_s = time.perf_counter()
        try:
            gevent.sleep(pause_s)
        finally:
            self.recorder.paused(time.perf_counter() - t0_s, time.time(), record.step, record.measured)

    @property
    def in_flight(self) -> int:
        """Requests in flight now: this process's, or on a master the sum of its workers' last reports."""
        if not self.is_master:
            return self.watchdog.in_flight if self.watchdog is not None else 0
        live = {w.id for w in self.environment.runner.clients.values() if w.state != STATE_MISSING}
        return sum(n for worker, n in self._in_flight_by_worker.items() if worker in live)

    # -- processes that run users -------------------------------------------------------
    def _on_request(self, context: dict[str, Any] | None = None, **_: Any) -> None:
        """Take the record of a finished LLM request into the metrics."""
        record: RequestRecord | None = (context or {}).get(RECORD_KEY)
        if record is not None:
            if record.ok:
                self.succeeded = True
            if self.settings.prompt_buckets:
                add_prompt_group(record)
            self.recorder.record(record, time.time())
            if self.request_lines is not None:
                self.request_lines.add(record)

    def _on_report_to_master(self, client_id: str, data: dict[str, Any]) -> None:
        """Worker: attach the windows filled since the last report, the requests in flight, and once after the test
        stopped its users, the requests its end cut."""
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
        if self.monitor is not None:
            data[SATURATION_KEY] = self.monitor.take()
        if self.request_lines is not None:
            lines, dropped = self.request_lines.take()
            if lines or dropped:
                data[REQUEST_LINES_KEY] = lines
                data[REQUEST_LINES_DROPPED_KEY] = dropped

    def _on_plan(self, environment: Environment, msg: Any, **_: Any) -> None:
        """Worker: the master's plan for this process (step, rate share, quota)."""
        self.pacer.apply(Plan.from_wire(msg.data))

    def _on_worker_quitting(self, environment: Environment, **_: Any) -> None:
        """Worker stopped mid-test (SIGTERM, Ctrl-C): send what it measured before it says goodbye.

        Locust's own "quit" message to the master is sent by a listener registered before this
        one; `quitting` fires in reverse order, so this final report goes out first.
        """
        runner = environment.runner
        if runner is not None and runner.state in (STATE_RUNNING, STATE_SPAWNING):
            self.pacer.close()  # its low-water mark is final: the master hands the rest of its share over
            try:
                runner._send_stats()  # fires report_to_master: our delta rides along
                runner.send_message(INTERRUPTED_MESSAGE)
            except Exception as e:  # the master may be gone already: nothing more to save
                logger.warning("could not send the last measurements to the master: %s", e)

    # -- master -------------------------------------------------------------------------
    def _on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        """Master: merge a worker's delta; note its requests in flight; add up the requests the test's end cut."""
        wire = data.get(WIRE_KEY)
        if wire:
            delta = delta_from_wire(wire)
            self.requests_by_worker[str(client_id)] += delta.requests
            self.run.merge_delta(delta)
            if self.export is not None:
                self.export.add(delta)
        self._in_flight_by_worker[client_id] = data.get(IN_FLIGHT_KEY, 0)
        if UNFINISHED_KEY in data:
            self.unfinished = self.unfinished.merge(Unfinished.from_dict(data[UNFINISHED_KEY]))
        if LOW_WATER_KEY in data and self.control is not None:
            self.control.note_low_water(str(client_id), data[LOW_WATER_KEY])
        self.saturation.add(str(client_id), data.get(SATURATION_KEY), time.time())
        if REQUEST_LINES_KEY in data and self._results is not None:
            self._results.add_request_lines(data[REQUEST_LINES_KEY], data.get(REQUEST_LINES_DROPPED_KEY, 0))

    def _on_worker_interrupted(self, environment: Environment, msg: Any, **_: Any) -> None:
        """Master: a worker quit in the middle of the test; the run is incomplete."""
        if self._results is not None and self._results.t_stop is None:
            self._results.worker_goodbyes.setdefault(str(msg.node_id), time.time())

    # -- master or local ----------------------------------------------------------------
    def unfinished_requests(self) -> Unfinished:
        """The requests the test's end cut: this process's users', or on a master those its workers reported."""
        return self.unfinished

    def merge_local(self) -> None:
        """Local runner: move this process's own delta into the run metrics."""
        if not self.is_master:
            delta = self.recorder.take_delta()
            if delta:
                self.run.merge_delta(delta)
                if self.export is not None:
                    self.export.add(delta)

    def sample_local(self) -> None:
        """Local runner: this process's CPU / event-loop lag sample into the saturation tracker,
        over intervals as long as a worker's (one late wake-up alone is no saturation)."""
        if self.monitor is not None and not self.is_worker and self.monitor.elapsed_s >= WORKER_REPORT_INTERVAL:
            self.saturation.add("local", self.monitor.take(), time.time())

    def _on_test_stop(self, environment: Environment, **_: Any) -> None:
        """Mark the end of the measurement; finalize once the workers' last reports are in.

        The environment's host is redacted until the next test (which puts it back): between
        tests it is only shown — Locust's --html report, its web UI — never used.
        """
        if environment.host:
            environment.host = redact.redact(environment.host)
        if self.control is not None:
            self.control.end_step()
        if self._results is not None:
            self._results.stop()

    def _on_quitting(self, environment: Environment, **_: Any) -> None:
        """Final results (the workers' last reports have arrived by now, unless interrupted).

        Quitting before the test stopped (SIGTERM, Ctrl-C during the test) marks the results
        incomplete. A run in which no request succeeded ends with a one-line diagnosis and a
        non-zero exit code (2 when the cause is in the command: host, key, model).
        """
        if self._results is not None:
            if self._results.t_stop is None:
                self._results.interrupt(self.signals.name)
                if self.is_master:
                    collect_last_reports(environment.runner)
            self._results.close()
            self._results = None
        if self.export is not None:
            if self.signals.name is None:  # interrupted: quit now, the orchestrator's grace period is short
                self.export.final_scrape()
            self.export.close()
        self.signals.stop()


def _trace_of(settings: Settings) -> tuple[object, ...]:
    """What decides the trace's requests and times."""
    return settings.load.trace, settings.load.trace_format, settings.load.trace_window()
