"""The live LLM view on the Locust web UI of the master (or of a local runner).

`attach(web_ui, live)` — called by the plugin's `init` listener when Locust runs a web UI — adds:

- an "LLM" tab to Locust's own UI (and "LLM steps" when the locustfile has a load shape, i.e. a
  sweep), refreshed with Locust's own polling: its rows ride in the `extended_stats` of Locust's
  `/stats/requests` answer;
- `GET /llm`: a page with the LLM metrics over time (SVG charts), the whole run's distributions,
  the per-step table, failures by kind, client saturation warnings and the result downloads,
  refreshed every `POLL_S` (static/llm.html, no external assets);
- `GET /llm/stats.json`: the same data as JSON (`snapshot`), for scripts and dashboards;
- `GET /llm/results/<file>`: summary.json, llm_timeseries.csv, histograms.json of the run;
- `GET /llm/report`: the HTML report of the results folder, built by `llm-locust report` in a
  subprocess (when the `llm_locust.report` package is installed; see `REPORT_PACKAGE`);
- links to /llm on every page of Locust's UI and in its "Download Data" tab.

Every answer of the web UI, Locust's pages and JSON included, is redacted (`llm_locust.redact`).
Every route uses the UI's own authentication (`web_ui.auth_required_if_enabled`). Numbers are
the master's exact merged histograms (`RunMetrics`), never Locust's rounded buckets: the whole
run as the summary would say now (or exactly what summary.json says once written), and the
time series' windows — closed ones as written to llm_timeseries.csv, the still-open ones marked
`partial`.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from flask import Blueprint, Response, make_response, request, send_from_directory
from locust.runners import MasterRunner

from llm_locust import redact
from llm_locust.apis import summary_rates
from llm_locust.load.arrivals import StepSpan
from llm_locust.metrics.client_error import client_error_text
from llm_locust.metrics.declarations import Outcome, latencies
from llm_locust.metrics.vocabulary import (
    COUNT_METRICS,
    HISTOGRAMS_FILE,
    PERCENTILES,
    REPORT_FILE,
    SERIES_PERCENTILES,
    SUMMARY_FILE,
    TIMESERIES_FILE,
    latency_key,
    pct_key,
)
from llm_locust.results.files import iso_time
from llm_locust.runtime.web_tabs import TAB_COLUMNS, step_columns, step_rows, tab_rows

if TYPE_CHECKING:
    from collections.abc import Callable

    from llm_locust.runtime.lead import LiveSnapshot

POLL_S = 2.0
"""How often the /llm page asks for new data (Locust's own tabs poll every 2 s too)."""
SNAPSHOT_CACHE_S = 1.0
"""A snapshot is computed at most once per this many seconds, whatever the number of viewers."""
REPORT_LAG_S = 4.0
"""A window counts as complete this long after its end: every worker has reported past it
(Locust's workers report every 3 s)."""
REPORT_PACKAGE = "llm_locust.report"
"""The package behind `llm-locust report`; the report link appears only when it is installed."""
REPORT_TIMEOUT_S = 300.0
RESULT_FILES = (SUMMARY_FILE, TIMESERIES_FILE, HISTOGRAMS_FILE)
PAGE = Path(__file__).resolve().parent / "static" / "llm.html"
TAB_KEY = "llm"
STEPS_TAB_KEY = "llm-steps"


def attach(web_ui: Any, live: Callable[[], LiveSnapshot]) -> None:
    """Add the LLM view's routes, tabs and links to Locust's `web_ui` (see the module docstring); `live()`
    returns a read-only snapshot of the run (`Lead.live`), all the view reads of it."""
    environment = web_ui.environment
    view = LiveViewData(live, environment)
    blueprint = Blueprint("llm_locust", __name__)
    auth = web_ui.auth_required_if_enabled

    @blueprint.route("/llm")
    @auth
    def page() -> Response:
        return make_response(page_html())

    @blueprint.route("/llm/stats.json")
    @auth
    def stats_json() -> Response:
        return _json(view.snapshot())

    @blueprint.route("/llm/results/<name>")
    @auth
    def result_file(name: str) -> Response:
        folder = view.results_dir()
        if name not in RESULT_FILES or folder is None or not (folder / name).is_file():
            return make_response(f"{name}: no such file in this run's results folder (yet)", 404)
        return send_from_directory(folder.resolve(), name, max_age=0)

    @blueprint.route("/llm/report")
    @auth
    def report() -> Response:
        return view.report()

    web_ui.app.register_blueprint(blueprint, url_prefix=getattr(environment.parsed_options, "web_base_path", None))

    @web_ui.app.after_request
    def extend_locust_pages(response: Response) -> Response:
        if response.status_code == 200 and request.endpoint == "locust.request_stats":  # our tabs' rows ride along
            data = orjson.loads(response.get_data())
            data["extended_stats"] = view.tab_rows()
            response.set_data(orjson.dumps(data))
        elif response.status_code == 200 and request.endpoint == "locust.index":
            response.set_data(response.get_data().replace(b"</body>", _VIEW_LINK + b"</body>", 1))
        return _redacted(response)

    tabs = [{"title": "LLM", "key": TAB_KEY}]
    if environment.shape_class is not None:
        tabs.append({"title": "LLM steps", "key": STEPS_TAB_KEY})
    web_ui.template_args.update(
        extended_tabs=tabs,
        extended_tables=[
            {"key": TAB_KEY, "structure": TAB_COLUMNS},
            {"key": STEPS_TAB_KEY, "structure": step_columns()},
        ],
        extended_csv_files=[
            {"href": "./llm", "title": "LLM live view: charts, steps, downloads"},
            {"href": "./llm/stats.json", "title": "LLM stats (JSON)"},
            {"href": f"./llm/results/{SUMMARY_FILE}", "title": "LLM summary.json (after the run)"},
            {"href": f"./llm/results/{TIMESERIES_FILE}", "title": "LLM time series CSV"},
            {"href": "./llm/report", "title": "LLM report (after the run)"},
        ],
    )


_VIEW_LINK = (
    b'<a id="llm-view-link" href="./llm" style="position:fixed;right:20px;bottom:56px;z-index:2000;'
    b"padding:8px 14px;border-radius:6px;background:#15803d;color:#fff;font:600 14px sans-serif;"
    b'text-decoration:none;box-shadow:0 2px 6px rgba(0,0,0,.3)">LLM charts &#8599;</a>'
)


class LiveViewData:
    """The data behind the view, computed from the run's live snapshot at most once per `SNAPSHOT_CACHE_S`."""

    def __init__(self, live: Callable[[], LiveSnapshot], environment: Any) -> None:
        self.live = live
        self.environment = environment
        self._cached: dict[str, Any] | None = None
        self._cached_at_s = 0.0

    def results_dir(self) -> Path | None:
        """The results folder of the current (or last) test, None before the first test."""
        return self.live().results_dir

    def snapshot(self) -> dict[str, Any]:
        """The view's data (see README "Live LLM view"): run state, users, requests in flight,
        the summary so far (the summary.json document; exactly it once `final`) and its client error budget in words
        (`metrics.client_error.client_error_text`), the throughputs it shows (`rates`: `apis.summary_rates`), the
        last complete window, the time series history, steps with their status, warnings, links."""
        now_s = time.monotonic()
        if self._cached is None or now_s - self._cached_at_s >= SNAPSHOT_CACHE_S:
            self._cached, self._cached_at_s = self._compute(), now_s
        return self._cached

    def _compute(self) -> dict[str, Any]:
        live = self.live()
        runner = self.environment.runner
        summary, history, final = live.summary, list(live.history), live.final
        return {
            "time": iso_time(time.time()),
            "state": runner.state,
            "users": runner.user_count,
            "workers": runner.worker_count if isinstance(runner, MasterRunner) else None,
            "in_flight": live.in_flight,
            "interval_s": live.interval_s,
            "final": final,
            "results_dir": None if live.results_dir is None else str(live.results_dir.resolve()),
            "settings": summary["settings"] if summary else live.settings,
            "summary": summary,
            "rates": [[rate.key, rate.unit, rate.digits] for rate in summary_rates(summary or {})],
            "client_error": client_error_text(budget) if (budget := summary and summary.get("client_error")) else None,
            "last_window": _last_complete(history, live.interval_s, final),
            "history": history,
            "steps": _steps(summary, live.spans),
            "warnings": _warnings(summary),
            "links": self._links(final),
        }

    def _links(self, final: bool) -> dict[str, str | None]:
        """Relative URLs of the result downloads; None while a file does not exist yet."""
        folder = self.results_dir()
        links: dict[str, str | None] = {"page": "llm", "stats": "llm/stats.json"}
        for key, name in (("summary", SUMMARY_FILE), ("timeseries", TIMESERIES_FILE), ("histograms", HISTOGRAMS_FILE)):
            ready = folder is not None and (final or name == TIMESERIES_FILE) and (folder / name).is_file()
            links[key] = f"llm/results/{name}" if ready else None
        links["report"] = "llm/report" if final and report_available() else None
        return links

    def tab_rows(self) -> list[dict[str, Any]]:
        """The rows of the "LLM" and "LLM steps" tabs, in Locust's `extended_stats` shape."""
        snap = self.snapshot()
        return [{"key": TAB_KEY, "data": tab_rows(snap)}, {"key": STEPS_TAB_KEY, "data": step_rows(snap["steps"])}]

    def report(self) -> Response:
        """The HTML report of the finished run (built once, rebuilt if summary.json is newer)."""
        live = self.live()
        folder = live.results_dir
        if folder is None or not live.final:
            return make_response("the report is built from the results folder once the run is over", 409)
        if not report_available():
            return make_response(f"the report builder ({REPORT_PACKAGE}) is not installed in this version", 404)
        path = folder / REPORT_FILE
        if not path.is_file() or path.stat().st_mtime < (folder / SUMMARY_FILE).stat().st_mtime:
            error = build_report_html(folder, path)
            if error is not None:
                return make_response(f"llm-locust report failed: {error}", 500)
        return send_from_directory(folder.resolve(), REPORT_FILE, max_age=0)


def page_html() -> str:
    """The /llm page with the declared latencies filled in (`metrics/declarations.py`): a chart and a steps-table
    column per latency of the time series; the run table's metrics — the latencies of successful requests (the
    failed requests' TTFT and the cancelled requests' E2E stay in summary.json), then the counts — and statistics,
    by summary.json key and label."""
    charts = [
        {"key": m.name, "title": f"{m.label} ms", "series": [[latency_key(m.name, p), p] for p in SERIES_PERCENTILES]}
        for m in latencies(series=True)
    ]
    metrics = [[latency_key(m.name), f"{m.label} ms"] for m in latencies(outcome=Outcome.OK)]
    metrics += [[m, m.replace("_", " ")] for m in COUNT_METRICS]
    stats = ["count", "mean", "min", *(pct_key(p) for p in PERCENTILES), "max"]
    page = PAGE.read_text(encoding="utf-8")
    for placeholder, value in (("__LATENCY_CHARTS__", charts), ("__METRICS__", metrics), ("__STATS__", stats)):
        page = page.replace(f'"{placeholder}"', orjson.dumps(value).decode())
    return page


def _steps(summary: dict[str, Any] | None, spans: tuple[StepSpan, ...]) -> list[dict[str, Any]]:
    """The summary's steps, each with its status now: warm-up, measuring or done."""
    if summary is None or not spans:
        return []
    now_s = time.time()
    statuses = [
        "done" if span.end_s is not None else "warm-up" if now_s < span.measure_from_s else "measuring"
        for span in spans
    ]
    return [{**step, "status": status} for step, status in zip(summary["steps"], statuses, strict=False)]


def _redacted(response: Response) -> Response:
    """`response` with every registered secret redacted, when it is a page or JSON built in memory
    (Locust's pages and answers — error messages, exceptions, the form's host — and ours); files
    sent from disk pass as they are (the results folder holds no secret)."""
    if not redact.has_secrets() or response.direct_passthrough or response.is_streamed:
        return response
    if not (response.mimetype.startswith("text/") or response.mimetype.endswith(("json", "javascript"))):
        return response
    text = response.get_data().decode("utf-8", errors="surrogateescape")
    redacted = redact.redact(text)
    if redacted != text:
        response.set_data(redacted.encode("utf-8", errors="surrogateescape"))
    return response


def report_available() -> bool:
    """True when `llm-locust report` (the `REPORT_PACKAGE`) is installed."""
    return importlib.util.find_spec(REPORT_PACKAGE) is not None


def build_report_html(results_dir: Path, output: Path) -> str | None:
    """Run `llm-locust report RESULTS_DIR -o OUTPUT --no-png` in a subprocess (gevent keeps
    serving meanwhile; the report code never runs inside Locust); return None, or its error."""
    command = [sys.executable, "-m", "llm_locust.cli", "report", str(results_dir), "-o", str(output), "--no-png"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=REPORT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"no report after {REPORT_TIMEOUT_S:g} s"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return lines[-1] if lines else f"exit code {proc.returncode}"
    return None


def _last_complete(history: list[dict[str, Any]], interval_s: float, final: bool) -> dict[str, Any] | None:
    """The newest window every worker has reported past (all of them once the run is final)."""
    horizon_s = float("inf") if final else time.time() - REPORT_LAG_S
    complete = [row for row in history if row["window_start_epoch_s"] + interval_s <= horizon_s]
    return complete[-1] if complete else None


def _warnings(summary: dict[str, Any] | None) -> list[str]:
    """The run's warnings once a request finished: the summary's (client saturation as `runtime.saturation.assess`
    judges it — sustained CPU near one core with the loop lag that follows —, open loop behind schedule, workers
    lost, ...). Locust's own CPU flag, raised by one sample above its threshold, is not shown: one busy second is
    no saturation."""
    if summary is not None and summary["throughput"]["requests_ok"] + summary["throughput"]["requests_failed"]:
        return list(summary["warnings"])
    return []


def _json(document: dict[str, Any]) -> Response:
    response = make_response(orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS))
    response.mimetype = "application/json"
    response.headers["Cache-Control"] = "no-store"
    return response
