"""Percentiles shown with their 95 % intervals (docs/metrics.md "Intervals"): the report's table cells
(report/tables.py) and the console table (results/console.summary_table), as `value ± h`, h the larger distance to an
end; `± ?` for an open end; older runs without intervals show the value alone."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from llm_locust.metrics.hdr import record_values
from llm_locust.metrics.intervals import half_width
from llm_locust.metrics.window import WindowMetrics
from llm_locust.report.tables import cells_with_intervals, interval_cell
from llm_locust.results.console import summary_table
from llm_locust.results.sections import metric_stats


def test_a_cell_holds_the_interval_on_both_sides() -> None:
    assert interval_cell(245.247, [206.208, 258.559]) == "245.2 ± 39.04"
    assert half_width(245.247, [206.208, 258.559]) == 245.247 - 206.208
    assert interval_cell(2592.767, [1782.784, None]) == "2,593 ± ?"
    assert interval_cell(12.5, None) == 12.5 and interval_cell(None, [1.0, 2.0]) is None


def test_table_rows_put_the_interval_beside_each_percentile_that_has_one() -> None:
    frame = pd.DataFrame(
        {"label": ["a", "b"], "ttft_ms_p90": [10.0, float("nan")], "ttft_ms_p90_ci95": [[9.0, 10.5], None],
         "ttft_ms_mean": [9.5, 1.0]}
    )  # fmt: skip
    assert cells_with_intervals(frame, ["label", "ttft_ms_p90", "ttft_ms_mean"]) == [
        ["a", "10 ± 1", 9.5],
        ["b", None, 1.0],
    ]


def _summary(window: WindowMetrics) -> dict:
    throughput = {"requests_per_s": 1.0, "output_tokens_per_s": 1.0, "duration_s": 1.0, "requests_ok": 1,
                  "requests_failed": 0}  # fmt: skip
    return {"metrics": metric_stats(window), "throughput": throughput, "failures": {}}


def test_the_console_shows_each_percentile_with_its_interval() -> None:
    window = WindowMetrics()
    record_values(window.hist["ttft"], np.random.default_rng(2).lognormal(math.log(50_000), 0.5, 1_000).astype(int))
    ttft = metric_stats(window)["ttft_ms"]
    line = next(line for line in summary_table(_summary(window)).splitlines() if line.startswith("TTFT ms"))
    for key in ("p50", "p90", "p99"):
        h = half_width(ttft[key], ttft[f"{key}_ci95"])
        assert h is not None and f"{ttft[key]:.2f} ±{h:.2f}" in line, (key, line)
    assert line.split()[2] == "1000"  # the count


def test_the_console_table_keeps_every_column_under_its_heading() -> None:
    """A label longer than the others ("time to response headers ms") widens the first column for every row."""
    window = WindowMetrics()
    record_values(window.hist["ttft"], np.arange(1_000, 2_000))
    table = summary_table(_summary(window)).splitlines()
    heading, *rows = [line for line in table if line.endswith(("max", " -")) or " ms " in line]
    assert len(rows) > 3
    ends = {column: heading.index(column) + len(column) for column in ("count", "mean", "p50", "p90", "p99", "max")}
    assert all(len(row) == ends["max"] for row in rows), table
    assert all(row[ends["count"] - 1] != " " for row in rows), table  # each count ends under its heading
