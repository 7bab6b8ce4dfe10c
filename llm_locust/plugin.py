"""Wires llm-locust into Locust's events: options, per-request metrics, worker→master, results.

A locustfile calls `install(events)` once. Then, in every Locust process:

- `init_command_line_parser`: our options (`settings.add_arguments`).
- `init`: a `RunState` for the environment; options validated (a bad one: one-line error,
  exit code 2).
- `test_start`: settings rebuilt (workers receive the master's options only now), metrics reset.
- `request` (processes running users): the HTTP request event carries the finished
  `RequestRecord` in its context; it goes into the `MetricsRecorder`, and a few low-volume
  "LLM" rows (TTFT, TPOT, E2E) are fired for Locust's stock UI and CSVs.
- `report_to_master` (worker) / `worker_report` (master): histogram deltas ride along with
  Locust's own stats reports; the master merges them into `RunMetrics`.
- A ticker greenlet (master / local) merges the local delta, samples users and workers, and
  writes each closed window of the time series.
- `test_stop` + a grace period, and `quitting` (after the workers' last reports): summary.json
  written, summary table printed.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import gevent.lock
import locust
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import WORKER_REPORT_INTERVAL, MasterRunner, WorkerRunner

from llm_locust import __version__
from llm_locust.client import RECORD_KEY
from llm_locust.errors import ConfigError
from llm_locust.metrics import MetricsRecorder, RunMetrics, delta_from_wire, delta_to_wire
from llm_locust.monitor import RunMonitor
from llm_locust.record import RequestRecord
from llm_locust.results import (
    TimeseriesWriter,
    metric_stats,
    summary_table,
    throughput,
    token_accounting,
    write_summary,
)
from llm_locust.settings import Settings, add_arguments
from llm_locust.timeouts import TimeoutWatchdog

logger = logging.getLogger("llm_locust")

WIRE_KEY = "llm_locust"
"""Key of our delta in the data of Locust's worker stats report."""
TICK_S = 1.0

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
    """The llm-locust state of `environment`; ConfigError if the locustfile did not install it."""
    try:
        return _states[environment]
    except KeyError:
        raise ConfigError(
            "llm-locust is not installed: call llm_locust.plugin.install(events) in the locustfile"
        ) from None


def _on_init(environment: Environment, runner: Any = None, **_: Any) -> None:
    """Create the run state; a bad option ends the process with a one-line error (exit 2)."""
    try:
        _states[environment] = RunState(environment)
    except ConfigError as e:
        logger.error("%s", e)
        sys.exit(2)


class RunState:
    """llm-locust's state in one Locust process, for one environment."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        self.settings = Settings.from_options(environment.parsed_options)
        runner = environment.runner
        self.is_worker = isinstance(runner, WorkerRunner)
        self.is_master = isinstance(runner, MasterRunner)
        self._model_lock = gevent.lock.Semaphore()
        self._results: ResultsWriter | None = None
        self.watchdog: TimeoutWatchdog | None = None
        self._reset()
        events = environment.events
        events.test_start.add_listener(self._on_test_start)
        if not self.is_master:
            events.request.add_listener(self._on_request)
        if self.is_worker:
            events.report_to_master.add_listener(self._on_report_to_master)
        else:
            events.test_stop.add_listener(self._on_test_stop)
            events.quitting.add_listener(self._on_quitting)
        if self.is_master:
            events.worker_report.add_listener(self._on_worker_report)

    # -- every process ------------------------------------------------------------------
    def _on_test_start(self, environment: Environment, **_: Any) -> None:
        """Rebuild the settings from the (now complete) options and reset the metrics."""
        if self._results is not None:  # a previous test of this process (web UI) not yet closed
            self._results.close()
        try:
            self.settings = Settings.from_options(environment.parsed_options)
        except ConfigError as e:  # options changed in the web UI: keep the old ones, say why
            logger.error("%s (keeping the previous settings)", e)
        self._reset()
        _freeze_heap()
        if not self.is_worker:
            self._results = ResultsWriter(self, Path(self.settings.results_dir))

    def _reset(self) -> None:
        """Fresh per-test state from the current settings."""
        self.model = self.settings.model
        self._model_error: str | None = None
        self.recorder = MetricsRecorder(self.settings.interval_s)
        self.run = RunMetrics()
        if self.watchdog is not None:
            self.watchdog.stop()
        self.watchdog = TimeoutWatchdog(self.settings.read_timeout_s, self.settings.request_timeout_s)

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
        if self._model_error is not None:
            raise StopUser()
        return self.model

    # -- processes that run users -------------------------------------------------------
    def _on_request(self, context: dict[str, Any] | None = None, **_: Any) -> None:
        """Take the record of a finished LLM request: metrics, plus the "LLM" rows."""
        record: RequestRecord | None = (context or {}).get(RECORD_KEY)
        if record is None:
            return
        self.recorder.record(record, time.time())
        if not record.ok:
            return
        fire = self.environment.events.request.fire
        rows = (("TTFT", record.ttft_s, 0), ("TPOT", record.tpot_s, 0), ("E2E", record.e2e_s, record.output_tokens))
        for name, seconds, length in rows:
            if seconds is not None:  # TPOT needs two tokens
                fire(request_type="LLM", name=name, response_time=seconds * 1000, response_length=length,
                     exception=None, context={})  # fmt: skip

    def _on_report_to_master(self, client_id: str, data: dict[str, Any]) -> None:
        """Worker: attach the windows filled since the last report."""
        delta = self.recorder.take_delta()
        if delta:
            data[WIRE_KEY] = delta_to_wire(delta)
            for window in delta.values():
                window.release()

    # -- master -------------------------------------------------------------------------
    def _on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        """Master: merge a worker's delta."""
        wire = data.get(WIRE_KEY)
        if wire:
            self.run.merge_delta(delta_from_wire(wire))

    # -- master or local ----------------------------------------------------------------
    def merge_local(self) -> None:
        """Local runner: move this process's own delta into the run metrics."""
        if not self.is_master:
            delta = self.recorder.take_delta()
            if delta:
                self.run.merge_delta(delta)

    def _on_test_stop(self, environment: Environment, **_: Any) -> None:
        """Mark the end of the measurement; finalize once the workers' last reports are in."""
        if self._results is not None:
            self._results.stop()

    def _on_quitting(self, environment: Environment, **_: Any) -> None:
        """Final results (the workers' last reports have arrived by now)."""
        if self._results is not None:
            self._results.close()
            self._results = None


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
        self.workers_lost: set[str] = set()
        self._users_by_window: dict[int, int] = {}
        self._timeseries = TimeseriesWriter(results_dir, self.settings.interval_s, self.t_start)
        self.monitor = RunMonitor(results_dir, self.settings, self.t_start, state.is_master)
        # windows close once every worker has reported past them
        self._lag_s = self.settings.interval_s + (2 * WORKER_REPORT_INTERVAL if state.is_master else TICK_S) + 1
        self._ticker = gevent.spawn(self._tick_forever)
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
        runner = state.environment.runner
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
        if state.is_master:
            gc.collect()  # the small cyclic objects of decoded deltas (see _freeze_heap)

    def _write_windows(self, before_s: float) -> None:
        for start, window in self.state.run.pop_windows(before_s):
            self._timeseries.write(start, window, self._users_by_window.pop(start, 0))
            self.monitor.add_window(start, window)
            window.release()

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
        summary = self.summary(self.state.run)
        gate = self.monitor.judge(summary, self.t_stop)
        env = self.state.environment
        if not gate["passed"] and not env.process_exit_code:  # keep an earlier error's code (2: config)
            env.process_exit_code = gate["exit_code"]
        path = write_summary(self.results_dir, summary)
        if not self._final:
            self._final = True
            print("\n" + summary_table(summary), flush=True)
            print(f"LLM results: {self.results_dir.resolve()} ({path.name}, {self._timeseries.path.name})", flush=True)
        for warning in summary["warnings"]:
            logger.warning("%s", warning)
        for reason in gate["reasons"]:
            logger.error("verdict: FAILED: %s", reason)

    def summary(self, run: RunMetrics) -> dict[str, Any]:
        """The summary.json document (DESIGN.md "Results folder")."""
        env = self.state.environment
        options = env.parsed_options
        duration_s = (self.t_stop or time.time()) - self.t_start
        warnings = []
        if self.workers_lost:
            warnings.append(
                f"{len(self.workers_lost)} worker(s) stopped reporting during the run: "
                f"{', '.join(sorted(self.workers_lost))}; their last reported data is included"
            )
        if run.total.requests_ok == 0:
            warnings.append("no request succeeded: latency statistics are empty")
        return {
            "status": "complete",
            "llm_locust_version": __version__,
            "locust_version": locust.__version__,
            "run": {
                "host": env.host,
                "user_classes": [u.__name__ for u in env.user_classes],
                "role": "master" if self.state.is_master else "local",
                "start_time": _iso(self.t_start),
                "end_time": _iso(self.t_stop or time.time()),
                "duration_s": round(duration_s, 3),
                "users_max": self.users_max,
                "workers_max": self.workers_max,
                "workers_lost": sorted(self.workers_lost),
                "locust_csv_prefix": getattr(options, "csv_prefix", None),
            },
            "settings": self.settings.public(),
            "metrics": metric_stats(run.total),
            "throughput": throughput(run.total, duration_s),
            "failures": dict(run.total.failures),
            "tokens": token_accounting(run.total),
            "timeseries": {
                "file": self._timeseries.path.name,
                "interval_s": self.settings.interval_s,
                "rows": self._timeseries.rows,
            },
            "warnings": warnings,
        }


def _freeze_heap() -> None:
    """Move everything alive at test start out of the garbage collector's reach.

    A full collection walks every tracked object — Locust, gevent and their modules: a pause
    of tens of ms that shows up as false ITL/TTFT outliers in every stream of the process.
    Frozen objects are never scanned again; what the test allocates is collected as usual.

    Histograms are cyclic garbage (hdrh: histogram <-> encoder): windows are released when
    done with (`WindowMetrics.release`), and the master, which decodes every worker's deltas,
    also collects every tick (~1 ms with the heap frozen) so its RSS stays flat for hours.
    """
    gc.collect()
    gc.freeze()


def _iso(epoch_s: float) -> str:
    """Epoch seconds as a local ISO-8601 time with its UTC offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(epoch_s))
