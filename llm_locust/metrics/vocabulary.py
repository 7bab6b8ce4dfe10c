"""The words every stage and the report share: metric names, units, statistics, column keys, result file names.

Adding a metric: define it on `record.RequestRecord`, record it in `histograms.WindowMetrics.add`, and name it here;
summary.json, histograms.json, the SLO parser and the report's full tables follow these tuples. Plain data and
two formulas (no Locust, no gevent, no numpy), so the report and the simulator can read it too.
"""

from __future__ import annotations

LATENCY_METRICS = (
    "ttft", "ttfo", "tpot", "itl", "e2e", "queue_delay", "ttft_failed", "e2e_cancelled", "connect", "tls_handshake",
    "ttfb",
)  # fmt: skip
"""Latency histograms (integer µs inside, ms in every file: `ttft_ms`): time to first token / first output, time per
output token, inter-token latency (every gap between token events), end-to-end latency — of successful requests
—, the client queue delay (open loop: how late each request was sent, failed or not), and the TTFT of failed
requests that got a first token before failing (e.g. a stream cut later), kept apart so that it never mixes into
the successes' distributions, and the E2E of cancelled requests (--cancel-rate: to the last token before the client
closed the stream; their TTFT counts in `ttft`), and the connection's phases (`PHASE_LATENCIES`)."""
COUNT_METRICS = ("output_tokens", "output_tokens_cancelled")
"""Count histograms (no unit suffix): output tokens per successful request, and per cancelled request."""
HISTOGRAM_METRICS = LATENCY_METRICS + COUNT_METRICS
"""Every histogram a time window keeps, and histograms.json holds."""
REQUEST_LATENCIES = ("ttft", "ttfo", "tpot", "itl", "e2e")
"""The latencies of successful requests: what --slo and the report's summary tables cover."""
SERIES_LATENCIES = ("ttft", "tpot", "itl", "e2e")
"""The latencies in llm_timeseries.csv, each with `SERIES_PERCENTILES`."""
PHASE_LATENCIES = ("connect", "tls_handshake", "ttfb")
"""The phases of a request's connection (`record.RequestRecord`): TCP connect and TLS handshake of a new connection
(none on a reused one), time to the response headers; of every request that got that far, failed or not. In
llm_timeseries.csv after the older columns, each with `SERIES_PERCENTILES`, and in the live view."""
DRIFT_LATENCIES = ("ttft", "tpot")
"""The latencies whose drift between segments of a run is measured (`drift`)."""
LATENCY_LABELS = {
    "ttft": "TTFT", "ttfo": "TTFO", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E",
    "queue_delay": "client queue delay", "ttft_failed": "TTFT of failed requests",
    "e2e_cancelled": "E2E of cancelled requests", "connect": "TCP connect", "tls_handshake": "TLS handshake",
    "ttfb": "time to response headers",
}  # fmt: skip
"""The short name of each latency in tables and charts (the unit, ms, added where shown)."""

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


def latency_key(metric: str, stat: str | None = None) -> str:
    """A latency's key in files, in ms: ("ttft") -> "ttft_ms", ("ttft", "p90") -> "ttft_ms_p90"."""
    return f"{metric}_ms" if stat is None else f"{metric}_ms_{stat}"


def per_s(count: float, span_s: float) -> float:
    """`count` per second over `span_s` seconds, rounded to 3 decimals (0.0 over an empty span)."""
    return round(count * (1.0 / span_s if span_s > 0 else 0.0), 3)
