"""The console's summary of a run: the fixed-width table of summary.json's latencies (each percentile with its ±
interval), throughput and failures, and the accuracy and efficiency lines.
"""

from __future__ import annotations

from typing import Any

from llm_locust.apis import summary_counting, summary_rates
from llm_locust.load.search import search_line
from llm_locust.metrics.client_error import client_error_line
from llm_locust.metrics.declarations import latencies
from llm_locust.metrics.intervals import half_width
from llm_locust.metrics.vocabulary import (
    latency_key,
)


def summary_table(summary: dict[str, Any]) -> str:
    """A fixed-width console table of the summary's latencies, throughput and failures."""
    metrics = summary["metrics"]
    t = summary["throughput"]
    counting = summary_counting(summary)  # what the run's API counts: output tokens, or inputs (embeddings)
    rows = counting.latencies or [(m.name, m.label) for m in latencies(series=True)]
    width = max(len("LLM metric"), *(len(label + " ms") for _, label in rows)) + 1  # every label in its column
    lines = [
        f"{'LLM metric':<{width}}{'count':>9}{'mean':>10}{'p50':>18}{'p90':>18}{'p99':>18}{'max':>10}",
    ]
    for name, label in rows:
        s = metrics[latency_key(name)]
        cells = "".join(f"{_with_interval(s, k):>18}" for k in ("p50", "p90", "p99"))
        lines.append(f"{label + ' ms':<{width}}{s['count']:>9}{_fmt(s['mean']):>10}{cells}{_fmt(s['max']):>10}")
    rates = ", ".join(f"{t[rate.key]:.{rate.digits}f} {rate.unit}" for rate in summary_rates(summary))
    cut = (summary.get("unfinished") or {}).get("requests")
    lines.append(
        f"Throughput: {rates}, {t['requests_per_s']:.2f} req/s "
        f"over {t['duration_s']:.1f} s ({t['requests_ok']} ok, {t['requests_failed']} failed"
        + (f", {t['requests_cancelled']} cancelled" if t.get("requests_cancelled") else "")
        + (f"; {cut} cut by the run's end, not counted)" if cut else ")")
    )
    lines += efficiency_lines(summary)
    accuracy = summary.get("accuracy")
    if accuracy:
        lines.append(accuracy_line(accuracy))
    failures = summary["failures"]
    lines.append("Failures: " + (", ".join(f"{k} {v}" for k, v in sorted(failures.items())) if failures else "none"))
    paused = summary.get("backoff") or {}
    if paused.get("pauses"):
        lines.append(
            f"Backed off: {paused['pauses']} pauses, {paused['paused_s']:.1f} s in total (users waiting after failures "
            "without an answer: --backoff-max-s)"
        )
    throttled = summary.get("throttling", {})
    if throttled.get("http_429"):
        lines.append(
            f"Throttled (HTTP 429): {throttled['http_429']} requests, "
            f"{100 * throttled['share_of_requests']:.1f} % of all, {throttled['per_s']:.2f}/s"
        )
    if summary.get("client_error"):
        lines.append(client_error_line(summary["client_error"]))
    if summary.get("status") == "incomplete":
        lines.append("INCOMPLETE: the run was interrupted or lost workers; the results hold what was measured")
    for warning in summary.get("warnings", []):
        lines.append(f"WARNING: {warning}")
    if summary.get("search"):
        lines.append(search_line(summary["search"]))
    verdict = summary.get("verdict")
    if verdict is not None:
        lines.append("Verdict: " + ("PASSED" if verdict["passed"] else "FAILED: " + "; ".join(verdict["reasons"])))
    return "\n".join(lines)


def accuracy_line(accuracy: dict[str, Any]) -> str:
    """The console line of summary.json's `accuracy` (`scoring.accuracy_stats`)."""
    return (
        f"Accuracy: {100 * accuracy['accuracy']:.1f} % of {accuracy['scored']} scored answers ({accuracy['correct']} "
        f"right; 95 % CI {100 * accuracy['ci95_low']:.1f}-{100 * accuracy['ci95_high']:.1f} %)"
    )


def efficiency_lines(summary: dict[str, Any]) -> list[str]:
    """The console lines of the summary's `energy` and `cost` (none for what the run did not measure)."""
    lines = []
    energy, cost = summary.get("energy"), summary.get("cost")
    if energy:
        lines.append(
            f"Energy (DCGM power): {_fmt(energy['joules_per_output_token'])} J/output token, "
            f"{_fmt(energy['joules_per_request'])} J/request, mean {_fmt(energy['mean_power_w'])} W"
        )
    if cost:
        lines.append(
            f"Cost at ${cost['usd_per_hour']:g}/h: ${_fmt(cost['usd_per_million_output_tokens'])} per million output "
            f"tokens, ${_fmt(cost['usd_per_million_input_tokens'])} per million input tokens"
        )
    return lines


def _with_interval(stats: dict[str, Any], key: str) -> str:
    """Percentile `key` of `stats` for the table, with its 95 % interval as ± (`intervals.half_width`; `± ?`: an end is
    open) when the summary has one."""
    value, interval = stats[key], stats.get(f"{key}_ci95")
    if value is None or interval is None:
        return _fmt(value)
    h = half_width(value, interval)
    return f"{_fmt(value)} ±{'?' if h is None else _fmt(h)}"


def _fmt(value: float | None) -> str:
    """A statistic for the table: '-' when there is no data."""
    return "-" if value is None else f"{value:.2f}"
