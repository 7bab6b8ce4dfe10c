"""trace_offered.csv: what a replayed trace offered per time window, to set beside what was achieved.

One row per window of the run's time series (`--interval-s`, the same wall-clock boundaries as llm_timeseries.csv):
the requests the trace had due in it (by due time; llm_timeseries.csv counts requests by completion), their rate,
their mean input and output lengths (tokens) and their expected prefix reuse (blocks seen before / blocks). A
session's later turns have no due time of their own (each follows its predecessor's answer): only its first turn is
counted.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from llm_locust.workload.traces import Trace

TRACE_OFFERED_FILE = "trace_offered.csv"
TRACE_OFFERED_COLUMNS = (
    "window_start_epoch_s",
    "elapsed_s",
    "offered_requests",
    "offered_rate_per_s",
    "input_tokens_mean",
    "output_tokens_mean",
    "expected_reuse",
)


def offered_rows(trace: Trace, origin_epoch_s: float, interval_s: float, t_start_epoch_s: float) -> list[list[Any]]:
    """The rows of trace_offered.csv for `trace` replayed from `origin_epoch_s` (wall clock of its time 0)."""
    windows: dict[int, list[int]] = {}
    for index, due_s in zip(trace.arrivals, trace.due_s, strict=True):
        request = trace.requests[index]
        start = int(math.floor((origin_epoch_s + due_s) / interval_s) * interval_s)
        sums = windows.setdefault(start, [0, 0, 0, 0, 0])
        sums[0] += 1
        sums[1] += request.input_tokens
        sums[2] += request.output_tokens
        sums[3] += request.prefix_blocks
        sums[4] += request.prefix_blocks_seen
    return [
        [start, round(start - t_start_epoch_s, 3), n, round(n / interval_s, 3), round(tokens_in / n, 1),
         round(tokens_out / n, 1), round(seen / blocks, 4) if blocks else None]
        for start, (n, tokens_in, tokens_out, blocks, seen) in sorted(windows.items())
    ]  # fmt: skip


def write_offered(results_dir: Path, rows: list[list[Any]]) -> Path:
    """Write trace_offered.csv into `results_dir`; return its path."""
    path = results_dir / TRACE_OFFERED_FILE
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(TRACE_OFFERED_COLUMNS)
        writer.writerows(rows)
    return path
