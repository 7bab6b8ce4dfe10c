"""`llm-locust history` over six real runs against the simulator, the last with a 30 % slower decode (ITL 26 ms
instead of 20 ms): the last is a regression and fails `--max-regression tpot_p50_ms=10%` (exit 3), the five
unchanged runs say no significant change, broken and incomplete runs are listed with why, and the page opens in
Chromium with its trend figures.

Why the unchanged runs cannot flake: see tests/e2e/test_compare.py — on the simulator's fixed timing the windows of
unchanged runs that run at the same time differ by far less than the ±5 % band a verdict must clear with its whole
interval. They must run at the same time: one after the other, on a busy machine, the simulator's stalls change
with the machine's load between runs, and an ITL p99 moved by 26 % between two "unchanged" runs in a trial.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import gevent
import pytest
from conftest import options, read_summary, run_local
from harness.browser import chromium_page
from harness.report_figures import array, figures

from llm_locust.report.compare_result import NO_CHANGE, REGRESSION
from llm_locust.report.history import LEFT_OUT, NO_BASELINE
from llm_locust.sim import run_sim

pytestmark = (
    pytest.mark.alone
)  # six real runs, the last 30 % slower: a busy machine's delays blur the regression it must find

RUN_S = 5
"""Each run's length: 4 whole 1-s windows at least, compare needs 3."""
SIM = ("--ttft-ms", "100", "--output-tokens", "32")


def _run(sim_url: str, folder: Path) -> None:
    """One run of 4 users for `RUN_S` s by a local runner in this process (no interpreter to start: on a loaded
    machine the CLI's start-up would eat the run time)."""
    run_local(options("--host", sim_url, "--interval-s", "1", "--results-dir", str(folder)), users=4, seconds=RUN_S)
    assert read_summary(folder)["status"] == "complete"


@pytest.fixture(scope="module")
def nightly(tmp_path_factory) -> Path:
    """A folder of six runs: night-1 .. night-5 at the same time against a simulator with ITL 20 ms (run one after
    the other, a busy machine's load changes between them: enough to move an ITL p99 by 20 %), then night-6 against
    one whose decode is 30 % slower (ITL 26 ms)."""
    root = tmp_path_factory.mktemp("history") / "nightly"
    with run_sim(*SIM, "--itl-ms", "20") as same:  # together: the machine's load the same for each
        gevent.joinall([gevent.spawn(_run, same.url, root / f"night-{i}") for i in range(1, 6)], raise_error=True)
    with run_sim(*SIM, "--itl-ms", "26") as slower:
        _run(slower.url, root / "night-6")
    return root


def history_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llm_locust.cli", "history", *args], capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_the_slower_newest_run_is_a_regression_and_fails_the_gate(nightly, tmp_path):
    out = tmp_path / "history.json"
    proc = history_cli(str(nightly), "--max-regression", "tpot_p50_ms=10%", "--json", str(out))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    runs = document["runs"]
    assert [Path(r["folder"]).name for r in runs[-1:]] == ["night-6"] and len(runs) == 6
    assert runs[0]["verdict"] == NO_BASELINE
    for run in runs[1:5]:  # the five unchanged runs: no metric changed
        assert run["verdict"] == NO_CHANGE, (run["folder"], [r for r in run["results"] if r["verdict"] != NO_CHANGE])
    newest = runs[-1]
    assert newest["verdict"] == REGRESSION and len(newest["baseline"]) == 5
    tpot = next(r for r in newest["results"] if r["metric"] == "tpot_p50_ms")
    assert tpot["verdict"] == REGRESSION and tpot["gate_failed"]
    assert 20 < tpot["change_pct"] < 40 and tpot["interval_pct"][0] > 10  # the simulator's +30 %
    assert not document["passed"]
    assert "History (night-6 against the 5 run(s) before it): FAILED: tpot_p50_ms +" in proc.stdout
    assert "[6/6] night-6: regression" in proc.stderr  # progress on stderr
    assert (nightly / "history.html").exists()  # the default page of a folder of runs

    proc = history_cli(str(nightly), "--max-regression", "tpot_p50_ms=40%", "-o", str(tmp_path / "loose.html"))
    assert proc.returncode == 0, proc.stdout  # worse, but within the limit
    five = [str(nightly / f"night-{i}") for i in range(1, 6)]
    proc = history_cli(*five, "--baseline-runs", "2", "-o", str(tmp_path / "five.html"), "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr  # no limits: any regression would fail
    assert [len(r["baseline"]) for r in json.loads(out.read_text())["runs"]] == [0, 1, 2, 2, 2]


def test_broken_and_incomplete_runs_are_listed_with_why(nightly, tmp_path):
    series = tmp_path / "series"
    for i in (1, 2, 3):
        shutil.copytree(nightly / f"night-{i}", series / f"night-{i}")
    interrupted = series / "night-2"
    summary = json.loads((interrupted / "summary.json").read_text())
    summary.update(status="incomplete")
    summary["run"]["interrupted"] = "SIGTERM"
    (interrupted / "summary.json").write_text(json.dumps(summary))
    (series / "empty").mkdir()
    shutil.copytree(nightly / "night-1", series / "no-series")
    (series / "no-series" / "llm_timeseries.csv").unlink()  # a file missing
    summary = json.loads((series / "no-series" / "summary.json").read_text())
    summary["run"]["start_time"] = "2026-01-01T02:00:00+0000"  # the oldest
    (series / "no-series" / "summary.json").write_text(json.dumps(summary))
    broken = series / "broken"
    shutil.copytree(nightly / "night-1", broken)
    (broken / "summary.json").write_text("{")
    old = time.time() - 86400
    for folder in (series / "empty", broken):
        os.utime(folder, (old, old))  # no start time: dated by the folder, a day ago
    out = tmp_path / "h.json"
    proc = history_cli(str(series / "*"), "-o", str(tmp_path / "h.html"), "--json", str(out))  # a glob
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    runs = {Path(r["folder"]).name: r for r in json.loads(out.read_text())["runs"]}
    assert runs["night-2"]["verdict"] == LEFT_OUT and "incomplete run (SIGTERM)" in runs["night-2"]["left_out"]
    assert runs["broken"]["verdict"] == LEFT_OUT and "summary.json: not valid JSON" in runs["broken"]["left_out"]
    assert runs["empty"]["verdict"] == LEFT_OUT and "not a results folder" in runs["empty"]["left_out"]
    assert runs["no-series"]["verdict"] == LEFT_OUT and "no summary.json or llm_timeseries.csv rows" in \
        runs["no-series"]["left_out"]  # fmt: skip
    assert runs["night-3"]["baseline"] == [str(series / "night-1")]  # left-out runs are no one's baseline
    assert runs["night-3"]["verdict"] == NO_CHANGE

    os.utime(broken, None)  # now the newest: a night that wrote nothing fails the gate
    proc = history_cli(str(series), "-o", str(tmp_path / "h.html"))
    assert proc.returncode == 3 and "History: FAILED: the newest run broken could not be judged" in proc.stdout

    proc = history_cli(str(tmp_path / "absent"))
    assert proc.returncode == 2 and "absent: no such folder" in proc.stderr and "Traceback" not in proc.stderr
    proc = history_cli(str(series), "--max-regression", "ttft_p97_ms=1%")
    assert proc.returncode == 2 and "unknown metric 'ttft_p97_ms'" in proc.stderr


def test_energy_and_cost_are_trends_and_columns(nightly, tmp_path):
    series = tmp_path / "priced"
    for i in (1, 2):
        shutil.copytree(nightly / f"night-{i}", series / f"night-{i}")
        summary = json.loads((series / f"night-{i}" / "summary.json").read_text())
        summary["energy"] = {"joules_per_output_token": 0.5 * i, "joules_per_request": 16.0 * i, "mean_power_w": 300}
        summary["cost"] = None if i == 1 else {"usd_per_hour": 2.0, "usd_per_million_output_tokens": 7.5,
                                               "usd_per_million_input_tokens": None}  # fmt: skip
        (series / f"night-{i}" / "summary.json").write_text(json.dumps(summary))
    page = tmp_path / "priced.html"
    proc = history_cli(str(series), "-o", str(page))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = page.read_text()
    efficiency = figures(text)["history_efficiency"]
    joules = next(t for t in efficiency["data"] if t["meta"] == {"series": "J per output token"})
    assert list(array(joules["y"])) == [0.5, 1.0]
    usd = next(t for t in efficiency["data"] if t["meta"] == {"series": "USD per million output tokens"})
    assert list(array(usd["y"])[1:]) == [7.5]
    assert "USD per million input tokens" not in {t["meta"].get("series") for t in efficiency["data"]}  # all null
    assert "<th>J per request</th>" in text and "<th>USD per hour</th>" in text
    assert text.count('<td class="t">passed</td>') == 2  # each run's own gates


def test_the_page_opens_in_chromium_with_its_trends(nightly, tmp_path):
    page_path = tmp_path / "history.html"
    proc = history_cli(str(nightly), "-o", str(page_path))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    found = figures(page_path.read_text())
    assert {"history_ttft", "history_tpot", "history_itl", "history_e2e", "history_throughput"} <= set(found)
    tpot = found["history_tpot"]
    p50 = next(t for t in tpot["data"] if t["meta"] == {"percentile": "p50", "metric": "tpot"})
    values = array(p50["y"])
    assert len(values) == 6 and values[5] > 1.2 * values[:5].max()  # the slower decode, on the trend
    marked = [t for t in tpot["data"] if t["meta"].get("verdict") == REGRESSION]
    assert len(marked) == 1 and set(marked[0]["x"]) == {p50["x"][5]}  # only the newest run is marked
    assert set(marked[0]["text"]) == {"tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms"}
    problems: list[str] = []
    with chromium_page(viewport={"width": 1400, "height": 1000}) as page:
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
        page.goto(page_path.resolve().as_uri())
        page.wait_for_selector("body[data-charts-rendered]", timeout=60_000)
        assert page.evaluate("document.body.dataset.chartsRendered") == str(len(found))
        for key in found:
            assert page.locator(f"#{key} .main-svg").count() > 0, key  # plotly drew it
        assert "regression" in page.locator("table").first.inner_text()
    assert problems == []
