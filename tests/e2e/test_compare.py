"""`llm-locust compare`: the bootstrap (pure), and three real runs against the simulator — two unchanged, one with
a 20 % slower decode — compared through the CLI.

Why the "unchanged" pair cannot flake: a verdict needs the whole 95 % interval beyond ±5 % (the default
--min-change). On the simulator's fixed timing the per-window statistics of an unchanged pair differ by well under
1 % (TTFT, TPOT, E2E) to ~3 % (ITL p99) even on a loaded machine, because the client stamps every event with the
kernel's receive time; a false "regression" would need every window of one run to be > 5 % off the other's, a
shift the machine would have to impose on one simulator and not the other, which run at the same time. Window-to-window
noise widens the interval rather than moving it. The throughput metrics have wide intervals (1 s windows hold 4 or 8
completions), so they cannot reach beyond ±5 % without a real change either.
"""

from __future__ import annotations

import json
import subprocess
import sys

import gevent
import numpy as np
import pandas as pd
import pytest
from conftest import LOCUSTFILE, run_locust

from llm_locust.errors import ConfigError
from llm_locust.report.bootstrap import RunSample, relative_change_interval, resample_side
from llm_locust.report.compare import compare, parse_limits
from llm_locust.report.compare_result import IMPROVEMENT, NO_CHANGE, REGRESSION
from llm_locust.report.run_data import RunData, load_run
from llm_locust.results.files import timeseries_columns
from llm_locust.sim import run_sim

RUN_S = 8


def _run(sim_url: str, folder) -> None:
    proc = run_locust(LOCUSTFILE, "-u", "4", "-r", "4", "-t", f"{RUN_S}s", "--host", sim_url, "--interval-s", "1",
                      "--results-dir", str(folder), timeout_s=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs at the same time: base1 and base2 against two identical simulators (ITL 20 ms), slower against
    one whose decode is 20 % slower (ITL 24 ms)."""
    root = tmp_path_factory.mktemp("compare")
    common = ("--ttft-ms", "100", "--output-tokens", "32")
    with run_sim(*common, "--itl-ms", "20") as one, run_sim(*common, "--itl-ms", "20") as two, \
            run_sim(*common, "--itl-ms", "24") as slow:  # fmt: skip
        folders = {"base1": root / "base1", "base2": root / "base2", "slower": root / "slower"}
        urls = {"base1": one.url, "base2": two.url, "slower": slow.url}
        gevent.joinall([gevent.spawn(_run, urls[name], folder) for name, folder in folders.items()], raise_error=True)
    return folders


def compare_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llm_locust.cli", "compare", *args], capture_output=True, text=True,
                          timeout=60)  # fmt: skip


# -- the bootstrap, pure -------------------------------------------------------------------------------------------
def _sample(values, weights=None) -> RunSample:
    values = np.asarray(values, dtype=float)
    return RunSample(values, np.ones(len(values)) if weights is None else np.asarray(weights, dtype=float))


def test_bootstrap_interval_is_seeded_and_covers_the_shift():
    rng = np.random.default_rng(5)
    base = [_sample(20 + rng.normal(0, 0.2, 30))]
    same = [_sample(20 + rng.normal(0, 0.2, 30))]
    slower = [_sample(24 + rng.normal(0, 0.2, 30))]
    low, high = relative_change_interval(base, same, 0.95, 2000, seed=1)
    assert low < 0 < high and high - low < 0.02
    low, high = relative_change_interval(base, slower, 0.95, 2000, seed=1)
    assert 0.18 < low < 0.2 < high < 0.22
    assert relative_change_interval(base, slower, 0.95, 2000, seed=1) == (low, high)


def test_bootstrap_weights_windows_and_resamples_runs():
    weighted = _sample([10.0, 30.0], [3, 1])
    assert weighted.value == 15.0
    one_run = [_sample(20 + np.arange(10) * 0.01)]
    two_runs = [_sample(20 + np.arange(10) * 0.01), _sample(22 + np.arange(10) * 0.01)]  # runs 10 % apart
    spread_one = np.std(resample_side(one_run, 4000, np.random.default_rng(0)))
    spread_two = np.std(resample_side(two_runs, 4000, np.random.default_rng(0)))
    assert spread_two > 10 * spread_one  # the run-to-run variation dominates once runs are resampled


def test_limits_parse_and_name_their_errors():
    assert parse_limits(["ttft_p99_ms=10%,output_tokens_per_s=5", "tpot_p50_ms=2.5%"]) == {
        "ttft_p99_ms": 0.1, "output_tokens_per_s": 0.05, "tpot_p50_ms": 0.025,
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"--max-regression 'ttft_p97_ms=1%': unknown metric"):
        parse_limits(["ttft_p97_ms=1%"])
    with pytest.raises(ConfigError, match=r"expected METRIC=PERCENT"):
        parse_limits(["ttft_p99_ms"])
    with pytest.raises(ConfigError, match=r"must be > 0"):
        parse_limits(["ttft_p99_ms=0%"])


# -- real runs -----------------------------------------------------------------------------------------------------
def test_unchanged_runs_show_no_significant_change(runs, tmp_path):
    out = tmp_path / "same.json"
    proc = compare_cli(str(runs["base1"]), "--", str(runs["base2"]), "-o", str(tmp_path / "same.html"),
                       "--json", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    verdicts = {r["metric"]: r["verdict"] for r in document["results"]}
    assert set(verdicts.values()) == {NO_CHANGE}, proc.stdout
    assert document["passed"] and "Compare: PASSED" in proc.stdout
    tpot = next(r for r in document["results"] if r["metric"] == "tpot_p50_ms")
    assert -5 < tpot["interval_pct"][0] <= tpot["interval_pct"][1] < 5 and -5 < tpot["change_pct"] < 5
    assert all(n >= RUN_S - 3 for side in document["windows"].values() for n in side)


def test_slower_decode_is_a_regression_on_tpot_and_gates(runs, tmp_path):
    baseline, candidate = [load_run(runs["base1"])], [load_run(runs["slower"])]
    comparison = compare(baseline, candidate)
    results = {r.metric.name: r for r in comparison.results}
    for name in ("tpot_p50_ms", "tpot_p90_ms", "itl_p50_ms", "e2e_p50_ms"):
        assert results[name].verdict == REGRESSION, name
    tpot = results["tpot_p50_ms"]
    assert 0.1 < tpot.low <= tpot.high < 0.3 and 0.1 < tpot.change < 0.3  # the model's +20 %
    assert results["ttft_p50_ms"].verdict == NO_CHANGE  # the prefill did not change
    assert compare(baseline, candidate).results == comparison.results  # seeded: reproducible

    page = tmp_path / "slower.html"
    proc = compare_cli(str(runs["base1"]), "--", str(runs["slower"]), "--max-regression", "tpot_p50_ms=10%",
                       "-o", str(page))  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Compare: FAILED: tpot_p50_ms +" in proc.stdout and "beyond 10 %" in proc.stdout
    html = page.read_text()
    figure = json.loads(html.split('data-chart="compare_changes">', 1)[1].split("</script>", 1)[0])
    assert {trace["meta"]["verdict"] for trace in figure["data"]} >= {REGRESSION, NO_CHANGE}
    loose = compare_cli(str(runs["base1"]), "--", str(runs["slower"]), "--max-regression", "tpot_p50_ms=40%",
                        "-o", str(page))  # fmt: skip
    assert loose.returncode == 0, loose.stdout  # worse, but within the limit

    improved = {r.metric.name: r.verdict for r in compare(candidate, baseline).results}
    assert improved["tpot_p50_ms"] == IMPROVEMENT


def test_repeated_runs_per_side(runs):
    both = [load_run(runs["base1"]), load_run(runs["base2"])]
    comparison = compare(both, [load_run(runs["slower"])])
    tpot = next(r for r in comparison.results if r.metric.name == "tpot_p50_ms")
    assert tpot.verdict == REGRESSION and len(comparison.windows["baseline"]) == 2
    same = {r.verdict for r in compare(both, both).results}
    assert same == {NO_CHANGE}


def test_bad_input_is_one_line_and_exit_2(runs, tmp_path):
    proc = compare_cli(str(runs["base1"]))
    assert proc.returncode == 2 and "no candidate folder" in proc.stderr and "Traceback" not in proc.stderr
    proc = compare_cli(str(runs["base1"]), "--", str(tmp_path / "absent"))
    assert proc.returncode == 2 and "absent: no such results folder" in proc.stderr
    short = tmp_path / "short"
    short.mkdir()
    summary = json.loads((runs["base1"] / "summary.json").read_text())
    summary["run"]["duration_s"] = 2.5
    (short / "summary.json").write_text(json.dumps(summary))
    (short / "llm_timeseries.csv").write_text((runs["base1"] / "llm_timeseries.csv").read_text())
    proc = compare_cli(str(short), "--", str(runs["base1"]), "-o", str(tmp_path / "x.html"))
    assert proc.returncode == 2 and "whole time window(s) of 1 s, compare needs at least 3" in proc.stderr


def _sweep_run(tmp_path, name: str, labels: list[str], tpot_ms: list[float]):
    """A RunData of a sweep whose step i has 5 whole 1-s windows with TPOT p50 `tpot_ms[i]` (± a little)."""
    rows = [
        {"elapsed_s": float(5 * i + j), "step": i, "requests_ok": 10, "requests_per_s": 10.0,
         "output_tokens_per_s": 100.0, "tpot_ms_p50": tpot_ms[i] * (1 + 0.002 * (j % 3))}
        for i in range(len(labels)) for j in range(5)
    ]  # fmt: skip
    frame = pd.DataFrame(rows).reindex(columns=list(timeseries_columns()))  # the other columns empty (NaN)
    summary = {"run": {"duration_s": 5.0 * len(labels)}, "timeseries": {"interval_s": 1}, "metrics": {},
               "throughput": {}, "steps": [{"label": label} for label in labels]}  # fmt: skip
    return RunData(path=tmp_path / name, name=name, summary=summary, timeseries=frame)


def test_sweeps_are_compared_step_by_step(tmp_path):
    base = _sweep_run(tmp_path, "base", ["2 users", "8 users"], [20.0, 30.0])
    cand = _sweep_run(tmp_path, "cand", ["2 users", "8 users"], [20.0, 36.0])  # slower only under load
    verdicts = {(r.scope, r.metric.name): r.verdict for r in compare([base], [cand]).results}
    assert verdicts[("2 users", "tpot_p50_ms")] == NO_CHANGE
    assert verdicts[("8 users", "tpot_p50_ms")] == REGRESSION
    assert verdicts[("8 users", "ttft_p50_ms")] == "no data"  # empty in these windows
    cand.summary["settings"] = {"max_tokens": 256}
    notes = compare([base], [cand]).notes
    assert any("differ in max_tokens (base: None, cand: 256)" in note for note in notes), notes
    other = _sweep_run(tmp_path, "other", ["2 users"], [20.0])
    with pytest.raises(ConfigError, match="different sweep steps"):
        compare([base], [other])
