"""The rows of the "LLM" and "LLM steps" tabs added to Locust's own web UI, from the live view's snapshot.

Plain formatting (numbers with 2 decimals, "-" for none); `webui` serves them in Locust's `extended_stats`.
"""

from __future__ import annotations

from typing import Any

from llm_locust.apis import summary_counting, summary_rates
from llm_locust.metrics.declarations import latencies
from llm_locust.metrics.vocabulary import SERIES_PERCENTILES, latency_key

TAB_COLUMNS = [
    {"key": "metric", "title": "LLM metric"},
    {"key": "window", "title": "Last complete window"},
    {"key": "run", "title": "Whole run"},
]


def latency_rows() -> list[tuple[str, str]]:
    """(name, label) of each latency the tabs show: those of the time series (`LatencyMetric.series`)."""
    return [(m.name, m.label) for m in latencies(series=True)]


def step_columns() -> list[dict[str, str]]:
    """The columns of the "LLM steps" tab (Locust's `extended_tables` structure)."""
    return [
        {"key": "step", "title": "Step"},
        {"key": "status", "title": "Status"},
        {"key": "offered", "title": "Offered req/s"},
        {"key": "achieved", "title": "Achieved req/s"},
        {"key": "tokens", "title": "Output tok/s"},
        *({"key": metric, "title": f"{label} ms p50 / p90 / p99"} for metric, label in latency_rows()),
        {"key": "failed", "title": "Failed"},
    ]


def tab_rows(snap: dict[str, Any]) -> list[dict[str, str]]:
    """The "LLM" tab: one row per metric, the last complete window beside the whole run."""
    window = snap["last_window"] or {}
    summary = snap["summary"]
    run = summary["throughput"] if summary else {}
    metrics = summary["metrics"] if summary else {}

    def latency(metric: str, source: str) -> str:
        if source == "window":
            return " / ".join(_num(window.get(latency_key(metric, p))) for p in SERIES_PERCENTILES)
        stats = metrics.get(latency_key(metric), {})
        return " / ".join(_num(stats.get(p)) for p in SERIES_PERCENTILES)

    counting = summary_counting(summary or {})  # what the run's API counts: output tokens, or inputs (embeddings)
    rates = [
        (rate.label, _num(window.get(rate.key), max(2, rate.digits)), _num(run.get(rate.key), max(2, rate.digits)))
        for rate in summary_rates(summary or {})
    ]  # RTF: 3 decimals
    shown = latency_rows() if counting.latencies is None else counting.latencies
    rows = [
        ("Window / run start", window.get("time", "-"), summary["run"]["start_time"] if summary else "-"),
        *rates,
        ("Requests/s (successful)", _num(window.get("requests_per_s")), _num(run.get("requests_per_s"))),
        ("Requests ok / failed", _ok_failed(window), _ok_failed(run)),
        *((f"{label} ms p50 / p90 / p99", latency(m, "window"), latency(m, "run")) for m, label in shown),
        ("Requests in flight (now)", str(snap["in_flight"]), "-"),
        ("Users (now / max)", str(snap["users"]), str(summary["run"]["users_max"]) if summary else "-"),
        ("Failures by kind", "-", _kinds(summary["failures"]) if summary else "-"),
        *(("Warning", "-", text) for text in snap["warnings"]),
        ("Results folder", "final" if snap["final"] else "being written", snap["results_dir"] or "-"),
    ]  # fmt: skip
    return [{"metric": m, "window": w, "run": r} for m, w, r in rows]


def step_rows(steps: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The "LLM steps" tab: one row per sweep step."""
    rows = []
    for step in steps:
        metrics = step["metrics"]
        row = {
            "step": f"{step['index']}: {step['label']}",
            "status": step["status"],
            "offered": _num(step["rate_per_s"]),
            "achieved": _num(step["achieved_rate_per_s"]),
            "tokens": _num(step["throughput"]["output_tokens_per_s"]),
            "failed": str(step["throughput"]["requests_failed"]),
        }
        for metric, _label in latency_rows():
            row[metric] = " / ".join(_num(metrics[latency_key(metric)][p]) for p in SERIES_PERCENTILES)
        rows.append(row)
    return rows


def _num(value: Any, digits: int = 2) -> str:
    """A number as the tabs show it (2 decimals, or `digits`), '-' when there is none."""
    return "-" if value is None or value == "" else f"{value:.{digits}f}"


def _ok_failed(values: dict[str, Any]) -> str:
    """'ok / failed' request counts of a window or of the run."""
    return f"{values['requests_ok']} / {values['requests_failed']}" if "requests_ok" in values else "-"


def _kinds(failures: dict[str, int]) -> str:
    return ", ".join(f"{kind} {count}" for kind, count in sorted(failures.items())) or "none"
