"""The words every stage and the report share: metric names, units, statistics, column keys, result file names.

The latencies themselves are declared in `declarations.py` (adding one: its record property and one declaration
there). Plain data and two formulas (no Locust, no gevent, no numpy), so the report and the simulator can read it
too.
"""

from __future__ import annotations

COUNT_METRICS = ("output_tokens", "output_tokens_cancelled", "agent_steps", "agent_tool_calls")
"""Count histograms (no unit suffix): output tokens per successful request, and per cancelled request; requests and
tool calls per agent session (that succeeded). The latency histograms are declared in `declarations.LATENCIES`."""

PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
"""The percentiles of every distribution in summary.json (`p50` .. `p99_9`), besides count, mean, min, max."""
SERIES_PERCENTILES = ("p50", "p90", "p99")
"""The percentiles of each latency in llm_timeseries.csv and the drift windows."""

SUMMARY_FILE = "summary.json"
TIMESERIES_FILE = "llm_timeseries.csv"
HISTOGRAMS_FILE = "histograms.json"
PROCESSES_FILE = "workers_timeseries.csv"
SERVER_METRICS_FILE = "server_metrics.csv"
TELEMETRY_FILE = "telemetry.csv"
REPORT_FILE = "report.html"


def pct_key(p: float) -> str:
    """The statistic's key of percentile `p`: 50.0 -> "p50", 99.9 -> "p99_9"."""
    return "p" + f"{p:g}".replace(".", "_")


def ci_key(p: float) -> str:
    """The key of percentile `p`'s 95 % confidence interval, beside it in summary.json: 99.0 -> "p99_ci95"."""
    return pct_key(p) + "_ci95"


def latency_key(metric: str, stat: str | None = None) -> str:
    """A latency's key in files, in ms: ("ttft") -> "ttft_ms", ("ttft", "p90") -> "ttft_ms_p90"."""
    return f"{metric}_ms" if stat is None else f"{metric}_ms_{stat}"


def per_s(count: float, span_s: float) -> float:
    """`count` per second over `span_s` seconds, rounded to 3 decimals (0.0 over an empty span)."""
    return round(count * (1.0 / span_s if span_s > 0 else 0.0), 3)
