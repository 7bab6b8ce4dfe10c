"""Read and validate one results folder into a `RunData`.

A results folder holds any of: summary.json (llm-locust's run summary), llm_timeseries.csv
(one row per interval), histograms.json (encoded HdrHistograms per run and step), and Locust's
own CSVs (`PREFIX_stats.csv`, `PREFIX_stats_history.csv`, `PREFIX_failures.csv`). A plain
Locust run has only the CSVs; what is absent is listed in `RunData.missing`.

Every problem with a file -- unreadable, empty, not JSON / CSV, a missing column or key, a
non-numeric cell -- raises `ConfigError` with one line naming the file (and the line, column or
key) and what to do.
"""

from __future__ import annotations

import binascii
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
from hdrh.codec import HdrCookieException, HdrHistogramSettingsException, HdrLengthException
from hdrh.histogram import HdrHistogram

from llm_locust.errors import ConfigError
from llm_locust.metrics.vocabulary import (
    HISTOGRAMS_FILE,
    SERVER_METRICS_FILE,
    SUMMARY_FILE,
    TELEMETRY_FILE,
    TIMESERIES_FILE,
)
from llm_locust.metrics.window import histogram_names
from llm_locust.results.files import BASE_COLUMNS, EMBEDDING_COLUMNS, FAILURE_COLUMNS, latency_columns
from llm_locust.results.request_lines import REQUESTS_FILE, read_lines
from llm_locust.results.trace_offered import TRACE_OFFERED_COLUMNS, TRACE_OFFERED_FILE
from llm_locust.scrape.hardware import TELEMETRY_COLUMNS
from llm_locust.scrape.server_maps import SERVER_COLUMNS

"""Metrics histograms.json may hold: latencies in µs, output_tokens in tokens."""
LOCUST_STATS_COLUMNS = ("Type", "Name", "Request Count", "Failure Count", "Average Response Time", "Requests/s")
LOCUST_HISTORY_COLUMNS = (
    "Timestamp", "User Count", "Type", "Name", "Requests/s", "Failures/s", "50%", "95%",
    "Total Request Count", "Total Failure Count",
)  # fmt: skip
_TEXT_COLUMNS = {"time", "Type", "Name", "Method", "Error", "url", "family", "device", "metric"}
_SUMMARY_KEYS = ("run", "metrics", "throughput")
_DECODE_ERRORS = (
    TypeError, ValueError, binascii.Error, zlib.error, HdrCookieException, HdrLengthException,
    HdrHistogramSettingsException,
)  # fmt: skip

_TIMESERIES_REQUIRED = tuple(c for c in BASE_COLUMNS if c != "step")
"""Columns every llm_timeseries.csv has (older runs lack `step`, the failures by kind, the embeddings' rates, and
the columns of a latency declared since)."""


def _timeseries_optional() -> tuple[str, ...]:
    """The other columns of llm_timeseries.csv (see `_TIMESERIES_REQUIRED`)."""
    return ("step", *latency_columns(), *FAILURE_COLUMNS, *EMBEDDING_COLUMNS)


@dataclass
class RunData:
    """What one results folder holds; None where a file is absent (listed in `missing`)."""

    path: Path
    name: str
    summary: dict[str, Any] | None = None
    timeseries: pd.DataFrame | None = None
    histograms: dict[str, dict[str, HdrHistogram]] | None = None
    """Scope ("run", or a step index as a string) -> metric -> histogram (µs or tokens)."""
    locust_stats: pd.DataFrame | None = None
    locust_history: pd.DataFrame | None = None
    locust_failures: pd.DataFrame | None = None
    server_metrics: pd.DataFrame | None = None
    """server_metrics.csv (--metrics-url): one row per good scrape of a server's metrics URL."""
    telemetry: pd.DataFrame | None = None
    """telemetry.csv (--metrics-url of a DCGM- or node-exporter): one row per device, metric and scrape."""
    trace_offered: pd.DataFrame | None = None
    """trace_offered.csv (a trace replay): what the trace offered per interval."""
    requests: pd.DataFrame | None = None
    """requests.jsonl (--requests-jsonl): one row per line with a first token: `t_send` (epoch s), `ttft_ms`,
    `outcome`, `request_id`."""
    missing: list[str] = field(default_factory=list)

    @property
    def steps(self) -> list[dict[str, Any]]:
        """The summary's steps ([] for a run without steps or without summary)."""
        return list((self.summary or {}).get("steps") or [])


def load_run(path: Path) -> RunData:
    """Read the results folder `path`; raise ConfigError naming the first bad or missing file."""
    if not path.is_dir():
        raise ConfigError(f"{path}: no such results folder (give the folder a run wrote with --results-dir or --csv)")
    run = RunData(path=path, name=path.resolve().name)
    summary_path = path / SUMMARY_FILE
    if summary_path.exists():
        run.summary = _read_summary(summary_path)
    prefix = _locust_prefix(path, run.summary)
    if prefix is None and run.summary is None:
        raise ConfigError(
            f"{path}: neither {SUMMARY_FILE} nor Locust's *_stats.csv found: not a results folder "
            "(run with --results-dir DIR, or --csv DIR/locust)"
        )
    timeseries_path = path / TIMESERIES_FILE
    if timeseries_path.exists():
        run.timeseries = _rows_or_note(
            run,
            read_csv(timeseries_path, _TIMESERIES_REQUIRED, _timeseries_optional(), allow_empty=True),
            f"{TIMESERIES_FILE} rows (the run ended before its first interval closed)",
        )
    elif run.summary is not None:
        run.missing.append(f"{TIMESERIES_FILE} (LLM metrics over time)")
    histograms_path = path / HISTOGRAMS_FILE
    if histograms_path.exists():
        run.histograms = _read_histograms(histograms_path)
    elif run.summary is not None:
        run.missing.append(f"{HISTOGRAMS_FILE} (full distributions: shown from the summary's percentiles instead)")
    server_path = path / SERVER_METRICS_FILE
    if server_path.exists():
        numeric = tuple(c for c in SERVER_COLUMNS if c not in ("time", "url", "elapsed_s"))
        run.server_metrics = read_csv(server_path, ("elapsed_s", "url"), numeric, allow_empty=True)
    telemetry_path = path / TELEMETRY_FILE
    if telemetry_path.exists():
        frame = read_csv(telemetry_path, tuple(c for c in TELEMETRY_COLUMNS if c != "time"), allow_empty=True)
        frame["device"] = frame["device"].astype(str)  # GPU indexes read as numbers
        run.telemetry = frame
    offered_path = path / TRACE_OFFERED_FILE
    if offered_path.exists():
        run.trace_offered = read_csv(offered_path, TRACE_OFFERED_COLUMNS, allow_empty=True)
    requests_path = path / REQUESTS_FILE
    if requests_path.exists():
        run.requests = _first_tokens(requests_path)
    if run.summary is None:
        run.missing.insert(
            0, f"{SUMMARY_FILE}: a plain Locust run -- no TTFT, TPOT, ITL, tokens/s (run an llm-locust locustfile)"
        )
    if prefix is None:
        run.missing.append("Locust CSVs (run with --csv DIR/locust --csv-full-history)")
        return run
    run.locust_stats = read_csv(Path(f"{prefix}_stats.csv"), LOCUST_STATS_COLUMNS)
    history_path = Path(f"{prefix}_stats_history.csv")
    if history_path.exists():
        run.locust_history = _rows_or_note(
            run, read_csv(history_path, LOCUST_HISTORY_COLUMNS, allow_empty=True), f"{history_path.name} rows"
        )
    else:
        run.missing.append(f"{history_path.name} (Locust's history: run with --csv-full-history)")
    failures_path = Path(f"{prefix}_failures.csv")
    if failures_path.exists():
        run.locust_failures = read_csv(failures_path, ("Name", "Error", "Occurrences"), allow_empty=True)
    return run


def _first_tokens(path: Path) -> pd.DataFrame:
    """The requests of a requests.jsonl that had a first token (lines that are not such records are left out)."""
    rows = [
        (line["t_send"], 1000.0 * (line["t_first"] - line["t_send"]), line.get("outcome"), line.get("request_id"))
        for line in read_lines(path)
        if isinstance(line, dict) and _number(line.get("t_send")) and _number(line.get("t_first"))
    ]
    return pd.DataFrame(rows, columns=["t_send", "ttft_ms", "outcome", "request_id"])


def _number(value: Any) -> bool:
    """True for a JSON number (not a boolean)."""
    return type(value) in (int, float)


def read_csv(
    path: Path, columns: tuple[str, ...], optional: tuple[str, ...] = (), allow_empty: bool = False
) -> pd.DataFrame:
    """The CSV at `path` with at least `columns` (and maybe `optional` ones), whose cells are
    numbers (empty cells NaN) but in the text columns (time, Type, Name, Method, Error).

    Raises ConfigError when the file is empty (no header), malformed, lacks a column, or has a
    non-numeric value in a numeric column (naming its line). `allow_empty`: a header without
    rows is fine (Locust's failures file of a run without failures); otherwise rows are required.
    """
    if path.stat().st_size == 0:
        raise ConfigError(f"{path}: empty file (the run wrote nothing: re-run it or remove the file)")
    try:
        frame = pd.read_csv(path, na_values=["N/A", ""], keep_default_na=False, low_memory=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not a valid CSV file ({_one_line(e)})") from None
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise ConfigError(f"{path}: missing column(s) {', '.join(absent)} (corrupted or not written by this tool)")
    if frame.empty and not allow_empty:
        raise ConfigError(f"{path}: no rows after the header (the run ended before its first interval)")
    for column in (*columns, *(c for c in optional if c in frame.columns)):
        if column in _TEXT_COLUMNS or pd.api.types.is_numeric_dtype(frame[column]):
            continue
        numbers = pd.to_numeric(frame[column], errors="coerce")
        bad = numbers.isna() & frame[column].notna()
        if bad.any():
            index = int(bad.to_numpy().argmax())
            value = frame[column].iloc[index]
            raise ConfigError(f"{path}, line {index + 2}: column {column!r} holds {value!r}, not a number")
        frame[column] = numbers
    return frame


def _rows_or_note(run: RunData, frame: pd.DataFrame, missing: str) -> pd.DataFrame | None:
    """`frame`, or None (noting `missing` on `run`) when it has no rows."""
    if frame.empty:
        run.missing.append(missing)
        return None
    return frame


def _read_json(path: Path) -> Any:
    """The JSON document at `path`; ConfigError when empty or invalid."""
    data = path.read_bytes()
    if not data.strip():
        raise ConfigError(f"{path}: empty file (the run was killed before writing it: re-run it)")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({_one_line(e)})") from None


def _read_summary(path: Path) -> dict[str, Any]:
    """summary.json, checked for the keys the report reads."""
    summary = _read_json(path)
    if not isinstance(summary, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(summary).__name__}")
    for key in _SUMMARY_KEYS:
        if not isinstance(summary.get(key), dict):
            raise ConfigError(f"{path}: missing object {key!r} (not an llm-locust summary, or corrupted)")
    steps = summary.get("steps") or []
    if not isinstance(steps, list):
        raise ConfigError(f"{path}: 'steps' must be a list")
    for i, step in enumerate(steps):
        for key in ("metrics", "throughput"):
            if not isinstance(step, dict) or not isinstance(step.get(key), dict):
                raise ConfigError(f"{path}: steps[{i}] has no object {key!r} (corrupted)")
    return summary


def _read_histograms(path: Path) -> dict[str, dict[str, HdrHistogram]]:
    """histograms.json decoded: scope ("run" or a step index) -> metric -> histogram."""
    document = _read_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("run"), dict):
        raise ConfigError(f"{path}: expected {{'run': {{metric: hdr}}, 'steps': {{...}}}}")
    scopes: dict[str, dict[str, str]] = {"run": document["run"], **(document.get("steps") or {})}
    decoded: dict[str, dict[str, HdrHistogram]] = {}
    for scope, hists in scopes.items():
        decoded[scope] = {}
        for metric, encoded in hists.items():
            if metric not in histogram_names():
                continue
            try:
                decoded[scope][metric] = HdrHistogram.decode(encoded)
            except _DECODE_ERRORS as e:
                where = "run" if scope == "run" else f"steps[{scope}]"
                raise ConfigError(f"{path}: {where}.{metric} is not an encoded HdrHistogram ({_one_line(e)})") from None
    return decoded


def _locust_prefix(path: Path, summary: dict[str, Any] | None) -> str | None:
    """The path prefix of Locust's CSVs in `path` (`DIR/locust` for DIR/locust_stats.csv), or None."""
    candidates = sorted(path.glob("*_stats.csv"))
    if not candidates:
        return None
    wanted = ((summary or {}).get("run") or {}).get("locust_csv_prefix")
    for candidate in candidates:
        if wanted and candidate.name == f"{Path(wanted).name}_stats.csv":
            return str(candidate)[: -len("_stats.csv")]
    if len(candidates) > 1:
        names = ", ".join(c.name for c in candidates)
        raise ConfigError(f"{path}: several Locust CSV sets ({names}): keep one run per results folder")
    return str(candidates[0])[: -len("_stats.csv")]


def _one_line(error: Exception) -> str:
    """An exception's message on one line."""
    return " ".join(str(error).split()) or type(error).__name__
