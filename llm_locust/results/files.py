"""The results folder's files: summary.json and histograms.json (written whole: temp file + rename), the LLM time
series CSV (one flushed row per interval, so a killed run leaves valid files) and its columns.

Does not import Locust (the report tooling reads these files in plain Python processes). What summary.json says is
`summary` (its sections: `sections`); the console's table of it is `console`.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from llm_locust.metrics.declarations import latencies
from llm_locust.metrics.record import ErrorKind
from llm_locust.metrics.run_metrics import RunMetrics
from llm_locust.metrics.vocabulary import (
    HISTOGRAMS_FILE,
    SERIES_PERCENTILES,
    SUMMARY_FILE,
    TIMESERIES_FILE,
    latency_key,
    per_s,
)
from llm_locust.metrics.window import WindowMetrics

BASE_COLUMNS = (
    "time",
    "window_start_epoch_s",
    "elapsed_s",
    "step",
    "users",
    "requests_ok",
    "requests_failed",
    "requests_per_s",
    "output_tokens_per_s",
)
"""The first columns of llm_timeseries.csv; then each declared series latency's p50, p90, p99, then the two below."""
FAILURE_COLUMNS = tuple(f"failed_{kind}" for kind in ErrorKind)
"""Failed requests of the interval by kind (after the columns above: files of older runs lack them)."""
EMBEDDING_COLUMNS = (
    "inputs_per_s",
    "input_tokens_per_s",
    "output_bytes_per_input",
    "input_s_per_s",
    "real_time_factor",
    "output_s_per_s",
)
"""An API that counts inputs: inputs and their (usage) tokens per second of the interval, decoded media bytes per input
(bytes per image); an API whose requests carry media: its seconds per second of the interval (audio seconds
transcribed per second) and the real-time factor ("" without media); an API whose answers carry media: its seconds per
second of the interval (audio seconds produced per second) (last: files of older runs lack them)."""


def latency_columns() -> tuple[str, ...]:
    """The time series' latency columns: `<name>_ms_p50` .. `_p99` of each latency declared with `series=True`."""
    return tuple(latency_key(m.name, p) for m in latencies(series=True) for p in SERIES_PERCENTILES)


def timeseries_columns() -> tuple[str, ...]:
    """Every column of llm_timeseries.csv, in order."""
    return (*BASE_COLUMNS, *latency_columns(), *FAILURE_COLUMNS, *EMBEDDING_COLUMNS)


def write_summary(results_dir: Path, summary: dict[str, Any]) -> Path:
    """Write summary.json atomically; return its path."""
    return _write_json(results_dir / SUMMARY_FILE, summary, orjson.OPT_INDENT_2)


def write_histograms(results_dir: Path, run: RunMetrics) -> Path:
    """Write histograms.json atomically: every non-empty histogram of the run and of each step,
    as `HdrHistogram.encode()` text (µs for latencies, tokens for output_tokens); return its path."""

    def encoded(window: WindowMetrics) -> dict[str, str]:
        return {m: h.encode().decode() for m, h in window.hist.items() if h.get_total_count()}

    document = {"run": encoded(run.total), "steps": {str(i): encoded(w) for i, w in sorted(run.steps.items())}}
    return _write_json(results_dir / HISTOGRAMS_FILE, document, 0)


def _write_json(path: Path, document: dict[str, Any], option: int) -> Path:
    """Write `document` to `path` atomically (temp file + rename): whole or not at all — a write that fails (disk
    full, the folder removed: OSError) leaves `path` as it was and no temp file; return `path`."""
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_bytes(orjson.dumps(document, option=option | orjson.OPT_NON_STR_KEYS))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
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
        self.columns = timeseries_columns()
        self._csv.writerow(self.columns)
        self._file.flush()
        self.rows = 0

    def row(
        self,
        start_epoch_s: int,
        window: WindowMetrics,
        users: int,
        step: int | None,
        distributions: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        """The row of the window that starts at `start_epoch_s` (epoch seconds), in sweep step
        `step` (None outside sweeps), keyed by `timeseries_columns()`; rates per second of the
        interval, latencies in ms ("" when the window has none) from the window's `distributions`
        (`sections.metric_distributions`, computed once for the row and the interval batches)."""
        row: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(start_epoch_s)),
            "window_start_epoch_s": start_epoch_s,
            "elapsed_s": round(start_epoch_s - self.t_start_epoch_s, 3),
            "step": "" if step is None else step,
            "users": users,
            "requests_ok": window.requests_ok,
            "requests_failed": window.requests_failed,
            "requests_per_s": per_s(window.requests_ok, self.interval_s),
            "output_tokens_per_s": per_s(window.output_tokens, self.interval_s),
        }
        for metric in latencies(series=True):
            stats = distributions[latency_key(metric.name)]
            row.update({latency_key(metric.name, p): "" if stats[p] is None else stats[p] for p in SERIES_PERCENTILES})
        row.update({f"failed_{kind}": window.failures.get(kind, 0) for kind in ErrorKind})
        row.update(inputs_per_s=per_s(window.inputs, self.interval_s),
                   input_tokens_per_s=per_s(window.prompt_tokens, self.interval_s),
                   output_bytes_per_input=window.output_bytes_per_input,
                   input_s_per_s=per_s(window.input_s, self.interval_s),
                   real_time_factor="" if window.real_time_factor is None else window.real_time_factor,
                   output_s_per_s=per_s(window.output_s, self.interval_s))  # fmt: skip
        return row

    def write(self, row: dict[str, Any]) -> None:
        """Write a closed window's `row` (`row(...)`) to the file, flushed."""
        self._csv.writerow(row[column] for column in self.columns)
        self._file.flush()
        self.rows += 1

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._file.close()


def iso_time(epoch_s: float) -> str:
    """Epoch seconds as a local ISO-8601 time with its UTC offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(epoch_s))
