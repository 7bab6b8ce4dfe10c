"""Production traces to replay (`locustfiles/trace.py --trace FILE --trace-format F`): when each request came, and
its lengths.

Formats (as published):
- `mooncake` (kvcache-ai/Mooncake, JSONL): `timestamp` (ms since the first request), `input_length`,
  `output_length`, `hash_ids` (ids of its 512-token blocks: requests sharing ids share a prefix); and, as AIPerf's
  multi-turn Mooncake rows, `session_id` (a string: the rows of one conversation, in file order) and `delay` (ms after
  the previous turn of its session was answered; later turns need no `timestamp`, and one given is not used);
- `azure` (Azure/AzurePublicDataset, AzureLLMInferenceTrace_*.csv): `TIMESTAMP` (date and time),
  `ContextTokens`, `GeneratedTokens`;
- `burstgpt` (HPMLL/BurstGPT, CSV): `Timestamp` (s), `Model`, `Request tokens`, `Response tokens`,
  `Total tokens`, `Log Type`; `--trace-model` / `--trace-log-type` keep one model or log type; rows with 0
  response tokens (failed requests in the published files) are skipped.

`load_trace` returns the requests of the window `--trace-start-s` .. + `--trace-duration-s` (trace seconds), at most
`--trace-max-requests`, and for each its expected prefix reuse in trace order within the window, as a server with a
cold cache would see it (`prefix_blocks.ReuseTracker`). Its arrivals are the requests that have a time of their own
(a session's first turn, or a request outside sessions), due in seconds from the window's start divided by
`--trace-speedup`; a session's later turns have none: each is sent by the user that sent its predecessor, once that
one was answered plus its delay (also divided by `--trace-speedup`), and a session is kept whole when its first turn
is in the window (`--trace-max-requests` still caps the requests). A bad file raises `ConfigError` naming the file,
the line and the field.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
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
    its prompt's block ids (Mooncake) and, in trace order, its whole blocks and how many an earlier request had; in a
    session (`session`, its id): its 1-based `turn` (0 outside sessions of several turns), the seconds `delay_s` after
    its predecessor's answer (a later turn; replay seconds), the index of its session's next turn in
    `Trace.requests` (`next_turn`, -1: none)."""

    t_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    prefix_blocks: int = 0
    prefix_blocks_seen: int = 0
    session: str = ""
    turn: int = 0
    delay_s: float = 0.0
    next_turn: int = -1


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
    """The requests to replay, in order; its arrivals (the index in `requests` of each request with a time of its own:
    a session's first turn, or a request outside sessions) and their due times (seconds from the replay's start)."""

    path: str
    requests: tuple[TraceRequest, ...]
    due_s: tuple[float, ...] = field(repr=False)
    arrivals: tuple[int, ...] = field(repr=False)


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
    last_turn: dict[str, int | None] = {}  # session id -> index in `selected` of its latest turn (None: left out)
    for line, request in rows:
        if request.session in last_turn:  # a later turn: kept when its session's first turn was
            latest = last_turn[request.session]
            if latest is not None:
                last_turn[request.session] = _next_turn(selected, latest, request, reuse, window.speedup)
                if window.max_requests is not None and len(selected) >= window.max_requests:
                    break
            continue
        if request.session:
            last_turn[request.session] = None  # until kept
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
            if not last_turn:
                break
            continue  # later turns of the sessions kept may follow
        blocks, seen = reuse.see(request.hash_ids, request.input_tokens)  # within the replay: a cold cache
        turn = 1 if request.session else 0
        selected.append(replace(request, t_s=t_s, prefix_blocks=blocks, prefix_blocks_seen=seen, turn=turn))
        if request.session:
            last_turn[request.session] = len(selected) - 1
        if window.max_requests is not None and len(selected) >= window.max_requests:
            break
    if not selected:
        raise ConfigError(f"--trace {path}: no request in the window chosen (--trace-start-s, --trace-duration-s, "
                          "--trace-model, --trace-log-type)")  # fmt: skip
    arrivals = tuple(i for i, r in enumerate(selected) if r.turn <= 1)
    origin_s = selected[arrivals[0]].t_s
    requests = tuple(r if r.next_turn >= 0 or r.turn != 1 else replace(r, turn=0) for r in selected)  # one turn only
    return Trace(path, requests, tuple((requests[i].t_s - origin_s) / window.speedup for i in arrivals), arrivals)


def _next_turn(
    selected: list[TraceRequest], previous: int, request: TraceRequest, reuse: ReuseTracker, speedup: float
) -> int:
    """Keep `request`, the next turn of the session whose latest turn is `selected[previous]`; its index."""
    blocks, seen = reuse.see(request.hash_ids, request.input_tokens)
    selected[previous] = replace(selected[previous], next_turn=len(selected))
    turn = selected[previous].turn + 1
    selected.append(replace(request, prefix_blocks=blocks, prefix_blocks_seen=seen, turn=turn,
                            delay_s=request.delay_s / speedup))  # fmt: skip
    return len(selected) - 1


def _mooncake(path: str) -> Iterator[tuple[int, TraceRequest]]:
    sessions: set[str] = set()  # the session ids seen so far
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
            session = row.get("session_id", "")
            if not isinstance(session, str):
                raise ConfigError(f"{path}:{line}: session_id must be a string, got {session!r}")
            later = session in sessions
            if session:
                sessions.add(session)
            timestamp_ms = 0.0 if later else _number(path, line, row, "timestamp", minimum=0)
            delay_ms = _number(path, line, row, "delay", minimum=0) if "delay" in row else 0.0
            if "delay" in row and not later:
                raise ConfigError(f"{path}:{line}: delay is for a later turn of a session (session_id seen before)")
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
                    session=session,
                    delay_s=delay_ms / 1000,
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
