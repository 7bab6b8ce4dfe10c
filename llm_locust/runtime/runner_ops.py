"""What llm-locust asks of Locust's runner: stop the test, collect the workers' last reports, redact exceptions.

Also the worker → master message and stats-report keys (the wire protocol riding on Locust's own reports).
"""

from __future__ import annotations

import csv
import functools
import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
from locust import argument_parser
from locust.env import Environment
from locust.rpc import Message
from locust.runners import MasterRunner
from locust.stats import StatsCSVFileWriter, StatsError

from llm_locust import redact

INTERRUPTED_MESSAGE = "llm_locust_interrupted"
"""Worker → master: this worker is quitting while the test runs (its data after this is lost)."""
LAST_REPORT_MESSAGE = "llm_locust_last_report"
"""Master → worker: the run ends — stop your users and send your last report now (`send_last_report`), then wait
for Locust's quit: the master writes its results and prints its verdict before its workers exit."""
WIRE_KEY = "llm_locust"
"""Key of our delta in the data of Locust's worker stats report."""
IN_FLIGHT_KEY = "llm_locust_in_flight"
"""Key of the worker's number of requests in flight in its stats report."""
UNFINISHED_KEY = "llm_locust_unfinished"
"""Key of the worker's requests cut by the test's end (`metrics.unfinished.Unfinished.as_dict`), in its first stats
report after its users stopped."""
LOW_WATER_KEY = "llm_locust_low_water"
"""Key of the worker's pacer low-water mark (open loop: the first arrival of its share not handed out yet)."""
SATURATION_KEY = "llm_locust_saturation"
"""Key of the worker's CPU / event-loop lag sample (`LoopMonitor.take`) in its stats report."""
QUEUE_DELAY_KEY = "llm_locust_queue_delay"
"""Key of the worker's own queue delay (open loop: its send error) over the test so far, in ms
(`recorder.ProcessLatency.distribution_ms`), in its stats report once it sent a request with a due time."""
TOKENS_KEY = "llm_locust_tokens"
"""Key of the worker's OAuth token counts (`UsersPart.token_counts`: flow, refreshes, failed refreshes)."""
REQUEST_LINES_KEY = "llm_locust_request_lines"
"""--requests-jsonl: key of the worker's request lines since its last report (bytes, `results.request_lines`)."""
REQUEST_LINES_DROPPED_KEY = "llm_locust_request_lines_dropped"
"""... and of the number of lines it dropped meanwhile (its buffer was full)."""
CLOCK_KEY = "llm_locust_clock"
"""Key of the worker's clock offset from its master (`load.clock.Offset.to_wire`), once measured."""


def reports_awaited(ran: set[str], reported: set[str], missing: set[str]) -> set[str]:
    """Master, at the run's end: the workers whose last report is still to come — those that ran users, less those
    that sent it and those Locust marked missing (their heartbeats stopped: killed or cut off, they send nothing; the
    wait for them held a master that lost a worker for 3 s + --stop-timeout, 33 s under compose's config)."""
    return ran - reported - missing


def collect_last_reports(
    runner: MasterRunner, done: Callable[[], bool] | None = None, wait_s: float = 3.0, message: str = "quit"
) -> None:
    """Master: ask each worker for its last report with `message` — "quit": it answers with a last stats report, then
    its goodbye (Locust's own shutdown would only tell them after the results are written, and wait 0.5 s for their
    last reports); `LAST_REPORT_MESSAGE`: it stops its users and reports, and stays until Locust's quit — and wait up
    to `wait_s` until `done()` (default: all of them gone)."""
    for client in runner.clients.all:
        runner.server.send_to_client(Message(message, None, client.id))
    wait_until(done if done is not None else lambda: not len(runner.clients), wait_s, look_s=0.05)


def wait_until(done: Callable[[], bool], wait_s: float, look_s: float) -> None:
    """Let the loop run until `done()`, looking every `look_s` seconds, for at most `wait_s`."""
    deadline = time.monotonic() + wait_s
    while not done() and time.monotonic() < deadline:
        gevent.sleep(look_s)


WORKERS_WAIT_S = 1.0
"""Headless master starting: the longest it waits for its workers as they connect (Locust's own wait looks once a
second)."""


def await_workers(runner: MasterRunner, expected: int) -> None:
    """Headless master, before Locust's own wait for `--expect-workers`: wait (at most `WORKERS_WAIT_S`) for the
    `expected` workers to be ready, looking every 20 ms. Locust looks once a second — at once, when none is there
    yet, then 1 s later — so a run whose workers are ready in 0.3 s (`--processes`) started 0.7 s late; workers that
    take longer are Locust's to wait for, on its own one-second steps, as before."""
    wait_until(lambda: len(runner.clients.ready) >= expected, WORKERS_WAIT_S, look_s=0.02)


QUIT_WAIT_S = 0.5
"""Master quitting: the longest it waits for its workers' goodbyes (Locust's own quit always sleeps this long)."""


def quit_master(runner: MasterRunner) -> None:
    """Master: Locust's `MasterRunner.quit` — stop, tell the workers to quit, stop the runner's greenlets — but done
    as soon as every worker said goodbye, not after a fixed 0.5 s "for their last reports": those are in by now
    (`Lead._quit`). A worker gone silent is still given `QUIT_WAIT_S`."""
    runner.stop(send_stop_to_client=False)
    collect_last_reports(runner, wait_s=QUIT_WAIT_S)
    runner.greenlet.kill(block=True)


def report_now(runner: Any) -> None:
    """Worker: send a stats report to the master now, not at Locust's next interval (`WORKER_REPORT_INTERVAL`); it
    fires report_to_master: the delta rides along."""
    runner._send_stats()


def send_last_report(environment: Environment, **_: Any) -> None:
    """Worker, asked by its master (`LAST_REPORT_MESSAGE`): stop the users and send the last report, as Locust's
    "quit" does, without quitting: a worker that exits before its master printed the verdict ends a compose run
    (`--exit-code-from master` stops every container when one exits) before the master has written its results."""
    runner = environment.runner
    runner.stop()
    report_now(runner)  # the requests the stop cut ride along


def redact_exceptions(runner: Any) -> None:
    """Redact each exception text and traceback as the runner collects it (from its own users or
    its workers): Locust's exceptions CSV, HTML report and web UI show what it collected."""
    log_exception = runner.log_exception

    def log_redacted(node_id: str, msg: str, formatted_tb: str) -> None:
        log_exception(node_id, redact.redact(msg), redact.redact(formatted_tb))

    runner.log_exception = log_redacted


def stop_test(environment: Environment) -> None:
    """Stop the test after a user error: quit a headless run, stop the test in the web UI."""
    options = environment.parsed_options
    if options is not None and getattr(options, "headless", False):
        environment.runner.quit()
    else:
        environment.runner.stop()


def top_error(environment: Environment) -> str | None:
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


def parse_locust_defaults_once() -> None:
    """Worker: Locust's own defaults parsed once, not once per option of every spawn message. Its `WorkerRunner`
    calls `argument_parser.default_args_dict()` inside a comprehension over the master's options, so each spawn
    message (every step of a distributed sweep, every change of users) builds Locust's whole parser ~100 times: a
    100–300 ms stall of the worker's loop, carried by every request in flight then (the demo's TTFT p99 at 4 users
    was 178 ms against a p50 of 29 ms). The dict depends only on Locust's built-in options and is only read."""
    if not hasattr(argument_parser.default_args_dict, "cache_info"):
        argument_parser.default_args_dict = functools.cache(argument_parser.default_args_dict)


_parsed: set[Callable[[Any], None]] = set()
"""The checks that saw this process's command line: Locust parses it again for each page of its web UI."""


def after_first_parse(parser: Any, check: Callable[[Any], None]) -> None:
    """Have `check(options)` run once per process, right after Locust's main has parsed the process's command line
    (its first parse of `sys.argv`) with `parser` — before `--processes` forks, any file is opened or socket made."""
    parse_args = parser.parse_args

    def parse_and_check(args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        options = parse_args(args, *rest, **kwargs)
        if args is None and check not in _parsed:
            _parsed.add(check)
            check(options)
        return options

    parser.parse_args = parse_and_check


def keep_csv_files_open(**_: Any) -> None:
    """As the process quits (Locust's `quit` event, fired just before it closes the `--csv` files): write Locust's
    CSV tables once more and flush them instead of closing them.

    Once more: Locust's writer greenlet rewrites them each second, and its quit waited long enough for one more turn
    after the workers' last reports; the quit now ends when the workers said goodbye (`quit_master`), so the tables
    are written here from the final stats. Not closed: the writer keeps running (it is never stopped); with
    `--processes` the master's exit then waits for its workers in an atexit handler, the writer wakes meanwhile and
    would write to the closed files (`ValueError: I/O operation on closed file`, a traceback after the run). Left
    open, each of its rewrites is whole (no greenlet switch inside one) and the files close with the process."""
    gc.unfreeze()  # the process is quitting: objects frozen at the test's start (`gc_policy.freeze_heap`) are seen
    for obj in gc.get_objects():
        if isinstance(obj, StatsCSVFileWriter):
            obj.close_files = functools.partial(_write_csv_files, obj)  # type: ignore[method-assign]


def _write_csv_files(writer: StatsCSVFileWriter) -> None:
    """Rewrite `writer`'s tables (the same header, so the positions its loop keeps still hold), add the history's
    row of now, and flush."""
    for handle, table, write in (
        (writer.requests_csv_filehandle, writer.requests_csv_writer, writer.requests_csv),
        (writer.failures_csv_filehandle, writer.failures_csv_writer, writer.failures_csv),
        (writer.exceptions_csv_filehandle, writer.exceptions_csv_writer, writer.exceptions_csv),
    ):
        handle.seek(0)
        write(table)
        handle.truncate()
    writer._stats_history_data_rows(writer.stats_history_csv_writer, time.time())
    _flush_csv_files(writer)


def _flush_csv_files(writer: StatsCSVFileWriter) -> None:
    """Write `writer`'s buffered rows to its files (they stay open)."""
    writer.requests_flush()
    writer.stats_history_flush()
    writer.failures_flush()
    writer.exceptions_flush()


def move_csv_files(environment: Environment, prefix: str) -> bool:
    """A test of the web UI after the first, moved to a new results folder: Locust's `--csv` tables (its one
    `StatsCSVFileWriter` per process, which the web UI holds) go on in new files at `prefix`; the earlier test's files
    are closed as they are. False when the process writes no tables.

    Each new file starts with the same header row as the one it replaces, so the positions the writer's loop keeps
    (where its rows start) still hold; nothing switches greenlets in between."""
    writer = getattr(environment.web_ui, "stats_csv_writer", None)
    if not isinstance(writer, StatsCSVFileWriter):
        return False
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    _flush_csv_files(writer)
    old = (
        writer.requests_csv_filehandle,
        writer.stats_history_csv_filehandle,
        writer.failures_csv_filehandle,
        writer.exceptions_csv_filehandle,
    )
    writer.base_filepath = prefix
    tables = (
        ("requests", prefix + "_stats.csv", writer.requests_csv_columns),
        ("stats_history", writer.stats_history_file_name(), writer.stats_history_csv_columns),
        ("failures", prefix + "_failures.csv", writer.failures_columns),
        ("exceptions", prefix + "_exceptions.csv", writer.exceptions_columns),
    )
    for name, path, columns in tables:
        handle = open(path, "w")  # noqa: SIM115 (the writer keeps it open, as Locust does)
        table = csv.writer(handle)
        table.writerow(columns)
        setattr(writer, f"{name}_csv_filehandle", handle)
        setattr(writer, f"{name}_csv_writer", table)
    for handle in old:
        handle.close()
    return True
