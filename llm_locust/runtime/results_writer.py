"""Master/local: the results of one test — the time series while it runs, then summary.json, the table, the exit code.

The writer gathers the run's facts into a frozen `results.summary.RunFacts` and lets the pure `build_summary` make
the document; the verdict in it sets the process's exit code, final, and the code is written into it
(`verdict.exit_code`: README.md "Troubleshooting", the exit codes).
"""

from __future__ import annotations

import gc
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent
import locust
from locust.runners import WORKER_REPORT_INTERVAL

from llm_locust import redact
from llm_locust.apis import endpoints_of
from llm_locust.load.clock import Offset, offset_warnings, offsets_summary
from llm_locust.metrics.intervals import Batches
from llm_locust.metrics.run_metrics import RunMetrics
from llm_locust.metrics.vocabulary import HISTOGRAMS_FILE, SUMMARY_FILE
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.console import summary_table
from llm_locust.results.files import TimeseriesWriter, write_histograms, write_summary
from llm_locust.results.outcome import behind_schedule, diagnose, exit_code, lost_workers, no_finish
from llm_locust.results.request_lines import RequestLines, RequestsFile
from llm_locust.results.sections import metric_distributions
from llm_locust.results.summary import RunFacts, batch_scopes, build_summary
from llm_locust.results.trace_offered import offered_rows, write_offered
from llm_locust.runtime.monitor import RunMonitor
from llm_locust.runtime.pacer import Periodic
from llm_locust.runtime.runner_ops import stop_test, top_error
from llm_locust.runtime.scrape_loop import ScrapeLoop
from llm_locust.runtime.step_watch import settle
from llm_locust.runtime.write_guard import WriteGuard
from llm_locust.scrape.scraper import new_scraper
from llm_locust.transport.kernel_time import KERNEL_TIMESTAMPS

if TYPE_CHECKING:
    from llm_locust.config.settings import Settings
    from llm_locust.metrics.unfinished import Unfinished
    from llm_locust.runtime.control import LoadController
    from llm_locust.runtime.saturation import SaturationTracker

logger = logging.getLogger("llm_locust")

HISTORY_WINDOWS = 720
"""Closed time-series windows kept in memory for the live view (an hour at --interval-s 5)."""
TICK_S = 1.0
SNAPSHOT_S = 5.0
"""While a test runs, summary.json is rewritten this often (seconds), marked "incomplete"."""


@dataclass(frozen=True, slots=True)
class WriterInputs:
    """What the writer reads of one test, handed over by the process's `lead.Lead` when the test starts (the writer
    never reaches back into it): the Locust environment, the settings, the role, the run's merged metrics and its
    window clock, the load controller, the client's saturation samples, the requests each worker reported, and the
    calls that give the requests the test's end cut, merge this process's own delta and sample its users and workers;
    a local runner's request lines."""

    environment: Any
    settings: Settings
    is_master: bool
    run: RunMetrics
    window_start: Callable[[float], int]
    control: LoadController | None
    saturation: SaturationTracker
    requests_by_worker: Counter[str]
    unfinished: Callable[[], Unfinished]
    merge_local: Callable[[], None]
    sample_local: Callable[[], None]
    local_lines: RequestLines | None = None  # local runner, --requests-jsonl: its own requests' lines
    auth: Callable[[], Mapping[str, Any] | None] = lambda: None  # the OAuth token refreshes (`Lead.auth_counts`)
    clock_offsets: Mapping[str, Offset | None] = field(default_factory=dict)  # master: each worker's, last reported
    queue_delay_by_worker: Callable[[], Mapping[str, Any]] = dict  # send errors (`Lead.queue_delay_by_worker`)


class ResultsWriter:
    """Master/local: the time series while the test runs, then summary.json and the table."""

    def __init__(self, sources: WriterInputs, results_dir: Path) -> None:
        self.sources = sources
        self.results_dir = results_dir
        self.settings = sources.settings
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
        self.cause: str | None = None  # why nothing succeeded (`outcome.diagnose`, `outcome.no_finish`), once final
        self._last_snapshot_s = time.monotonic()
        self._users_by_window: dict[int, int] = {}
        self.guard = WriteGuard(sources.environment, results_dir, self._stop_unwritten)  # a failed write stops the load
        self._timeseries = TimeseriesWriter(results_dir, self.settings.output.interval_s, self.t_start)
        self.trace = self._write_trace_offered()
        self.requests = RequestsFile(results_dir) if self.settings.output.requests_jsonl else None
        self.history: deque[dict[str, Any]] = deque(maxlen=HISTORY_WINDOWS)  # last rows written, for the live view
        self.batches = Batches()  # each closed window's quantiles: the intervals' batches (`metrics.intervals`)
        self.final_summary: dict[str, Any] | None = None  # what summary.json holds once the test is over
        self.monitor = RunMonitor(results_dir, self.settings, self.t_start, sources.is_master)
        # windows close once every worker has reported past them
        self._lag_s = (
            self.settings.output.interval_s + (2 * WORKER_REPORT_INTERVAL if sources.is_master else TICK_S) + 1
        )
        self._ticker = gevent.spawn(self._tick_forever)
        self.scraper = new_scraper(self.settings.scrape, results_dir, self.t_start)  # --metrics-url: server's view
        self._scrape_loop = ScrapeLoop(self.scraper) if self.scraper is not None else None
        self._finalizer: gevent.Greenlet | None = None
        self._final = False
        logger.info("LLM results will be written to %s", results_dir)

    def _write_trace_offered(self) -> dict[str, Any] | None:
        """A trace replay: write what it offers per window (trace_offered.csv); its summary.json `load.trace`."""
        control = self.sources.control
        trace = None if control is None else control.trace
        origin_epoch_s = None if control is None else control.origin_epoch_s
        if trace is None or origin_epoch_s is None:
            return None
        rows = offered_rows(trace, origin_epoch_s, self.settings.output.interval_s, self.t_start)
        path = write_offered(self.results_dir, rows)
        settings = self.settings
        return {
            "file": Path(trace.path).name,
            "format": settings.load.trace_format,
            "speedup": settings.load.trace_speedup,
            "requests": len(trace.requests),
            "replay_s": round(trace.due_s[-1], 3),
            "offered_file": path.name,
        }

    def _tick_forever(self) -> None:
        periodic = Periodic()  # between an open loop's sends
        while True:
            gevent.sleep(TICK_S)
            periodic.run(self._tick)

    def add_request_lines(self, lines: bytes, dropped: int) -> None:
        """--requests-jsonl: append a process's request lines (and count those it dropped) to requests.jsonl."""
        if self.requests is not None:
            self.guard.write(self.requests.path, partial(self.requests.write, lines, dropped), always=True)

    def _stop_unwritten(self) -> None:
        """A results file could not be written: end the test now (unless it is ending)."""
        control, environment = self.sources.control, self.sources.environment
        if self.t_stop is None and environment.runner is not None:
            if control is not None and control.stop_reason is None:
                control.stop_reason = "the results could not be written"
            gevent.spawn(stop_test, environment)

    def _merge_local_lines(self) -> None:
        """Local runner: its own request lines into requests.jsonl."""
        if self.sources.local_lines is not None:
            self.add_request_lines(*self.sources.local_lines.take())

    def end_at_limit(self) -> None:
        """End the run when the counts so far reach one of its limits (`LoadController.limit_reached`): at each tick,
        and on a master as soon as a worker's report is merged."""
        src = self.sources
        reason = None if self.t_stop is not None or src.control is None else src.control.limit_reached(src.run.total)
        if reason is not None:
            logger.info("ending the run: %s", reason)
            gevent.spawn(stop_test, src.environment)

    def _tick(self) -> None:
        """Merge the local delta and request lines, sample users/workers, write every closed window."""
        src = self.sources
        self.guard.check_folder()
        src.merge_local()
        self._merge_local_lines()
        if self.t_stop is None:
            src.sample_local()
        runner = src.environment.runner
        if self.t_stop is None and runner is not None and src.control is not None:
            src.control.update()
            self.end_at_limit()
        if self.t_stop is None and runner is not None:
            users = runner.user_count
            self.users_max = max(self.users_max, users)
            key = src.window_start(time.time())
            self._users_by_window[key] = max(self._users_by_window.get(key, 0), users)
            if src.is_master:
                self.workers_max = max(self.workers_max, runner.worker_count)
                self.workers_lost.update(str(w.id) for w in runner.clients.missing)
            self.guard.write(self.monitor.path, partial(self.monitor.tick, runner, time.time()))
        self._write_windows(time.time() - self._lag_s)
        if self.t_stop is None and time.monotonic() - self._last_snapshot_s >= SNAPSHOT_S:
            self._last_snapshot_s = time.monotonic()
            snapshot = self.summary(src.run, final=False)
            self.guard.write(self.results_dir / SUMMARY_FILE, partial(write_summary, self.results_dir, snapshot))

        if src.is_master:
            gc.collect()  # the small cyclic objects of decoded deltas (see gc_policy.freeze_heap)

    def _write_windows(self, before_s: float) -> None:
        for start, window in self.sources.run.pop_windows(before_s):
            distributions = metric_distributions(window)
            users = self._users_by_window.pop(start, 0)
            row = self._timeseries.row(start, window, users, self._step_at(start), distributions)
            self.guard.write(self._timeseries.path, partial(self._timeseries.write, row))
            spans = () if self.sources.control is None else tuple(self.sources.control.spans)
            self.batches.add(batch_scopes(start, self.settings.output.interval_s, spans), distributions)
            self.history.append(row)
            self._check_schedule(start, window)
            self.monitor.add_window(start, window)
            window.release()

    def recent_rows(self) -> list[dict[str, Any]]:
        """The time series' last rows (`HISTORY_WINDOWS` at most), then the windows still open —
        workers may still report into them — with `"partial": True`, oldest first."""
        partial = [
            {**self._timeseries.row(start, window, self._users_by_window.get(start, 0), self._step_at(start),
                                    metric_distributions(window)),
             "partial": True}
            for start, window in self.sources.run.open_windows()
        ]  # fmt: skip
        return [*self.history, *partial]

    def _step_at(self, epoch_s: float) -> int | None:
        """Index of the sweep step running at `epoch_s`, None outside sweeps."""
        control = self.sources.control
        for span in control.spans if control is not None else ():
            if span.start_s <= epoch_s < (span.end_s or float("inf")):
                return span.step.index
        return None

    def _check_schedule(self, start: int, window: WindowMetrics) -> None:
        """Open loop: warn (once) when requests left late (`results.outcome.behind_schedule`)."""
        if self.behind_schedule is None:
            self.behind_schedule = behind_schedule(start, window.distribution("queue_delay", scale=1000.0))
            if self.behind_schedule is not None:
                logger.warning("%s", self.behind_schedule)

    def interrupt(self, signal_name: str | None, t_signal_s: float | None) -> None:
        """The process quits before the test stopped (by `signal_name` at epoch `t_signal_s`, when known): the load
        ended then (else now) — the run's duration ends there, not once Locust's shutdown stopped the users, the
        workers' last reports are in and the results written."""
        self.interrupted = True
        self.interrupted_by = signal_name
        self._interrupted_at_s = t_signal_s or time.time()
        if self.t_stop is None:
            self.t_stop = self._interrupted_at_s

    @property
    def lost_workers(self) -> set[str]:
        """Workers that stopped reporting, or quit mid-test on their own (`results.outcome.lost_workers`)."""
        return lost_workers(self.workers_lost, self.worker_goodbyes, self._interrupted_at_s)

    def stop(self) -> None:
        """The test stopped: record the time; finalize after the workers' last reports."""
        if self.t_stop is None:
            self.t_stop = time.time()
        self.sources.saturation.stop(self.t_stop)
        self._finalizer = gevent.spawn_later(WORKER_REPORT_INTERVAL + 2, self.finalize)

    def close(self) -> None:
        """Final results, unless written already (a web UI's next test starts: its folder is left as it was), and close
        the time series (the test is over, or the process quits)."""
        if self.final_summary is None:
            self.finalize()
        for path, close in (
            (self._timeseries.path, self._timeseries.close),
            (self.monitor.path, self.monitor.close),
            *(((self.requests.path, self.requests.close),) if self.requests is not None else ()),
        ):
            self.guard.write(path, close, always=True)  # (a close flushes)

    def finalize(self) -> None:
        """Write all remaining windows, summary.json and print the table (safe to call again)."""
        if self._finalizer is not None and self._finalizer is not gevent.getcurrent():
            self._finalizer.kill(block=False)
        self._ticker.kill(block=False)
        if self.t_stop is None:
            self.t_stop = time.time()
        self.sources.saturation.stop(self.t_stop)
        self.sources.merge_local()
        self._merge_local_lines()
        self._write_windows(float("inf"))
        if self._scrape_loop is not None:
            self._scrape_loop.stop()
        histograms = partial(write_histograms, self.results_dir, self.sources.run)
        self.guard.write(self.results_dir / HISTOGRAMS_FILE, histograms, always=True)
        summary = self.summary(self.sources.run)
        gate = summary["verdict"]
        env = self.sources.environment
        explained = bool(env.process_exit_code) or self.cause is not None  # an error already said why
        runner = env.runner
        raised = getattr(env.parsed_options, "exit_code_on_error", 1) if runner is not None and runner.exceptions else 0
        # final: the process exits with summary.json's code, never Locust's own (1 on any failed request)
        env.process_exit_code = gate["exit_code"] = exit_code(
            env.process_exit_code, self.cause, self.interrupted, gate, raised
        )
        whole = partial(write_summary, self.results_dir, summary)  # whole or not at all
        written = self.guard.write(self.results_dir / SUMMARY_FILE, whole, always=True)
        self.final_summary = summary
        if not self._final:
            self._final = True
            print("\n" + summary_table(summary), flush=True)
            files = f"{SUMMARY_FILE}, {self._timeseries.path.name}" if written else f"no {SUMMARY_FILE}: not written"
            print(f"LLM results: {self.results_dir.resolve()} ({files})", flush=True)
        diagnosis = summary["diagnosis"]
        for warning in summary["warnings"]:
            if warning not in (diagnosis, self.guard.error):  # each said once
                logger.warning("%s", warning)
        if diagnosis:
            logger.error("%s", diagnosis)
        if not explained:  # else one line is enough: the verdict's "no request succeeded" says no more
            for reason in gate["reasons"]:
                logger.error("verdict: FAILED: %s", reason)

    def summary(self, run: RunMetrics, final: bool = True) -> dict[str, Any]:
        """The summary.json document (`results.summary.build_summary`) of `run` as this writer sees it now.

        `final=False`: a snapshot taken while the test runs; the final one also sets `cause`: why no request succeeded
        (`outcome.diagnose`: from the failures) or none finished (`outcome.no_finish`: from the requests the end cut).
        """
        diagnosis = None
        control = self.sources.control
        if final and control is not None:  # every report is in: each step's steady state is known now
            settle(tuple(control.spans), run, self.settings.output.interval_s, time.time(), 0.0, final=True)
        if final:
            diagnosis = diagnose(run.total, top_error(self.sources.environment)) or no_finish(
                run.total, self.sources.unfinished()
            )
        if final:
            self.cause = diagnosis[0] if diagnosis else None
        return build_summary(self.view(diagnosis, final), run, final)

    def view(self, diagnosis: tuple[str, str] | None, final: bool) -> RunFacts:
        """A frozen view of the run for `build_summary` (the process health only on the final one)."""
        src = self.sources
        env = src.environment
        control = src.control
        t_end_s = self.t_stop or time.time()
        return RunFacts(
            settings=self.settings.public(),
            load=self.settings.load,
            workload=self.settings.workload,
            objectives=self.settings.objectives,
            output=self.settings.output,
            locust_version=locust.__version__,
            host_shown=redact.redact(env.host) if env.host else env.host,
            user_classes=tuple(u.__name__ for u in env.user_classes),
            endpoints=endpoints_of(env.user_classes),
            role="master" if src.is_master else "local",
            t_start_s=self.t_start,
            t_end_s=t_end_s,
            users_max=self.users_max,
            workers_max=self.workers_max,
            workers_lost=tuple(self.lost_workers),
            requests_by_worker=dict(src.requests_by_worker),
            unfinished=src.unfinished(),
            interrupted=self.interrupted,
            interrupted_by=self.interrupted_by,
            locust_csv_prefix=getattr(env.parsed_options, "csv_prefix", None),
            stop_reason=None if control is None else control.stop_reason,
            spans=tuple(control.spans) if control is not None else (),
            diagnosis=diagnosis,
            behind_schedule=self.behind_schedule,
            other_warnings=(
                *((self.guard.error,) if self.guard.error else ()),
                *src.saturation.warnings,
                *(self.scraper.warnings() if self.scraper else ()),
                *(self.requests.warnings() if self.requests is not None else ()),
                *offset_warnings(src.clock_offsets),
            ),
            timeseries_file=self._timeseries.path.name,
            timeseries_rows=self._timeseries.rows,
            client=src.saturation.as_dict(),
            server=self.scraper.summary() if self.scraper is not None else None,
            telemetry=self.scraper.telemetry_summary() if self.scraper is not None else None,
            health=self.monitor.health(t_end_s, src.saturation.saturated) if final else None,
            search=None if control is None or control.search is None else control.search.as_dict(),
            trace=self.trace,
            power=self.scraper.power_samples() if self.scraper is not None else (),
            requests_file=None
            if self.requests is None
            else self.requests.as_dict(self.settings.output.requests_sample),
            auth=src.auth(),
            clocks=offsets_summary(src.clock_offsets),
            queue_delay_by_worker=src.queue_delay_by_worker(),
            batches=self.batches,
            client_timing=src.saturation.timing(KERNEL_TIMESTAMPS and self.settings.endpoint.client == "fast"),
        )
