"""The part of llm-locust's state in the process that leads the run (`Lead`: master, local runner).

It controls the load (`LoadController`), merges the run's metrics (`RunMetrics`: a master from its workers' reports,
a local runner from its own `users_part.UsersPart`), writes the results (`ResultsWriter`, which runs the scraper),
watches the signals, serves the live export and the live view's snapshot (`LiveSnapshot`). No user reaches it.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from locust.env import Environment
from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_SPAWNING, WORKER_REPORT_INTERVAL

from llm_locust import redact
from llm_locust.config.settings import Settings
from llm_locust.export.live import LiveGauges
from llm_locust.load.arrivals import StepSpan
from llm_locust.load.clock import Offset
from llm_locust.load.step_end import ENDED_STOPPED
from llm_locust.metrics.recorder import delta_from_wire, window_start
from llm_locust.metrics.run_metrics import RunMetrics
from llm_locust.metrics.unfinished import Unfinished
from llm_locust.runtime.control import LoadController
from llm_locust.runtime.gc_policy import freeze_heap
from llm_locust.runtime.interrupt import SignalWatch
from llm_locust.runtime.live_export import LiveExport
from llm_locust.runtime.results_folder import folder_for
from llm_locust.runtime.results_writer import ResultsWriter, WriterInputs
from llm_locust.runtime.runner_ops import (
    CLOCK_KEY,
    IN_FLIGHT_KEY,
    LAST_REPORT_MESSAGE,
    LOW_WATER_KEY,
    QUEUE_DELAY_KEY,
    REQUEST_LINES_DROPPED_KEY,
    REQUEST_LINES_KEY,
    SATURATION_KEY,
    TOKENS_KEY,
    UNFINISHED_KEY,
    WIRE_KEY,
    collect_last_reports,
    quit_master,
    redact_exceptions,
    reports_awaited,
    wait_until,
)
from llm_locust.runtime.saturation import SaturationTracker
from llm_locust.runtime.shared import Shared
from llm_locust.runtime.users_part import UsersPart


@dataclass(frozen=True)
class LiveSnapshot:
    """What the web UI's live view reads of a run (`Lead.live`): a snapshot, never the state itself."""

    results_dir: Path | None  # None before the first test
    summary: dict[str, Any] | None  # summary.json once written (`final`), else the summary so far
    final: bool
    history: tuple[dict[str, Any], ...]  # the time series' last rows, then the open windows ("partial")
    in_flight: int
    interval_s: float
    settings: dict[str, Any]  # `Settings.public()`
    spans: tuple[StepSpan, ...]  # sweep steps so far


LAST_REPORTS_WAIT_S = 3.0
"""Master quitting: how long it waits for its workers' last reports (their users stopped, Locust's --stop-timeout
added)."""


HANDOVER_WAIT_S = 60.0
"""Master quitting: the longest its main greenlet waits for another to end the process (`Lead._let_others_end`)."""


class Lead:
    """llm-locust's state in the process that leads the run (see the module docstring). `users`: the process's own
    users part on a local runner; None on a master (its users run on the workers, whose reports it merges)."""

    def __init__(self, shared: Shared, users: UsersPart | None) -> None:
        self._shared = shared
        self.users = users
        self.is_master = users is None
        self.signals = SignalWatch()
        self.signals.start()
        runner = shared.environment.runner
        if runner is not None:
            redact_exceptions(runner)
            if self.is_master:
                runner.quit = self._quit
        self._quitting = False
        self._quit_done = gevent.event.Event()
        self._quitter: Any = None  # the greenlet of the first quit
        self.control: LoadController | None = None  # steps, plans, limits
        self._results: ResultsWriter | None = None
        self._in_flight_by_worker: dict[str, int] = {}
        self._reset()
        export, otel = self.settings.export, bool(getattr(shared.environment.parsed_options, "otel", False))
        self.export = LiveExport(export, otel) if export.prometheus_port or otel else None

    @property
    def settings(self) -> Settings:
        """The test's settings (rebuilt at each test's start)."""
        return self._shared.settings

    def _reset(self) -> None:
        """Fresh per-test metrics."""
        self.run = RunMetrics()
        self.requests_by_worker: Counter[str] = Counter()  # master: finished requests each worker reported
        self._workers_unfinished = Unfinished()  # master: requests the test's end cut, as its workers reported them
        self._last_reported: set[str] = set()  # master: workers whose report after their users stopped came in
        self.saturation = SaturationTracker()  # every process's samples
        self._tokens_by_worker: dict[str, dict[str, Any]] = {}  # master: each worker's OAuth token counts
        self.clock_offsets: dict[str, Offset | None] = {}  # master: each worker's clock offset, as last reported
        self._queue_delay_by_worker: dict[str, dict[str, Any]] = {}  # master: each worker's own queue delay, ms

    def close_previous(self) -> None:
        """A new test starts: close the results of this process's previous test (web UI) if still open."""
        if self._results is not None:
            self._results.close()

    def start_test(self) -> None:
        """A test starts (settings rebuilt, a local runner's users part reset): fresh metrics, the load controller
        and the `ResultsWriter` of the test, and the live export's run."""
        self._reset()
        users = self.users
        if users is None:  # a master runs no user: its heap stays out of the collector's way
            freeze_heap()
        environment, settings = self._shared.environment, self.settings
        self.control = LoadController(environment, settings, None if users is None else users.pacer, self._shared.trace)
        steps = settings.load.steps
        if steps and environment.shape_class is not None:  # the sweep starts now
            self.control.enter_step(steps[0])
        self.control.update()
        sources = WriterInputs(
            environment=environment,
            settings=settings,
            is_master=self.is_master,
            run=self.run,
            window_start=functools.partial(window_start, interval_s=settings.output.interval_s),
            control=self.control,
            saturation=self.saturation,
            requests_by_worker=self.requests_by_worker,
            unfinished=self.unfinished_requests,
            merge_local=self.merge_local,
            sample_local=self.sample_local,
            local_lines=None if users is None else users.request_lines,
            auth=self.auth_counts,
            clock_offsets=self.clock_offsets,
            queue_delay_by_worker=self.queue_delay_by_worker,
        )
        folder = folder_for(environment, Path(settings.output.results_dir))
        self._results = ResultsWriter(sources, folder)
        if self.export is not None:
            run = folder.name
            self.export.start_test(run, functools.partial(self._live_gauges, run, self._results))

    @property
    def in_flight(self) -> int:
        """Requests in flight now: this process's users', or on a master the sum of its workers' last reports."""
        if self.users is not None:
            return self.users.in_flight
        live = {w.id for w in self._shared.environment.runner.clients.values() if w.state != STATE_MISSING}
        return sum(n for worker, n in self._in_flight_by_worker.items() if worker in live)

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
        """The live export's sample of test `run`, whose results `writer` writes (closed, too: the last scrape after
        the end reads its last row) (`export.live.LiveGauges`)."""
        runner = self._shared.environment.runner
        return LiveGauges(
            run=run,
            in_flight=self.in_flight,
            users=runner.user_count if runner is not None else 0,
            last_window=writer.history[-1] if writer.history else None,
            total=self.run.total,
        )

    def unfinished_requests(self) -> Unfinished:
        """The requests the test's end cut: this process's users', or on a master those its workers reported."""
        return self.users.unfinished if self.users is not None else self._workers_unfinished

    def merge_local(self) -> None:
        """Local runner: move this process's own delta into the run metrics (a master: nothing to merge)."""
        if self.users is not None:
            delta = self.users.recorder.take_delta()
            if delta:
                self.run.merge_delta(delta)
                if self.export is not None:
                    self.export.add(delta)

    def queue_delay_by_worker(self) -> dict[str, dict[str, Any]]:
        """Open loop: each process's own queue delay (its send error) over the test, in ms, by worker id (a local
        runner's as "local"; a worker's as of its last report); empty in a closed loop."""
        by_process = dict(self._queue_delay_by_worker)
        users = self.users
        if users is not None and users.queue_delay.hist.get_total_count():
            by_process["local"] = users.queue_delay.distribution_ms()
        return dict(sorted(by_process.items()))

    def auth_counts(self) -> dict[str, Any] | None:
        """The OAuth flow of the processes running users and each one's token refreshes (summary.json `auth`: a local
        runner's as "local"), or None without bearer tokens."""
        users = self.users
        by_process = dict(self._tokens_by_worker)
        if users is not None and users.tokens is not None:
            by_process["local"] = users.token_counts()
        if not by_process:
            return None
        return {
            "flow": next(iter(by_process.values()))["flow"],
            "refreshes_by_worker": {name: counts["refreshes"] for name, counts in by_process.items()},
            "refresh_failures": sum(counts["refresh_failures"] for counts in by_process.values()),
        }

    def sample_local(self) -> None:
        """Local runner: this process's CPU / event-loop lag sample into the saturation tracker,
        over intervals as long as a worker's (one late wake-up alone is no saturation)."""
        users = self.users
        if users is not None and users.monitor.elapsed_s >= WORKER_REPORT_INTERVAL:
            self.saturation.add("local", users.monitor.take(), time.time())

    # -- listeners (registered by the role: `state.LocalRole`, `state.MasterRole`) ----------------------------
    def _on_worker_report(self, client_id: str, data: dict[str, Any]) -> None:
        """Master: merge a worker's delta (and end the run if a limit is reached); note its requests in flight and its
        clock offset; add up the requests the test's end cut."""
        wire = data.get(WIRE_KEY)
        if wire:
            delta = delta_from_wire(wire)
            self.requests_by_worker[str(client_id)] += delta.requests
            self.run.merge_delta(delta)
            if self.export is not None:
                self.export.add(delta)
        self._in_flight_by_worker[client_id] = data.get(IN_FLIGHT_KEY, 0)
        if UNFINISHED_KEY in data:
            self._workers_unfinished = self._workers_unfinished.merge(Unfinished.from_dict(data[UNFINISHED_KEY]))
            self._last_reported.add(client_id)
        if LOW_WATER_KEY in data and self.control is not None:
            self.control.note_low_water(str(client_id), data[LOW_WATER_KEY])
        self.saturation.add(str(client_id), data.get(SATURATION_KEY), time.time())
        if TOKENS_KEY in data:
            self._tokens_by_worker[str(client_id)] = data[TOKENS_KEY]
        clock = data.get(CLOCK_KEY)
        self.clock_offsets[str(client_id)] = None if clock is None else Offset.from_wire(clock)
        if QUEUE_DELAY_KEY in data:
            self._queue_delay_by_worker[str(client_id)] = data[QUEUE_DELAY_KEY]
        if REQUEST_LINES_KEY in data and self._results is not None:
            self._results.add_request_lines(data[REQUEST_LINES_KEY], data.get(REQUEST_LINES_DROPPED_KEY, 0))
        if wire and self._results is not None:  # a limit reached ends the run now, not at the next tick
            self._results.end_at_limit()

    def _quit(self) -> None:
        """Master: Locust's quit (the run's end: --run-time, a limit; the end of a web UI or a script) once the workers'
        last reports are in. Locust stops the test without stopping the workers, then tells them to quit and gives
        their last reports 0.5 s — short on a busy machine, and a report lost there loses its requests: here the workers
        that ran users in the test and have not sent their report after their users stopped (with the requests the
        stop cut) are asked for it at once and waited for (`collect_last_reports`: 3 s, plus Locust's --stop-timeout
        for their users to end their tasks) — once. They stop their users and report but stay until the quit, which
        comes after the final results are written, the verdict printed and the exporter's last scrape taken
        (`_write_final`): under compose (`--exit-code-from master`) a worker's exit stops every container and ends
        the log, the master's too. The quit itself ends when the workers said goodbye (`quit_master`).

        Locust calls quit up to four times as it shuts down (the end of the run, its last worker gone, its `quitting`
        event, its shutdown), each sleeping 0.5 s: the first one quits, the others wait for it to be done, and the main
        greenlet, after a SIGTERM, for the process to be ended by Locust's handler (`_let_others_end`)."""
        if self._quitting:
            self._quit_done.wait()
            if gevent.getcurrent() is gevent.get_hub().parent:
                self._let_others_end()
            return
        self._quitting = True
        self._quitter = gevent.getcurrent()
        environment = self._shared.environment
        runner = environment.runner
        try:
            running = {w.id for w in runner.clients.all if w.state in (STATE_RUNNING, STATE_SPAWNING)}
            ran = running | ({w.id for w in runner.clients.all} & set(self.requests_by_worker))

            def awaited() -> set[str]:  # a worker whose heartbeats stopped (lost, killed) will send no report
                return reports_awaited(ran, self._last_reported, {w.id for w in runner.clients.missing})

            if awaited():
                if running:
                    runner.stop(send_stop_to_client=False)
                wait_s = LAST_REPORTS_WAIT_S + (environment.stop_timeout or 0.0)
                collect_last_reports(runner, lambda: not awaited(), wait_s, LAST_REPORT_MESSAGE)
            self._write_final()
            quit_master(runner)
        finally:
            self._quit_done.set()

    def _let_others_end(self) -> None:
        """Main greenlet, quit by another greenlet after a SIGTERM: wait (at most `HANDOVER_WAIT_S`) for the process to
        end. Locust's SIGTERM handler runs its shutdown in a greenlet of its own and exits from there (SystemExit,
        handed to the main greenlet); the main one, let go by the quit, would run the same shutdown again and exit
        first — the handler's exit then lands in Locust's atexit wait for its `--processes` workers, a traceback — when
        nothing else delays it, as Locust's 0.5 s sleeps did."""
        if self._quitter is gevent.getcurrent():
            return
        wait_until(lambda: self.signals.name != "SIGTERM", HANDOVER_WAIT_S, look_s=0.02)

    def _on_worker_interrupted(self, environment: Environment, msg: Any, **_: Any) -> None:
        """Master: a worker quit in the middle of the test; the run is incomplete."""
        if self._results is not None and self._results.t_stop is None:
            self._results.worker_goodbyes.setdefault(str(msg.node_id), time.time())

    def _on_test_stop(self, environment: Environment, **_: Any) -> None:
        """Mark the end of the measurement; finalize once the workers' last reports are in.

        The environment's host is redacted until the next test (which puts it back): between
        tests it is only shown — Locust's --html report, its web UI — never used.
        """
        if environment.host:
            environment.host = redact.redact(environment.host)
        if self.control is not None:
            self.control.end_step(reason=ENDED_STOPPED)
        if self._results is not None:
            self._results.stop()

    def _on_quitting(self, environment: Environment, **_: Any) -> None:
        """Final results (the workers' last reports have arrived by now, unless interrupted).

        Quitting before the test stopped (SIGTERM, Ctrl-C during the test) marks the results
        incomplete. A run in which no request succeeded ends with a one-line diagnosis and a
        non-zero exit code (2 when the cause is in the command: host, key, model).
        """
        if self._results is not None and self._results.t_stop is None:
            self._results.interrupt(self.signals.name, self.signals.t_s)
            if self.users is None:  # a master: its workers' last reports
                collect_last_reports(environment.runner)
        self._write_final()
        self.signals.stop()

    def _write_final(self) -> None:
        """The final results (summary.json, the verdict printed) and the exporter's last scrape, once: a master's
        before its workers quit (`_quit`), else when the process quits."""
        if self._results is not None:
            self._results.close()
            self._results = None
        if self.export is not None:
            if self.signals.name is None:  # interrupted: quit now, the orchestrator's grace period is short
                self.export.final_scrape()
            self.export.close()
            self.export = None
