"""The results folder: summary.json, the LLM time series CSV, and the console summary table.

Does not import Locust (the report tooling reads these files in plain Python processes).
Files are written so that a killed run leaves valid files: summary.json atomically (temp file
+ rename), the time series one flushed row per interval.
"""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path
from typing import Any

import orjson

from llm_locust.metrics import LATENCY_METRICS, WindowMetrics

SUMMARY_FILE = "summary.json"
TIMESERIES_FILE = "llm_timeseries.csv"
TIMESERIES_METRICS = ("ttft", "tpot", "itl", "e2e")
TIMESERIES_PERCENTILES = ("p50", "p90", "p99")
TIMESERIES_COLUMNS = (
    "time",
    "window_start_epoch_s",
    "elapsed_s",
    "users",
    "requests_ok",
    "requests_failed",
    "requests_per_s",
    "output_tokens_per_s",
    *(f"{m}_ms_{p}" for m in TIMESERIES_METRICS for p in TIMESERIES_PERCENTILES),
)


def metric_stats(window: WindowMetrics) -> dict[str, dict[str, Any]]:
    """Per-metric distributions: latencies in ms (`ttft_ms`, ...), output tokens per request."""
    stats = {f"{m}_ms": window.distribution(m, scale=1000.0) for m in LATENCY_METRICS}
    stats["output_tokens"] = window.distribution("output_tokens")
    return stats


def throughput(window: WindowMetrics, duration_s: float) -> dict[str, float | int]:
    """Token and request rates of `window` over `duration_s` seconds; failures never count."""
    per_s = 1.0 / duration_s if duration_s > 0 else 0.0
    return {
        "duration_s": round(duration_s, 3),
        "requests_ok": window.requests_ok,
        "requests_failed": window.requests_failed,
        "output_tokens": window.output_tokens,
        "prompt_tokens": window.prompt_tokens,
        "requests_per_s": round(window.requests_ok * per_s, 3),
        "output_tokens_per_s": round(window.output_tokens * per_s, 3),
        "total_tokens_per_s": round((window.output_tokens + window.prompt_tokens) * per_s, 3),
    }


def token_accounting(window: WindowMetrics) -> dict[str, Any]:
    """Where output-token counts came from and how server usage and client events agree."""
    return {
        "sources": dict(window.token_sources),
        "token_events": window.token_events,
        "usage_event_mismatches": window.usage_event_mismatches,
        "tokens_per_event": round(window.output_tokens / window.token_events, 4) if window.token_events else None,
    }


def write_summary(results_dir: Path, summary: dict[str, Any]) -> Path:
    """Write summary.json atomically; return its path."""
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / SUMMARY_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    os.replace(tmp, path)
    return path


class TimeseriesWriter:
    """Appends one CSV row per closed window to llm_timeseries.csv, flushed as it goes."""

    def __init__(self, results_dir: Path, interval_s: float, t_start_epoch_s: float) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        self.path = results_dir / TIMESERIES_FILE
        self.interval_s = interval_s
        self.t_start_epoch_s = t_start_epoch_s
        self._file = self.path.open("w", newline="")
        self._csv = csv.writer(self._file)
        self._csv.writerow(TIMESERIES_COLUMNS)
        self._file.flush()
        self.rows = 0

    def write(self, start_epoch_s: int, window: WindowMetrics, users: int) -> None:
        """Write the row of the window that starts at `start_epoch_s` (epoch seconds)."""
        per_s = 1.0 / self.interval_s
        row: list[Any] = [
            time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start_epoch_s)),
            start_epoch_s,
            round(start_epoch_s - self.t_start_epoch_s, 3),
            users,
            window.requests_ok,
            window.requests_failed,
            round(window.requests_ok * per_s, 3),
            round(window.output_tokens * per_s, 3),
        ]
        for metric in TIMESERIES_METRICS:
            stats = window.distribution(metric, scale=1000.0)
            row.extend("" if stats[p] is None else stats[p] for p in TIMESERIES_PERCENTILES)
        self._csv.writerow(row)
        self._file.flush()
        self.rows += 1

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._file.close()


def summary_table(summary: dict[str, Any]) -> str:
    """A fixed-width console table of the summary's latencies, throughput and failures."""
    metrics = summary["metrics"]
    lines = [
        f"{'LLM metric':<14}{'count':>9}{'mean':>10}{'p50':>10}{'p90':>10}{'p99':>10}{'max':>10}",
    ]
    for key, label in (("ttft_ms", "TTFT ms"), ("tpot_ms", "TPOT ms"), ("itl_ms", "ITL ms"), ("e2e_ms", "E2E ms")):
        s = metrics[key]
        cells = "".join(f"{_fmt(s[k]):>10}" for k in ("mean", "p50", "p90", "p99", "max"))
        lines.append(f"{label:<14}{s['count']:>9}{cells}")
    t = summary["throughput"]
    lines.append(
        f"Throughput: {t['output_tokens_per_s']:.1f} output tok/s, {t['requests_per_s']:.2f} req/s "
        f"over {t['duration_s']:.1f} s ({t['requests_ok']} ok, {t['requests_failed']} failed)"
    )
    failures = summary["failures"]
    lines.append("Failures: " + (", ".join(f"{k} {v}" for k, v in sorted(failures.items())) if failures else "none"))
    for warning in summary.get("warnings", []):
        lines.append(f"WARNING: {warning}")
    verdict = summary.get("verdict")
    if verdict is not None:
        lines.append("Verdict: " + ("PASSED" if verdict["passed"] else "FAILED: " + "; ".join(verdict["reasons"])))
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    """A statistic for the table: '-' when there is no data."""
    return "-" if value is None else f"{value:.2f}"
