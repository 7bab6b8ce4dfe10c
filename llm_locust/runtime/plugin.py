"""Wires llm-locust into Locust's events: options, per-request metrics, worker→master, results.

A locustfile calls `install(events)` once. Then, in every Locust process:

- `init_command_line_parser`: our options (`settings.add_arguments`).
- `init`: a `RunState` for the environment; options validated (a bad one: one-line error,
  exit code 2).
- `test_start`: settings rebuilt (workers receive the master's options only now), metrics reset.
- `request` (processes running users): the HTTP request event carries the finished
  `RequestRecord` in its context; it goes into the `MetricsRecorder`. No extra request events
  are fired: Locust's request rate and failure ratio count real requests only (TTFT, TPOT, ITL
  are in the web UI's LLM view, `webui`, and the results folder).
- `report_to_master` (worker) / `worker_report` (master): histogram deltas and the number of
  requests in flight ride along with Locust's own stats reports; the master merges the deltas
  into `RunMetrics`.
- With a web UI (master / local): the LLM view is attached to it (`webui.attach`).
- A ticker greenlet (master / local) merges the local delta, samples users and workers, and
  writes each closed window of the time series.
- `test_stop` + a grace period, and `quitting` (after the workers' last reports): summary.json
  written, summary table printed. While the test runs, summary.json is rewritten every
  `SNAPSHOT_S` marked "incomplete"; quitting before the test stopped (SIGTERM, Ctrl-C) or a
  worker quitting mid-test (it says so with `INTERRUPTED_MESSAGE` after a last report) leaves it
  "incomplete" too. A run in which nothing succeeded ends with a one-line diagnosis and a
  non-zero exit code. A master or local run stopped by SIGTERM / SIGINT says so (`run.interrupted`
  names the signal; verdict failed, exit code `EXIT_INTERRUPTED`); workers that quit with it are
  not "lost".
- Secrets: registered with `redact` where the settings are built (`settings.register_secrets`);
  failure messages are redacted when a request record fails, exception texts when the runner
  collects them, log records by a filter.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import gevent.lock
import locust
from locust.env import Environment
from locust.exception import StopUser
from locust.rpc import Message
from locust.runners import (
    STATE_MISSING,
    STATE_RUNNING,
    STATE_SPAWNING,
    WORKER_REPORT_INTERVAL,
    MasterRunner,
    WorkerRunner,
)
from locust.stats import StatsError

from llm_locust import __version__, redact
from llm_locust.config.settings import Settings, add_arguments, check_host, keep_secrets, secret_options
from llm_locust.errors import ConfigError
from llm_locust.load.control import PLAN_MESSAGE, LoadController
from llm_locust.load.pacing import Pacer, Plan
from llm_locust.metrics.histograms import MetricsRecorder, RunMetrics, WindowMetrics, delta_from_wire, delta_to_wire
from llm_locust.metrics.record import RequestRecord
from llm_locust.metrics.slo import evaluate
from llm_locust.results.files import (
    USER_ERROR_CAUSES,
    TimeseriesWriter,
    diagnose,
    iso_time,
    metric_stats,
    step_summary,
    summary_table,
    throttling,
    throughput,
    token_accounting,
    write_histograms,
    write_summary,
)
from llm_locust.runtime.gc_policy import RunCollector, freeze_heap
from llm_locust.runtime.interrupt import SignalWatch
from llm_locust.runtime.monitor import RunMonitor
from llm_locust.runtime.saturation import LoopMonitor, SaturationTracker
from llm_locust.scrape.scraper import start_scraper
from llm_locust.transport.client import RECORD_KEY
from llm_locust.transport.timeouts import TimeoutWatchdog
from llm_locust.transport.tls import check_connection

logger = logging.getLogger("llm_locust")

INTERRUPTED_MESSAGE = "llm_locust_interrupted"
"""Worker → master: this worker is quitting while the test runs (its data after this is lost)."""
WIRE_KEY = "llm_locust"
"""Key of our delta in the data of Locust's worker stats report."""
IN_FLIGHT_KEY = "llm_locust_in_flight"
"""Key of the worker's number of requests in flight in its stats report."""
SATURATION_KEY = "llm_locust_saturation"
"""Key of the worker's CPU / event-loop lag sample (`LoopMonitor.take`) in its stats report."""
HISTORY_WINDOWS = 720
"""Closed time-series windows kept in memory for the live view (an hour at --interval-s 5)."""
TICK_S = 1.0
SCHEDULE_LAG_WARN_MS = 100.0
"""Open loop: a p90 client queue delay above this in a time window means the run fell behind."""
STOP_WAIT_S = 10.0
"""After a user error, how long users wait to be stopped by the runner before stopping themselves."""
SNAPSHOT_S = 5.0
"""While a test runs, summary.json is rewritten this often (seconds), marked "incomplete"."""
INTERRUPT_GRACE_S = 5.0
"""A worker that said goodbye this shortly (seconds) before the master was interrupted quit with
it (Ctrl-C reaches every process of the terminal): it is not counted as lost."""

_states: weakref.WeakKeyDictionary[Environment, RunState] = weakref.WeakKeyDictionary()
_installed: weakref.WeakSet[Any] = weakref.WeakSet()


def install(events: Any) -> None:
    """Register llm-locust's listeners on Locust's `events` (idempotent)."""
    if events in _installed:
        return
    _installed.add(events)
    events.init_command_line_parser.add_listener(add_arguments)
    events.init.add_listener(_on_init)


def run_state(environment: Environment) -> RunState:
    """The llm-locust state of `environment`; ConfigError if the locustfile did not install it.

    Created here when users come first: a worker can get its spawn message while it still waits
    for the master's ack, before Locust fires `init`.
    """
    state = _states.get(environment)
    if state is None:
        if environment.events not in _installed:
            raise ConfigError("llm-locust is not installed: call llm_locust.plugin.install(events) in the locustfile")
        state = _states[environment] = RunState(environment)
    return state


def _on_init(environment: Environment, runner: Any = None, web_ui: Any = None, **_: Any) -> None:
    """Create the run state (and the LLM view on a web UI); a bad option ends the process with a
    one-line error (exit 2)."""
    try:
        state = _states.get(environment) or RunState(environment)
        if state.settings.steps and environment.shape_class is None and not state.is_worker:
            raise ConfigError("--sweep-users / --sweep-rates need the sweep's load shape: run -f locustfiles/sweep.py")
        _states[environment] = state
    except ConfigError as e:
        logger.error("%s", e)
        sys.exit(2)
    if web_ui is not None:
        from llm_locust.runtime.webui import attach  # Flask and the page only where a web UI runs

        attach(web_ui, state)
        _hide_secret_defaults(web_ui)


def _hide_secret_defaults(web_ui: Any) -> None:
    """Keep secret option values (--api-key, --header) out of the web UI's page.

    Locust masks the input field of an `is_secret` option, but writes the value given on the
    command line or in a config file into the page as the field's default, readable by anyone
    who opens the UI. The default is blanked (and the page redacted: the host field shows URL
    credentials as [REDACTED], `webui`); a test started with a secret field left empty uses the
    value given at start-up, one started with the host as shown the host of the last test
    (`RunState._on_test_start`).
    """
    update = web_ui.update_template_args

    def update_without_secrets() -> None:
        update()
        for option in web_ui.template_args.get("extra_options", {}).values():
            if option.get("is_secret"):
                option["default_value"] = ""

    web_ui.update_template_args = update_without_secrets
    update_without_secrets()


class RunState:
    """llm-locust's state in one Locust process, for one environment."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.settings = Settings.from_options(environment.parsed_options)  # registers the secrets
        self._startup_secrets = secret_options(environment.parsed_options)  # command line or config file
        self._host = environment.host  # of the last test (or given at start-up), credentials included
        check_host(environment.host)
        proxy = check_connection(environment.host, self.settings)
        redact.install_log_filter()
        runner = environment.runner
        self.is_worker = isinstance(runner, WorkerRunner)
        self.is_master = isinstance(runner, MasterRunner)
        if proxy is not None and not self.is_worker:
            logger.info("connecting through the proxy %s", proxy.shown)
        if self.settings.insecure and not self.is_worker:
            logger.warning("--insecure: TLS certificates and host names are not verified (the API key goes to "
                           "whichever server answers)")  # fmt: skip
        self.signals = SignalWatch()
        if not self.is_worker:
            self.signals.start()
            if runner is not None:
                _redact_exceptions(runner)
        self._model_lock = gevent.lock.Semaphore()
        self.pacer = Pacer()
        self.control: LoadController | None = None  # master / local: steps, plans, limits
        self._results: ResultsWriter | None = None
        self.watchdog: TimeoutWatchdog | None = None
        self._in_flight_by_worker: dict[str, int] = {}
        self.monitor = None if self.is_master else LoopMonitor()  # processes running users
        self.collector = None if self.is_master else RunCollector()
        self.saturation = SaturationTracker()  # master / local: every process's samples
        self._reset()
        events = environment.events
        events.test_start.add_listener(self._on_test_start)
        if not self.is_master:
            events.request.add_listener(self._on_request)
            events.test_stop.add_listener(self._on_users_stopped)
        if self.is_worker:
            events.report_to_master.add_listener(self._on_report_to_master)
            runner.register_message(PLAN_MESSAGE, self._on_plan)
            events.quitting.add_listener(self._on_worker_quitting)
        else:
            events.test_stop.add_listener(self._on_test_stop)
            events.quitting.add_listener(self._on_quitting)
        if self.is_master:
            events.worker_report.add_listener(self._on_worker_report)
            runner.register_message(INTERRUPTED_MESSAGE, self._on_worker_interrupted)

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
            self._host = environment.host
        try:
            self.settings = Settings.from_options(environment.parsed_options)
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
            self.control = LoadController(environment, self.settings, None if self.is_master else self.pacer)
            steps = self.settings.steps
            if steps and environment.shape_class is not None:  # the sweep starts now
                self.control.enter_step(steps[0])
            self.control.update()
            self._results = ResultsWriter(self, Path(self.settings.results_dir))

    def _on_users_stopped(self, **_: Any) -> None:
        """Processes running users: the test is over, the garbage collector back to automatic."""
        if self.collector is not None:
            self.collector.stop()

    def _reset(self) -> None:
        """Fresh per-test state from the current settings."""
        self.model = self.settings.model
        self._model_error: str | None = None
        self.recorder = MetricsRecorder(self.settings.interval_s, self.settings.slo)
        self.pacer.sent = 0  # its plan stays: a worker may get the new test's plan before the test starts
        self.run = RunMetrics()
        self.requests_by_worker: Counter[str] = Counter()  # master: finished requests each worker reported
        self.saturation = SaturationTracker()
        if self.watchdog is not None:
            self.watchdog.stop()
        settings = self.settings
        self.watchdog = TimeoutWatchdog(
            settings.read_timeout_s, settings.request_timeout_s, settings.first_token_timeout_s
        )

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
                        gevent.spawn(_stop_test, self.environment)
        if self._model_error is not None:
            if not self.is_worker:  # `_stop_test` is stopping the test: let the runner stop this user
                gevent.sleep(STOP_WAIT_S)  # (a user that ends itself meanwhile makes Locust log an error)
            raise StopUser()
        return self.model

    @property
    def results(self) -> ResultsWriter | None:
        """Master / local: the results of the current (or last) test, None before the first."""
        return self._results

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
            self.recorder.record(record, time.time())

    def _on_report_to_master(self, client_id: str, data: dict[str, Any]) -> None:
        """Worker: attach the windows filled since the last report, and the requests in flight."""
        delta = self.recorder.take_delta()
        if delta:
            data[WIRE_KEY] = delta_to_wire(delta)
            for window in delta.values():
                window.release()
        if self.watchdog is not None:
            data[IN_FLIGHT_KEY] = self.watchdog.in_flight
        if self.monitor is not None:
            data[SATURATION_KEY] = self.monitor.take()

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
            try:
                runner._send_stats()  # fires report_to_master: our delta rides along
                runner.send_message(INTERRUPTED_MESSAGE)
            except Exception as e:  # the master may be gone already: nothing more to save
                logger.warning("could not send the last measurements to the master: %s", e)

    # -- master -------------------------------------------------------------------------
    def _on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        """Master: merge a worker's delta; note its requests in flight."""
        wire = data.get(WIRE_KEY)
        if wire:
            delta = delta_from_wire(wire)
            self.requests_by_worker[str(client_id)] += sum(w.requests_ok + w.requests_failed for w in delta.values())
            self.run.merge_delta(delta)
        self._in_flight_by_worker[client_id] = data.get(IN_FLIGHT_KEY, 0)
        self.saturation.add(str(client_id), data.get(SATURATION_KEY), time.time())

    def _on_worker_interrupted(self, environment: Environment, msg: Any, **_: Any) -> None:
        """Master: a worker quit in the middle of the test; the run is incomplete."""
        if self._results is not None and self._results.t_stop is None:
            self._results.worker_goodbyes.setdefault(str(msg.node_id), time.time())

    # -- master or local ----------------------------------------------------------------
    def merge_local(self) -> None:
        """Local runner: move this process's own delta into the run metrics."""
        if not self.is_master:
            delta = self.recorder.take_delta()
            if delta:
                self.run.merge_delta(delta)

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
                    _collect_last_reports(environment.runner)
            self._results.close()
            self._results = None
        self.signals.stop()


class ResultsWriter:
    """Master/local: the time series while the test runs, then summary.json and the table."""

    def __init__(self, state: RunState, results_dir: Path) -> None:
        self.state = state
        self.results_dir = results_dir
        self.settings = state.settings
        self.t_start = time.time()
        self.t_stop: float | None = None
        self.users_max = 0
        self.workers_max = 0
        self.workers_lost: set[str] = set()  # stopped reporting (Locust's heartbeat)
        self.worker_goodbyes: dict[str, float] = {}  # worker -> when it said it quits mid-test, epoch s
        self.behind_schedule: str | None = None
        self.interrupted = False
        self.interrupted_by: str | None = None  # the signal, when known
        self._interrupted_at_s: float | None = None
        self.cause: str | None = None  # why nothing succeeded (see results.diagnose), once final
        self._last_snapshot_s = time.monotonic()
        self._users_by_window: dict[int, int] = {}
        self._timeseries = TimeseriesWriter(results_dir, self.settings.interval_s, self.t_start)
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY_WINDOWS)  # last rows written, for the live view
        self.final_summary: dict[str, Any] | None = None  # what summary.json holds once the test is over
        self.monitor = RunMonitor(results_dir, self.settings, self.t_start, state.is_master)
        # windows close once every worker has reported past them
        self._lag_s = self.settings.interval_s + (2 * WORKER_REPORT_INTERVAL if state.is_master else TICK_S) + 1
        self._ticker = gevent.spawn(self._tick_forever)
        self.scraper = start_scraper(self.settings, results_dir, self.t_start)  # --metrics-url: server's view
        self._finalizer: gevent.Greenlet | None = None
        self._final = False
        logger.info("LLM results will be written to %s", results_dir)

    def _tick_forever(self) -> None:
        while True:
            gevent.sleep(TICK_S)
            self._tick()

    def _tick(self) -> None:
        """Merge the local delta, sample users/workers, write every closed window."""
        state = self.state
        state.merge_local()
        if self.t_stop is None:
            state.sample_local()
        runner = state.environment.runner
        if self.t_stop is None and runner is not None and state.control is not None:
            state.control.update()
            reason = state.control.check_limits(state.run.total)
            if reason is not None and state.control.stop_reason is None:
                state.control.stop_reason = reason
                logger.info("ending the run: %s", reason)
                gevent.spawn(_stop_test, state.environment)
        if self.t_stop is None and runner is not None:
            users = runner.user_count
            self.users_max = max(self.users_max, users)
            key = state.recorder.window_start(time.time())
            self._users_by_window[key] = max(self._users_by_window.get(key, 0), users)
            if state.is_master:
                self.workers_max = max(self.workers_max, runner.worker_count)
                self.workers_lost.update(str(w.id) for w in runner.clients.missing)
            self.monitor.tick(runner, time.time())
        self._write_windows(time.time() - self._lag_s)
        if self.t_stop is None and time.monotonic() - self._last_snapshot_s >= SNAPSHOT_S:
            self._last_snapshot_s = time.monotonic()
            write_summary(self.results_dir, self.summary(state.run, final=False))

        if state.is_master:
            gc.collect()  # the small cyclic objects of decoded deltas (see collector.freeze_heap)

    def _write_windows(self, before_s: float) -> None:
        for start, window in self.state.run.pop_windows(before_s):
            row = self._timeseries.write(start, window, self._users_by_window.pop(start, 0), self._step_at(start))
            self.history.append(row)
            self._check_schedule(start, window)
            self.monitor.add_window(start, window)
            window.release()

    def recent_rows(self) -> list[dict[str, Any]]:
        """The time series' last rows (`HISTORY_WINDOWS` at most), then the windows still open —
        workers may still report into them — with `"partial": True`, oldest first."""
        partial = [
            {**self._timeseries.row(start, window, self._users_by_window.get(start, 0), self._step_at(start)),
             "partial": True}
            for start, window in self.state.run.open_windows()
        ]  # fmt: skip
        return [*self.history, *partial]

    def _step_at(self, epoch_s: float) -> int | None:
        """Index of the sweep step running at `epoch_s`, None outside sweeps."""
        control = self.state.control
        for span in control.spans if control is not None else ():
            if span.start_s <= epoch_s < (span.end_s or float("inf")):
                return span.step.index
        return None

    def _check_schedule(self, start: int, window: WindowMetrics) -> None:
        """Open loop: warn (once) when requests left late — every user busy, or the client saturated."""
        delay = window.distribution("queue_delay", scale=1000.0)
        if self.behind_schedule is None and delay["count"] and delay["p90"] > SCHEDULE_LAG_WARN_MS:
            self.behind_schedule = (
                f"open loop fell behind its schedule from {iso_time(start)}: p90 client queue delay "
                f"{delay['p90']:.0f} ms (all users busy: raise -u / --max-concurrency, or the client is "
                "saturated: add worker processes); the offered rate was not achieved"
            )
            logger.warning("%s", self.behind_schedule)

    def interrupt(self, signal_name: str | None) -> None:
        """The process quits before the test stopped (by `signal_name`, when known)."""
        self.interrupted = True
        self.interrupted_by = signal_name
        self._interrupted_at_s = time.time()

    @property
    def lost_workers(self) -> set[str]:
        """Workers that stopped reporting, or quit mid-test on their own (not with the master's interrupt)."""
        cutoff_s = float("inf") if self._interrupted_at_s is None else self._interrupted_at_s - INTERRUPT_GRACE_S
        return self.workers_lost | {worker for worker, t_s in self.worker_goodbyes.items() if t_s < cutoff_s}

    def stop(self) -> None:
        """The test stopped: record the time; finalize after the workers' last reports."""
        if self.t_stop is None:
            self.t_stop = time.time()
        self._finalizer = gevent.spawn_later(WORKER_REPORT_INTERVAL + 2, self.finalize)

    def close(self) -> None:
        """Final results and close the time series (the test is over, or the process quits)."""
        self.finalize()
        self._timeseries.close()
        self.monitor.close()

    def finalize(self) -> None:
        """Write all remaining windows, summary.json and print the table (safe to call again)."""
        if self._finalizer is not None and self._finalizer is not gevent.getcurrent():
            self._finalizer.kill(block=False)
        self._ticker.kill(block=False)
        if self.t_stop is None:
            self.t_stop = time.time()
        self.state.merge_local()
        self._write_windows(float("inf"))
        if self.scraper is not None:
            self.scraper.stop()
        summary = self.summary(self.state.run)
        write_histograms(self.results_dir, self.state.run)
        gate = self.monitor.judge(summary, self.t_stop)
        env = self.state.environment
        explained = bool(env.process_exit_code) or self.cause is not None  # an error already said why
        user_error = self.cause in USER_ERROR_CAUSES
        if self.cause is not None and not env.process_exit_code and (user_error or not self.interrupted):
            env.process_exit_code = 2 if user_error else 1  # nothing succeeded: 2 when the command is wrong
        if not gate["passed"] and not env.process_exit_code:  # keep an earlier error's code (2: config); 4 interrupted
            env.process_exit_code = gate["exit_code"]
        path = write_summary(self.results_dir, summary)
        self.final_summary = summary
        if not self._final:
            self._final = True
            print("\n" + summary_table(summary), flush=True)
            print(f"LLM results: {self.results_dir.resolve()} ({path.name}, {self._timeseries.path.name})", flush=True)
        diagnosis = summary["diagnosis"]
        for warning in summary["warnings"]:
            if warning != diagnosis:
                logger.warning("%s", warning)
        if diagnosis:
            logger.error("%s", diagnosis)
        if not explained:  # else one line is enough: the verdict's "no request succeeded" says no more
            for reason in gate["reasons"]:
                logger.error("verdict: FAILED: %s", reason)

    def summary(self, run: RunMetrics, final: bool = True) -> dict[str, Any]:
        """The summary.json document (DESIGN.md "Results folder").

        `final=False`: a snapshot taken while the test runs ("status": "incomplete"; no
        diagnosis yet). The final document is "incomplete" too when the run was interrupted or
        lost workers.
        """
        env = self.state.environment
        options = env.parsed_options
        duration_s = (self.t_stop or time.time()) - self.t_start
        warnings = []
        if self.interrupted:
            warnings.append(
                f"the run was interrupted{f' by {self.interrupted_by}' if self.interrupted_by else ''} before the "
                "test ended: results hold what was measured until then"
            )
        lost = self.lost_workers
        if lost:
            warnings.append(
                f"{len(lost)} worker(s) stopped reporting during the run: "
                f"{', '.join(sorted(lost))}; their last reported data is included"
            )
        diagnosis = diagnose(run.total, _top_error(env)) if final else None
        if final:
            self.cause = diagnosis[0] if diagnosis else None
        if diagnosis:
            warnings.append(diagnosis[1])
        elif run.total.requests_ok == 0:
            warnings.append("no request succeeded: latency statistics are empty")
        if self.behind_schedule:
            warnings.append(self.behind_schedule)
        warnings.extend(self.state.saturation.warnings)
        if self.scraper is not None:
            warnings.extend(self.scraper.warnings())
        control = self.state.control
        complete = final and not self.interrupted and not lost
        return {
            "status": "complete" if complete else "incomplete",
            "llm_locust_version": __version__,
            "locust_version": locust.__version__,
            "run": {
                "host": redact.redact(env.host) if env.host else env.host,
                "user_classes": [u.__name__ for u in env.user_classes],
                "role": "master" if self.state.is_master else "local",
                "start_time": iso_time(self.t_start),
                "end_time": iso_time(self.t_stop or time.time()),
                "duration_s": round(duration_s, 3),
                "users_max": self.users_max,
                "workers_max": self.workers_max,
                "workers_lost": sorted(lost),
                "requests_by_worker": dict(sorted(self.state.requests_by_worker.items())),
                "interrupted": (self.interrupted_by or "quit before the test ended") if self.interrupted else None,
                "locust_csv_prefix": getattr(options, "csv_prefix", None),
                "stop_reason": None if control is None else control.stop_reason,
            },
            "settings": self.settings.public(),
            "load": {
                "model": self.settings.load_model,
                "rate_per_s": self.settings.request_rate or None,
                "arrival": self.settings.arrival if self.settings.load_model.startswith("rate") else None,
                "burstiness": self.settings.burstiness if self.settings.arrival == "gamma" else None,
            },
            "metrics": metric_stats(run.total),
            "throughput": throughput(run.total, duration_s),
            "slo": [r.as_dict() for r in evaluate(self.settings.slo, metric_stats(run.total))],
            "steps": [
                step_summary(span, run.steps.get(span.step.index), run.warmup_requests[span.step.index])
                for span in (control.spans if control is not None else ())
            ],
            "failures": dict(run.total.failures),
            "throttling": throttling(run.total, duration_s),
            "diagnosis": diagnosis[1] if diagnosis else None,
            "tokens": token_accounting(run.total),
            "timeseries": {
                "file": self._timeseries.path.name,
                "interval_s": self.settings.interval_s,
                "rows": self._timeseries.rows,
            },
            "client": self.state.saturation.as_dict(),
            "server": self.scraper.summary() if self.scraper is not None else None,
            "telemetry": self.scraper.telemetry_summary() if self.scraper is not None else None,
            "warnings": warnings,
        }


def _collect_last_reports(runner: MasterRunner, wait_s: float = 3.0) -> None:
    """Master quitting mid-test: tell the workers to quit now — each answers with a last stats
    report, then its goodbye — and wait up to `wait_s` for all of them (Locust's own shutdown
    would only tell them after the results are written)."""
    for client in runner.clients.all:
        runner.server.send_to_client(Message("quit", None, client.id))
    deadline = time.monotonic() + wait_s
    while len(runner.clients) and time.monotonic() < deadline:
        gevent.sleep(0.05)


def _redact_exceptions(runner: Any) -> None:
    """Redact each exception text and traceback as the runner collects it (from its own users or
    its workers): Locust's exceptions CSV, HTML report and web UI show what it collected."""
    log_exception = runner.log_exception

    def log_redacted(node_id: str, msg: str, formatted_tb: str) -> None:
        log_exception(node_id, redact.redact(msg), redact.redact(formatted_tb))

    runner.log_exception = log_redacted


def _stop_test(environment: Environment) -> None:
    """Stop the test after a user error: quit a headless run, stop the test in the web UI."""
    options = environment.parsed_options
    if options is not None and getattr(options, "headless", False):
        environment.runner.quit()
    else:
        environment.runner.stop()


def _top_error(environment: Environment) -> str | None:
    """The most frequent failure message in Locust's error statistics (redacted), if any."""
    errors = list(environment.stats.errors.values())
    if not errors:
        return None
    top = max(errors, key=lambda e: e.occurrences)
    text = StatsError.parse_error(top.error)
    for prefix in ("CatchResponseError(", "RequestFailure("):
        if text.startswith(prefix):
            text = text[len(prefix) : -1].strip("'\"")
    return redact.redact(text)
