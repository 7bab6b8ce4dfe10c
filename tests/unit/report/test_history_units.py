"""`llm-locust history`'s pure parts: the rolling baselines, a run's verdict, the gate on the newest run, the
discovery of the runs, and the judging of made-up runs whose windows are known."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from llm_locust.errors import ConfigError
from llm_locust.report.compare_result import IMPROVEMENT, NO_CHANGE, NO_DATA, REGRESSION
from llm_locust.report.history import (
    LEFT_OUT,
    NO_BASELINE,
    HistoryRun,
    find_runs,
    judge_history,
    order_runs,
    rolling_baselines,
    run_verdict,
    summary_value,
)
from llm_locust.report.run_data import RunData
from llm_locust.results.files import timeseries_columns

DAY = dt.timedelta(days=1)
T0 = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.UTC)


def test_rolling_baselines_take_the_last_k_comparable_runs():
    keys = [(), (), None, (), ("2 users",), (), (), ()]
    assert rolling_baselines(keys, 2) == [[], [0], [], [0, 1], [], [1, 3], [3, 5], [5, 6]]
    assert rolling_baselines(keys, 5)[7] == [0, 1, 3, 5, 6]  # left out (2) and other steps (4) skipped
    assert rolling_baselines([], 3) == []


def test_run_verdict_regression_wins_then_improvement():
    assert run_verdict([NO_CHANGE, IMPROVEMENT, REGRESSION]) == REGRESSION
    assert run_verdict([NO_CHANGE, IMPROVEMENT, NO_DATA]) == IMPROVEMENT
    assert run_verdict([NO_CHANGE, NO_DATA]) == NO_CHANGE
    assert run_verdict([]) == NO_CHANGE


def test_summary_value_reads_numbers_only():
    summary = {"energy": {"joules_per_output_token": 0.25, "mean_power_w": None}, "cost": None, "run": {"x": True}}
    assert summary_value(summary, "energy", "joules_per_output_token") == 0.25
    assert summary_value(summary, "energy", "mean_power_w") is None
    assert summary_value(summary, "cost", "usd_per_hour") is None  # a null group
    assert summary_value(summary, "absent", "key") is None
    assert summary_value(summary, "run", "x") is None  # not a number


def _run(tmp_path: Path, day: int, tpot_ms: float, left_out: str = "") -> HistoryRun:
    """A run on day `day` whose 6 whole 1-s windows have TPOT p50 `tpot_ms` (± 0.2 %)."""
    rows = [{"elapsed_s": float(j), "requests_ok": 10, "requests_per_s": 10.0, "output_tokens_per_s": 100.0,
             "tpot_ms_p50": tpot_ms * (1 + 0.002 * (j % 3))} for j in range(6)]  # fmt: skip
    frame = pd.DataFrame(rows).reindex(columns=list(timeseries_columns()))
    summary = {"status": "complete", "run": {"duration_s": 6.0}, "timeseries": {"interval_s": 1}, "metrics": {},
               "throughput": {}, "steps": []}  # fmt: skip
    path = tmp_path / f"day-{day}"
    return HistoryRun(path, T0 + day * DAY, RunData(path=path, name=path.name, summary=summary, timeseries=frame),
                      left_out)  # fmt: skip


def test_each_run_is_judged_against_the_runs_before_it(tmp_path):
    runs = [_run(tmp_path, 0, 20.0), _run(tmp_path, 1, 20.0), _run(tmp_path, 2, 99.0, left_out="incomplete run"),
            _run(tmp_path, 3, 20.0), _run(tmp_path, 4, 26.0)]  # fmt: skip
    lines: list[str] = []
    history = judge_history(order_runs(reversed(runs)), 2, {"tpot_p50_ms": 0.1}, resamples=500, progress=lines.append)
    assert [j.verdict for j in history.judgements] == [NO_BASELINE, NO_CHANGE, LEFT_OUT, NO_CHANGE, REGRESSION]
    assert [run.name for run in history.newest.baseline] == ["day-1", "day-3"]
    assert history.newest.metric_verdict("tpot_p50_ms") == REGRESSION
    assert history.newest.metric_verdict("ttft_p50_ms") == NO_CHANGE  # no data in these windows
    assert history.newest.changes(REGRESSION)[0].startswith("tpot_p50_ms +3")
    assert history.gate_failed and "FAILED: tpot_p50_ms +" in history.gate_line()
    assert lines[-1] == "[5/5] day-4: regression" and len(lines) == 5
    loose = judge_history(runs, 2, {"tpot_p50_ms": 0.5}, resamples=500)
    assert loose.newest.verdict == REGRESSION and not loose.gate_failed  # worse, within the limit
    document = history.as_dict()
    assert document["passed"] is False and document["runs"][2]["left_out"] == "incomplete run"


def test_the_gate_fails_a_newest_run_that_cannot_be_judged_and_passes_a_first_one(tmp_path):
    broken = judge_history([_run(tmp_path, 0, 20.0), _run(tmp_path, 1, 20.0, left_out="summary.json: empty file")])
    assert broken.gate_failed and broken.gate_line().endswith("could not be judged: summary.json: empty file")
    first = judge_history([_run(tmp_path, 0, 20.0)])
    assert not first.gate_failed and "has no earlier run" in first.gate_line()
    with pytest.raises(ConfigError, match="no results folder"):
        judge_history([])
    with pytest.raises(ConfigError, match="--baseline-runs must be at least 1"):
        judge_history([_run(tmp_path, 0, 20.0)], 0)


def test_find_runs_reads_folders_of_runs_results_folders_and_globs(tmp_path):
    series = tmp_path / "nightly"
    for name in ("2026-11-02", "2026-11-01", "2026-11-03", ".hidden"):
        (series / name).mkdir(parents=True)
    for name in ("2026-11-01", "2026-11-02"):
        (series / name / "summary.json").write_text("{}")
    listed = [series / "2026-11-01", series / "2026-11-02", series / "2026-11-03"]
    assert find_runs([str(series)]) == listed  # the empty night is listed too
    assert find_runs([str(series / "2026-11-0*")]) == listed
    assert find_runs([str(series / "2026-11-01"), str(series / "2026-11-0*")]) == listed  # each once
    with pytest.raises(ConfigError, match="absent: no such folder"):
        find_runs([str(tmp_path / "absent")])
    with pytest.raises(ConfigError, match="matches no folder"):
        find_runs([str(tmp_path / "x-*")])
    with pytest.raises(ConfigError, match="neither a results folder nor a folder of results folders"):
        find_runs([str(series / "2026-11-03")])
