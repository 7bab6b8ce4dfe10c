"""Production traces to replay (`locustfiles/trace.py --trace FILE --trace-format F`): when each request came, and
its lengths.

Formats (as published):
- `mooncake` (kvcache-ai/Mooncake, JSONL): `timestamp` (ms since the first request), `input_length`,
  `output_length`, `hash_ids` (ids of its 512-token blocks: requests sharing ids share a prefix);
- `azure` (Azure/AzurePublicDataset, AzureLLMInferenceTrace_*.csv): `TIMESTAMP` (date and time),
  `ContextTokens`, `GeneratedTokens`;
- `burstgpt` (HPMLL/BurstGPT, CSV): `Timestamp` (s), `Model`, `Request tokens`, `Response tokens`,
  `Total tokens`, `Log Type`; `--trace-model` / `--trace-log-type` keep one model or log type; rows with 0
  response tokens (failed requests in the published files) are skipped.

`load_trace` returns the requests of the window `--trace-start-s` .. + `--trace-duration-s` (trace seconds), at most
`--trace-max-requests`, their due times in seconds from the window's start divided by `--trace-speedup`, and for each
its expected prefix reuse in trace order within the window, as a server with a cold cache would see it
(`prefix_blocks.ReuseTracker`). A bad file raises `ConfigError` naming the
file, the line and the field.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import orjson

from llm_locust.errors import ConfigError
from llm_locust.workload.prefix_blocks import ReuseTracker

TRACE_FORMATS = ("mooncake", "azure", "burstgpt")
_COLUMNS = {
    "mooncake": ("timestamp", "input_length", "output_length"),
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
}


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace: when it came (trace seconds from the trace's first request), its lengths (tokens),
    its prompt's block ids (Mooncake) and, in trace order, its whole blocks and how many an earlier request had."""

    t_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    prefix_blocks: int = 0
    prefix_blocks_seen: int = 0


@dataclass(frozen=True)
class TraceWindow:
    """Which part of the trace to replay, and how fast."""

    speedup: float = 1.0
    start_s: float = 0.0
    duration_s: float | None = None
    max_requests: int | None = None
    model: str = ""  # BurstGPT: keep only this Model
    log_type: str = ""  # BurstGPT: keep only this Log Type


@dataclass(frozen=True)
class Trace:
    """The requests to replay, in order, and their due times (seconds from the replay's start)."""

    path: str
    requests: tuple[TraceRequest, ...]
    due_s: tuple[float, ...] = field(repr=False)


def load_trace(path: str, fmt: str, window: TraceWindow) -> Trace:
    """Read and select the trace (see the module docstring); ConfigError naming file, line and field."""
    if fmt not in TRACE_FORMATS:
        raise ConfigError(f"--trace-format {fmt!r}: expected one of {', '.join(TRACE_FORMATS)}")
    if not window.speedup > 0:
        raise ConfigError(f"--trace-speedup must be > 0, got {window.speedup}")
    if not Path(path).is_file():
        raise ConfigError(f"--trace {path}: no such file")
    rows = _mooncake(path) if fmt == "mooncake" else _csv(path, fmt, window)
    selected: list[TraceRequest] = []
    reuse = ReuseTracker()
    first_s: float | None = None
    previous = (0, float("-inf"))
    for line, request in rows:
        if request.t_s < previous[1]:
            field_name = _COLUMNS[fmt][0]
            raise ConfigError(
                f"{path}:{line}: {field_name} goes back in time ({request.t_s:g} s after {previous[1]:g} s on line "
                f"{previous[0]}): a trace must be sorted by time"
            )
        previous = (line, request.t_s)
        if first_s is None:
            first_s = request.t_s
        t_s = request.t_s - first_s - window.start_s
        if t_s < 0:
            continue
        if window.duration_s is not None and t_s >= window.duration_s:
            break
        blocks, seen = reuse.see(request.hash_ids, request.input_tokens)  # within the replay: a cold cache
        selected.append(TraceRequest(t_s, request.input_tokens, request.output_tokens, request.hash_ids, blocks, seen))
        if window.max_requests is not None and len(selected) >= window.max_requests:
            break
    if not selected:
        raise ConfigError(f"--trace {path}: no request in the window chosen (--trace-start-s, --trace-duration-s, "
                          "--trace-model, --trace-log-type)")  # fmt: skip
    origin_s = selected[0].t_s
    return Trace(path, tuple(selected), tuple((r.t_s - origin_s) / window.speedup for r in selected))


def _mooncake(path: str) -> Iterator[tuple[int, TraceRequest]]:
    with open(path, "rb") as f:
        for line, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                row = orjson.loads(text)
            except orjson.JSONDecodeError as e:
                raise ConfigError(f"{path}:{line}: not valid JSON ({e})") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{line}: expected a JSON object, got {type(row).__name__}")
            timestamp_ms = _number(path, line, row, "timestamp", minimum=0)
            hash_ids = row.get("hash_ids", [])
            if not isinstance(hash_ids, list) or not all(type(h) is int for h in hash_ids):
                raise ConfigError(f"{path}:{line}: hash_ids must be a list of integers")
            yield (
                line,
                TraceRequest(
                    timestamp_ms / 1000,
                    int(_number(path, line, row, "input_length", minimum=1)),
                    int(_number(path, line, row, "output_length", minimum=1)),
                    tuple(hash_ids),
                ),
            )


def _csv(path: str, fmt: str, window: TraceWindow) -> Iterator[tuple[int, TraceRequest]]:
    time_col, input_col, output_col = _COLUMNS[fmt]
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        for column in _COLUMNS[fmt]:
            if column not in header:
                raise ConfigError(f"{path}:1: no column {column!r} (a {fmt} trace has {', '.join(_COLUMNS[fmt])})")
        for row in reader:
            line = reader.line_num
            if None in row or any(v is None for v in row.values()):
                raise ConfigError(f"{path}:{line}: expected {len(header)} fields, got a broken row")
            if fmt == "burstgpt":
                if window.model and row.get("Model") != window.model:
                    continue
                if window.log_type and row.get("Log Type") != window.log_type:
                    continue
                if row[output_col].strip() == "0":  # a failed request in the published trace
                    continue
            t_s = _timestamp(path, line, row, time_col) if fmt == "azure" else _number(path, line, row, time_col, 0)
            yield (
                line,
                TraceRequest(
                    t_s,
                    int(_number(path, line, row, input_col, minimum=1)),
                    int(_number(path, line, row, output_col, minimum=1)),
                ),
            )


def _number(path: str, line: int, row: dict, name: str, minimum: float) -> float:
    """`row[name]` as a number >= `minimum`; ConfigError naming file, line and field."""
    if name not in row:
        raise ConfigError(f"{path}:{line}: no field {name!r}")
    value = row[name]
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        number = None
    if type(number) not in (int, float) or not number >= minimum:  # also NaN
        raise ConfigError(f"{path}:{line}: {name} must be a number >= {minimum:g}, got {value!r}")
    return number


def _timestamp(path: str, line: int, row: dict, name: str) -> float:
    """An Azure TIMESTAMP ('2023-11-16 18:15:46.6805900') as epoch seconds."""
    try:
        return datetime.fromisoformat(row[name].strip()).timestamp()
    except ValueError:
        raise ConfigError(f"{path}:{line}: {name} is not a date and time, got {row[name]!r}") from None
