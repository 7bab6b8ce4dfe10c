"""`llm-locust report` on real runs: the `locust` CLI against the simulator writes results folders,
the report is built from them, and the numbers inside its charts (the figure JSON embedded in the
HTML, i.e. what the browser draws) are checked against summary.json and the CSVs."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import LOCUSTFILE, ROOT, read_summary
from harness.browser import browser_tools, chromium_page
from harness.report_figures import array, figures, table_after, trace

from llm_locust.errors import ConfigError
from llm_locust.metrics.slo import parse_slos
from llm_locust.report.build import ONE_STEP_NOTE, build_report
from llm_locust.report.capacity import knee_index
from llm_locust.report.images import find_browser
from llm_locust.report.mbu import Hardware, mbu
from llm_locust.report.timeline import MAX_POINTS, downsample
from llm_locust.sim import run_sim

BATCHING = ("--timing", "batching", "--max-batch", "4", "--decode-step-ms", "8", "--decode-step-ms-per-seq", "0.5")


def locust_run(url: str, results_dir: Path, users: int, seconds: int, *extra: str) -> subprocess.Popen:
    """Start a headless `locust` CLI run writing `results_dir` (Locust CSVs + llm-locust files)."""
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
        "-u", str(users), "-r", str(users), "--run-time", f"{seconds}s", "--host", url,
        "--max-tokens", "24", "--prompt-tokens", "64", "--ignore-eos", "--interval-s", "1",
        "--csv", str(results_dir / "locust"), "--csv-full-history", *extra,
    ]  # fmt: skip
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait(process: subprocess.Popen) -> None:
    out, _ = process.communicate(timeout=90)
    assert process.returncode == 0, out[-3000:]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    """Two real runs on two batching simulators (room for 4 sequences): 2 users, and 8 users (queued)."""
    base = tmp_path_factory.mktemp("runs")
    light, heavy = base / "light-2u", base / "heavy-8u"
    with run_sim(*BATCHING) as sim_a, run_sim(*BATCHING) as sim_b:
        procs = [locust_run(sim_a.url, light, 2, 5), locust_run(sim_b.url, heavy, 8, 5)]
        for process in procs:
            wait(process)
    return light, heavy


def test_report_numbers_are_the_summary_and_timeseries_numbers(two_runs, tmp_path):
    light, _ = two_runs
    report = build_report([light], tmp_path / "report.html", png=False)
    summary = read_summary(light)
    figs = figures(report.html_path.read_text())
    assert {"llm_timeline", "locust_timeline", "distributions"} <= set(figs)
    # one step: its numbers and distributions, and in place of the curves one line saying how to draw them
    assert not figs.keys() & {"throughput_latency", "latency_vs_load", "throughput_vs_load"}
    assert html.escape(ONE_STEP_NOTE) in report.html_path.read_text()
    assert "locustfiles/sweep.py --sweep-users" in ONE_STEP_NOTE

    with (light / "llm_timeseries.csv").open() as f:
        rows = list(csv.DictReader(f))
    timeline = figs["llm_timeline"]
    users = trace(timeline, run="light-2u", column="users")
    assert array(users["x"]).tolist() == [float(r["elapsed_s"]) for r in rows]
    assert array(users["y"]).tolist() == [float(r["users"]) for r in rows]
    tokens = array(trace(timeline, run="light-2u", column="output_tokens_per_s")["y"])
    assert tokens.tolist() == [float(r["output_tokens_per_s"]) for r in rows]
    ttft_p90 = array(trace(timeline, run="light-2u", column="ttft_ms_p90")["y"])
    assert np.allclose(ttft_p90, [float(r["ttft_ms_p90"] or "nan") for r in rows], equal_nan=True)

    cdf = trace(figs["distributions"], run="light-2u", metric="ttft", kind="cdf")
    assert summary["metrics"]["ttft_ms"]["p90"] in array(cdf["x"]).tolist()
    history = trace(figs["locust_timeline"], run="light-2u", endpoint="POST /v1/chat/completions", column="Requests/s")
    with (light / "locust_stats_history.csv").open() as f:
        posts = [r for r in csv.DictReader(f) if r["Name"] == "/v1/chat/completions"]
    assert posts and array(history["y"]).tolist() == [float(r["Requests/s"]) for r in posts]
    t0 = datetime.fromisoformat(summary["run"]["start_time"]).timestamp()
    assert array(history["x"]).tolist() == pytest.approx([int(r["Timestamp"]) - t0 for r in posts])

    page = report.html_path.read_text()
    assert "plotly.js" in page[:20000] and "cdn.plot.ly" not in page.split("<body>")[1][:2000]
    assert summary["run"]["host"] in page and "2.47" in page  # run metadata: target, versions
    (row,) = table_after(page, "Steps", level=2)  # each percentile with its 95 % interval, as ± (docs/metrics.md)
    for stat in ("p50", "p90", "p99"):
        value, (low, high) = summary["metrics"]["ttft_ms"][stat], summary["metrics"]["ttft_ms"][f"{stat}_ci95"]
        half = "?" if high is None else f"{max(value - low, high - value):,.4g}"
        assert row[f"TTFT {stat} ms"] == f"{value:,.4g} ± {half}", row


def test_capacity_pick_meets_every_slo_and_the_next_load_does_not(two_runs, tmp_path):
    light, heavy = two_runs
    p90_light = read_summary(light)["metrics"]["ttft_ms"]["p90"]
    p90_heavy = read_summary(heavy)["metrics"]["ttft_ms"]["p90"]
    assert p90_heavy > 1.5 * p90_light  # 8 users on 4 batch slots queue: TTFT rises
    budget = (p90_light + p90_heavy) / 2
    slos = parse_slos([f"ttft_p90_ms={budget:.3f}", "tpot_p99_ms=1000"])
    report = build_report([light, heavy], tmp_path / "cmp.html", slos=slos, png=False)
    picks = {cap.run: cap.best for cap in report.capacities}
    assert picks["light-2u"] is not None and picks["light-2u"].ok
    assert picks["light-2u"].output_tokens_per_s == read_summary(light)["throughput"]["output_tokens_per_s"]
    assert picks["heavy-8u"] is None
    capacity = figures(report.html_path.read_text())["capacity"]
    line = trace(capacity, run="heavy-8u", slo="ttft_p90_ms")
    assert array(line["y"]).tolist() == [p90_heavy] and line["marker"]["symbol"] == ["x"]
    page = report.html_path.read_text()
    assert "light-2u: capacity run" in page and "heavy-8u: no step meets every SLO" in page


def test_comparison_of_two_runs_overlays_both_and_tables_them_side_by_side(two_runs, tmp_path):
    light, heavy = two_runs
    report = build_report([light, heavy], tmp_path / "cmp.html", png=False)
    page = report.html_path.read_text()
    figs = figures(page)
    for run, folder in (("light-2u", light), ("heavy-8u", heavy)):
        summary = read_summary(folder)
        t = trace(figs["throughput_latency"], run=run, metric="ttft_ms", stat="p50")
        assert array(t["x"]).tolist() == [summary["throughput"]["output_tokens_per_s"]]
        assert array(t["y"]).tolist() == [summary["metrics"]["ttft_ms"]["p50"]]
        load = trace(figs["latency_vs_load"], run=run, metric="itl_ms", stat="p99")
        assert array(load["x"]).tolist() == [summary["run"]["users_max"]]
        assert array(load["y"]).tolist() == [summary["metrics"]["itl_ms"]["p99"]]
        assert trace(figs["llm_timeline"], run=run, column="users")["legendgroup"] == run
    colors = {trace(figs["throughput_latency"], run=r, metric="e2e_ms", stat="p50")["line"]["color"]
              for r in ("light-2u", "heavy-8u")}  # fmt: skip
    assert len(colors) == 2
    comparison = page[page.index("<h2>Comparison</h2>") :]
    comparison = comparison[: comparison.index("</table>")]
    assert "<th>light-2u</th><th>heavy-8u</th>" in comparison
    heavy_tps = read_summary(heavy)["throughput"]["output_tokens_per_s"]
    assert f"{heavy_tps:,.4g}" in comparison


@pytest.mark.alone  # Locust's tables of a short run
def test_plain_locust_run_gives_the_charts_its_csvs_allow(tmp_path):
    locustfile = tmp_path / "plain.py"
    locustfile.write_text(
        "from locust import HttpUser, constant, task\n\n"
        "class Plain(HttpUser):\n    wait_time = constant(0.05)\n\n"
        "    @task\n    def models(self):\n        self.client.get('/v1/models')\n\n"
        "    @task\n    def missing(self):\n        self.client.get('/no-such-path')\n"  # 404: a failure
    )
    results = tmp_path / "plain"
    with run_sim() as sim:
        command = [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "-u", "2", "-r", "2",
                   "--run-time", "4s", "--host", sim.url, "--csv", str(results / "plain"),
                   "--csv-full-history"]  # fmt: skip
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr[-2000:]  # Locust's exit code when some request failed
    assert not (results / "summary.json").exists()
    report = build_report([results], png=False)
    assert report.html_path == results / "report.html"
    figs = figures(report.html_path.read_text())
    failures = trace(figs["failures"], run="plain")
    with (results / "plain_failures.csv").open() as f:
        (failed,) = [r for r in csv.DictReader(f) if r["Name"] == "/no-such-path"]
    assert failures["y"] == [int(failed["Occurrences"])] and "404" in failures["meta"]["kind"]
    assert "locust_timeline" in figs  # and none of the charts that need llm-locust's files:
    assert not figs.keys() & {"throughput_latency", "latency_vs_load", "llm_timeline", "distributions"}
    requests = trace(figs["locust_timeline"], run="plain", endpoint="GET /v1/models", column="Requests/s")
    with (results / "plain_stats_history.csv").open() as f:  # the chart is Locust's own column, row by row
        rates = [float(r["Requests/s"]) for r in csv.DictReader(f) if (r["Type"], r["Name"]) == ("GET", "/v1/models")]
    assert rates and list(array(requests["y"])) == rates
    page = report.html_path.read_text()
    assert "summary.json: a plain Locust run" in page and "GET" in page and "/v1/models" in page


def _damage(folder: Path, name: str, content: str | None) -> None:
    """Overwrite (or delete, content None) one file of a results folder."""
    if content is None:
        (folder / name).unlink()
    else:
        (folder / name).write_text(content)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("summary.json", '{"run": {"host": "x"}, "metr', "summary.json: not valid JSON"),
        ("summary.json", "", "summary.json: empty file"),
        ("summary.json", '{"run": {}, "metrics": {}}', "summary.json: missing object 'throughput'"),
        ("llm_timeseries.csv", "", "llm_timeseries.csv: empty file"),
        ("llm_timeseries.csv", "time,elapsed_s\n1,2\n", "llm_timeseries.csv: missing column(s) window_start_epoch_s"),
        ("locust_stats.csv", "Type,Name\n", "locust_stats.csv: missing column(s) Request Count"),
        ("histograms.json", '{"run": {"ttft": "not-an-hdr"}}', "histograms.json: run.ttft is not an encoded"),
    ],
)
def test_bad_files_are_one_line_errors_naming_the_file(two_runs, tmp_path, name, content, message):
    folder = tmp_path / "run"
    shutil.copytree(two_runs[0], folder)
    _damage(folder, name, content)
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        build_report([folder], tmp_path / "r.html", png=False)
    assert "\n" not in str(info.value) and str(folder) in str(info.value)


def test_non_numeric_cell_names_file_line_and_column(two_runs, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(two_runs[0], folder)
    lines = (folder / "llm_timeseries.csv").read_text().splitlines()
    cells = lines[2].split(",")
    cells[lines[0].split(",").index("output_tokens_per_s")] = "lots"  # second data row: line 3
    lines[2] = ",".join(cells)
    (folder / "llm_timeseries.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"llm_timeseries.csv, line 3: column 'output_tokens_per_s' holds 'lots'"):
        build_report([folder], tmp_path / "r.html", png=False)


def test_cli_bad_folder_exits_2_with_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    for folder, message in (
        (tmp_path / "empty", "not a results folder"),
        (tmp_path / "nope", "no such results folder"),
    ):
        proc = subprocess.run([sys.executable, "-m", "llm_locust.cli", "report", str(folder)], capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        assert proc.returncode == 2 and message in proc.stderr and str(folder) in proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_cli_writes_report_and_pngs(two_runs, tmp_path):
    if find_browser() is None:
        pytest.skip("no Chromium on this machine (make browser / apt-get install chromium): PNG export needs one")
    out = tmp_path / "out" / "light.html"
    proc = subprocess.run(
        [sys.executable, "-m", "llm_locust.cli", "report", str(two_runs[0]), "-o", str(out),
         "--slo", "ttft_p90_ms=5000"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"Report: {out.resolve()}" in proc.stdout and "light-2u: capacity run" in proc.stdout
    pngs = sorted((tmp_path / "out" / "light_png").glob("*.png"))
    assert {p.stem for p in pngs} >= {"llm_timeline", "capacity", "distributions"}, proc.stdout  # one step: no curve
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000 for p in pngs)


@pytest.mark.alone  # exact counts per name against the trace
def test_a_scenarios_names_are_a_breakdown_table_of_the_report(tmp_path):
    """locustfiles/scenarios/support_chat.py run by the CLI (its named requests: "refund", "refund follow-up",
    "outage"), then `llm-locust report`: the "by name" table has one row per name, its counts summary.json's
    `breakdowns.name` and Locust's own row of that name."""
    results = tmp_path / "chat"
    with run_sim("--ttft-ms", "10", "--itl-ms", "2", "--output-tokens", "12") as sim:
        # the check fails most refund answers (by design): no error-rate gate, no exit code for failures
        command = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "scenarios" / "support_chat.py"),
                   "--headless", "--only-summary", "-u", "4", "-r", "4", "--run-time", "4s", "--host", sim.url,
                   "--results-dir", str(results), "--csv", str(results / "locust"),
                   "--max-error-rate", "1", "--exit-code-on-error", "0"]  # fmt: skip
        wait(subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    out = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "llm_locust.cli", "report", str(results), "-o", str(out), "--no-png"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {row["label"]: row for row in table_after(out.read_text(), "by name")}
    entries = {entry["label"]: entry for entry in read_summary(results)["breakdowns"]["name"]}
    with (results / "locust_stats.csv").open() as f:
        locust_rows = {row["Name"]: row for row in csv.DictReader(f) if row["Type"] == "POST"}
    assert set(rows) == set(entries) == set(locust_rows) == {"refund", "refund follow-up", "outage"}
    for name, entry in entries.items():
        row = rows[name]
        assert int(row["ok"].replace(",", "")) == entry["requests_ok"] > 0, name
        assert int(row["failed"].replace(",", "")) == entry["requests_failed"], name
        assert int(row["cancelled"]) == entry["requests_cancelled"] == 0, name
        ttft = entry["metrics"]["ttft_ms"]
        low, high = ttft["p50_ci95"]
        half = "?" if low is None or high is None else f"{max(ttft['p50'] - low, high - ttft['p50']):,.4g}"
        assert row["TTFT p50 ms"] == f"{ttft['p50']:,.4g} ± {half}", name  # with its 95 % interval
        sent = entry["requests_ok"] + entry["requests_failed"]
        assert int(locust_rows[name]["Request Count"]) == sent, name
        assert int(locust_rows[name]["Failure Count"]) == entry["requests_failed"], name
    assert rows["refund"]["failures"] == f"check {entries['refund']['requests_failed']}"  # the answer check's kind


def test_mbu_follows_databricks_definition(two_runs, tmp_path):
    # Databricks' example: a 7B model in 16-bit at TPOT 14 ms moves 1 TB/s, 50 % of a 2 TB/s GPU
    assert mbu(Hardware(7, 2, 2000), 14.0) == pytest.approx(0.5)
    assert mbu(Hardware(7, 2, 2000, kv_cache_gb=14), 14.0) == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="--peak-bandwidth-gbs must be > 0"):
        Hardware(7, 2, 0)
    hardware = Hardware(8, 2, 3350)
    report = build_report([two_runs[0]], tmp_path / "r.html", hardware=hardware, png=False)
    line = trace(figures(report.html_path.read_text())["mbu"], run="light-2u", metric="mbu_percent")
    tpot_p50 = read_summary(two_runs[0])["metrics"]["tpot_ms"]["p50"]
    assert array(line["y"]).tolist() == pytest.approx([100 * 16e9 / (tpot_p50 / 1000) / 3350e9])


def test_long_history_is_binned_keeping_spikes():
    n = 10 * MAX_POINTS + 7
    frame = pd.DataFrame({"t": np.arange(n, dtype=float), "rate": np.ones(n), "p99": np.ones(n)})
    frame.loc[12345, "p99"] = 500.0
    binned = downsample(frame, "t", ["p99"], ["rate"])
    assert len(binned) <= MAX_POINTS and binned["rate"].eq(1.0).all() and binned["p99"].max() == 500.0


def test_report_package_never_imports_locust():
    code = (
        "import sys, llm_locust.report.build, llm_locust.report.cli, llm_locust.cli as c; c.build_parser(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('locust', 'gevent')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.strip() == "[]"


def _pixels_near(image: Any, rgb: tuple[int, int, int], tolerance: int = 40) -> int:
    """How many pixels of `image` (PIL RGB) are within `tolerance` of the colour `rgb`."""
    data = np.asarray(image.convert("RGB"), dtype=int)
    return int((np.abs(data - np.array(rgb)).sum(axis=2) < tolerance).sum())


def test_report_renders_in_headless_chromium_without_console_errors(two_runs, tmp_path):
    _, _, image_module = browser_tools()
    slos = parse_slos(["ttft_p90_ms=100000"])
    report = build_report(list(two_runs), tmp_path / "both.html", slos=slos, png=False)
    problems: list[str] = []
    with chromium_page(viewport={"width": 1400, "height": 1000}) as page:
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

        def offline(route: Any) -> None:  # the report must need nothing but its own file
            if not route.request.url.startswith("file:"):
                problems.append(f"network request: {route.request.url}")
                route.abort()
            else:
                route.continue_()

        page.route("**/*", offline)
        page.goto(report.html_path.resolve().as_uri())
        page.wait_for_selector("body[data-charts-rendered]", timeout=60_000)
        assert page.evaluate("document.body.dataset.chartsRendered") == str(len(report.charts))
        shots = {chart.key: page.locator(f"#{chart.key}").screenshot() for chart in report.charts}
    assert problems == []
    run_colors = [(0x63, 0x6E, 0xFA), (0xEF, 0x55, 0x3B)]  # plotly's first two colours: light-2u, heavy-8u
    for key, png in shots.items():
        image = image_module.open(io.BytesIO(png))
        assert image.width > 1000 and image.height > 300, key
        white = _pixels_near(image, (255, 255, 255), tolerance=30)
        assert white < 0.985 * image.width * image.height, f"{key}: blank"
        if key in ("throughput_latency", "latency_vs_load", "llm_timeline", "capacity", "distributions"):
            for rgb in run_colors:
                assert _pixels_near(image, rgb) > 30, f"{key}: no trace drawn in colour {rgb}"


SWEEP_LOCUSTFILE = ROOT / "locustfiles" / "sweep.py"


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory) -> Path:
    """A real concurrency sweep 1, 2, 4, 8 users on a simulator with 4 batch slots: throughput
    saturates at 4 and TTFT jumps at 8 (requests queue); run with an SLO so goodput is recorded."""
    results = tmp_path_factory.mktemp("sweep") / "sweep"
    with run_sim(*BATCHING) as sim:
        command = [
            sys.executable, "-m", "locust", "-f", str(SWEEP_LOCUSTFILE), "--headless", "--only-summary",
            "--host", sim.url, "--sweep-users", "1,2,4,8", "--step-duration-s", "4", "--warmup-s", "1",
            "--max-tokens", "24", "--prompt-tokens", "64", "--ignore-eos", "--interval-s", "1",
            "--slo", "ttft_p90_ms=150", "--csv", str(results / "locust"), "--csv-full-history",
        ]  # fmt: skip
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    # the 8-user step queues: the whole run misses its SLO, and the verdict (exit code 3) says so
    assert proc.returncode == 3, (proc.stdout + proc.stderr)[-3000:]
    verdict = json.loads((results / "summary.json").read_text())["verdict"]
    assert not verdict["passed"] and verdict["reasons"][0].startswith("SLO ttft_p90_ms=150 not met")
    return results


@pytest.mark.alone  # each step of a short sweep steady
def test_sweep_report_one_point_per_step_and_capacity_pick(sweep_run, tmp_path):
    summary = read_summary(sweep_run)
    steps = summary["steps"]
    assert [s["users"] for s in steps] == [1, 2, 4, 8]
    p90 = [s["metrics"]["ttft_ms"]["p90"] for s in steps]
    assert p90[3] > 3 * max(p90[:3])  # 8 users on 4 slots: half of them wait a whole generation
    budget_ms = (max(p90[:3]) + p90[3]) / 2
    slos = parse_slos([f"ttft_p90_ms={budget_ms:.3f}", "e2e_p99_ms=60000"])
    report = build_report([sweep_run], tmp_path / "sweep.html", slos=slos, png=False)
    figs = figures(report.html_path.read_text())

    for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
        for stat in ("p50", "p90", "p99"):
            t = trace(figs["throughput_latency"], run="sweep", metric=metric, stat=stat)
            assert array(t["x"]).tolist() == [s["throughput"]["output_tokens_per_s"] for s in steps]
            assert array(t["y"]).tolist() == [s["metrics"][metric][stat] for s in steps]
            assert t["text"] == [s["label"] for s in steps]
    itl = trace(figs["latency_vs_load"], run="sweep", metric="itl_ms", stat="p99")
    assert array(itl["x"]).tolist() == [1, 2, 4, 8]
    assert array(itl["y"]).tolist() == [s["metrics"]["itl_ms"]["p99"] for s in steps]
    goodput = trace(figs["throughput_vs_load"], run="sweep", metric="goodput_requests_per_s")
    assert array(goodput["y"]).tolist() == [s["throughput"]["goodput_per_s"] for s in steps]
    achieved = trace(figs["throughput_vs_load"], run="sweep", metric="achieved_rate_per_s")
    assert array(achieved["y"]).tolist() == [s["achieved_rate_per_s"] for s in steps]

    # the capacity: the highest step whose every SLO statistic is within its threshold
    meeting = [
        s for s in steps if s["metrics"]["ttft_ms"]["p90"] <= budget_ms and s["metrics"]["e2e_ms"]["p99"] <= 60000
    ]
    (cap,) = report.capacities
    assert cap.best is not None and cap.best.label == meeting[-1]["label"] == "users=4"
    assert cap.best.output_tokens_per_s == meeting[-1]["throughput"]["output_tokens_per_s"]
    assert [c.ok for c in cap.checks] == [True, True, True, False]
    pick = trace(figs["capacity"], run="sweep", slo="ttft_p90_ms", pick="users=4")
    assert array(pick["x"]).tolist() == [4]

    # the curve: the page opens on it, with the knee and the capacity marked at their steps
    page = report.html_path.read_text()
    assert page.index('data-chart="throughput_latency"') < page.index("<h2>Runs</h2>")
    tput = [s["throughput"]["output_tokens_per_s"] for s in steps]
    knee = knee_index(tput, [s["metrics"]["e2e_ms"]["p50"] for s in steps])
    assert knee is not None
    star = trace(figs["throughput_latency"], run="sweep", metric="ttft_ms", knee=steps[knee]["label"])
    assert array(star["x"]).tolist() == [tput[knee]]
    circle = trace(figs["throughput_latency"], run="sweep", metric="e2e_ms", capacity="users=4")
    assert array(circle["y"]).tolist() == [steps[2]["metrics"]["e2e_ms"]["p50"]]

    # step boundaries on the time axis: each step's start, seconds after the run's start
    t0 = datetime.fromisoformat(summary["run"]["start_time"]).timestamp()
    starts = [datetime.fromisoformat(s["start_time"]).timestamp() - t0 for s in steps]
    lines = [s["x0"] for s in figs["llm_timeline"]["layout"]["shapes"] if s["type"] == "line"]
    assert lines == pytest.approx(starts)
    step_column = trace(figs["llm_timeline"], run="sweep", column="users")
    assert len(array(step_column["y"])) == summary["timeseries"]["rows"]


def test_sweep_distributions_come_from_histograms_json(sweep_run, tmp_path):
    summary = read_summary(sweep_run)
    report = build_report([sweep_run], tmp_path / "sweep.html", png=False)
    figs = figures(report.html_path.read_text())
    for metric, key in (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("e2e", "e2e_ms"), ("itl", "itl_ms")):
        cdf = trace(figs["distributions"], run="sweep", metric=metric, kind="cdf")
        x, y = array(cdf["x"]), array(cdf["y"])
        assert y[-1] == pytest.approx(1.0) and np.all(np.diff(y) > 0)
        one = 1 / summary["metrics"][key]["count"]  # HdrHistogram rounds the target count to a sample
        for stat, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            value = summary["metrics"][key][stat]
            found = np.flatnonzero(np.isclose(x, value, atol=0.0005))  # (a thinned CDF too: `thin_cdf`)
            assert len(found) == 1, (key, stat, value, x[np.argsort(np.abs(x - value))[:4]].tolist(), len(x))
            (i,) = found
            assert y[i] >= q - one and (i == 0 or y[i - 1] < q + one)  # the CDF crosses q at the summary's value
        shares = array(trace(figs["distributions"], run="sweep", metric=metric, kind="histogram")["y"])
        assert shares.sum() == pytest.approx(100.0)
    for step in summary["steps"]:  # per step: each CDF crosses 0.9 at the step's own p90
        cdf = trace(figs["step_distributions"], run="sweep", step=step["label"], metric="ttft")
        x, y = array(cdf["x"]), array(cdf["y"])
        (i,) = np.flatnonzero(np.isclose(x, step["metrics"]["ttft_ms"]["p90"], atol=0.0005))
        one = 1 / step["metrics"]["ttft_ms"]["count"]
        assert y[i] >= 0.9 - one and (i == 0 or y[i - 1] < 0.9 + one)
    tokens = trace(figs["distributions"], run="sweep", metric="output_tokens", kind="cdf")
    assert array(tokens["x"]).tolist() == [24.0]  # --max-tokens 24 --ignore-eos: every answer 24 tokens


def test_rate_sweep_achieved_vs_offered_and_the_saturation_banner(tmp_path):
    """An open-loop sweep whose second rate two users cannot send: the run warns it fell behind its
    schedule, the report shows that warning as a banner and draws achieved against offered."""
    results = tmp_path / "rate"
    with run_sim(*BATCHING) as sim:
        command = [
            sys.executable, "-m", "locust", "-f", str(SWEEP_LOCUSTFILE), "--headless", "--only-summary",
            "--host", sim.url, "--sweep-rates", "2,40", "--max-concurrency", "2", "--step-duration-s", "4",
            "--warmup-s", "1", "--max-tokens", "24", "--prompt-tokens", "64", "--ignore-eos", "--interval-s", "1",
            "--csv", str(results / "locust"), "--csv-full-history",
        ]  # fmt: skip
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    summary = read_summary(results)
    steps = summary["steps"]
    assert summary["load"]["model"] == "rate_sweep" and [s["rate_per_s"] for s in steps] == [2.0, 40.0]
    assert steps[1]["achieved_rate_per_s"] < 20  # two users at ~0.25 s per request cannot send 40/s
    (warning,) = [w for w in summary["warnings"] if "fell behind its schedule" in w]

    report = build_report([results], png=False)
    page = report.html_path.read_text()
    assert f'<div class="banner">⚠ rate: {html.escape(warning)}</div>' in page
    figs = figures(page)
    offered = trace(figs["throughput_vs_load"], run="rate", metric="offered_rate_per_s")
    assert array(offered["x"]).tolist() == array(offered["y"]).tolist() == [2.0, 40.0]
    achieved = trace(figs["throughput_vs_load"], run="rate", metric="achieved_rate_per_s")
    assert array(achieved["x"]).tolist() == [2.0, 40.0]
    assert array(achieved["y"]).tolist() == [s["achieved_rate_per_s"] for s in steps]
    layout = figs["latency_vs_load"]["layout"]  # the bottom row's axes name the load (as many rows as latencies)
    assert {ax["title"]["text"] for key, ax in layout.items() if key.startswith("xaxis") and "title" in ax} == {
        "Offered rate (requests/s)"
    }
    delay = trace(figs["distributions"], run="rate", metric="queue_delay", kind="cdf")  # open loop: how late
    assert array(delay["x"])[-1] == pytest.approx(summary["metrics"]["queue_delay_ms"]["max"], abs=0.001)


def test_lost_worker_and_incomplete_run_get_banners(two_runs, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(two_runs[0], folder)
    summary = read_summary(folder)
    summary["run"]["workers_lost"] = ["vm_1234abcd"]  # as the master records a worker that stopped reporting
    summary["status"] = "incomplete"
    (folder / "summary.json").write_text(json.dumps(summary))
    page = build_report([folder], png=False).html_path.read_text()
    assert '<div class="banner">⚠ run: 1 worker(s) lost during the run: vm_1234abcd</div>' in page
    assert "run: the run did not complete" in page


def test_time_series_without_rows_is_noted_not_fatal(two_runs, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(two_runs[0], folder)
    header = (folder / "llm_timeseries.csv").read_text().splitlines()[0]
    (folder / "llm_timeseries.csv").write_text(header + "\n")  # a run shorter than one interval
    report = build_report([folder], png=False)
    page = report.html_path.read_text()
    assert "run: missing llm_timeseries.csv rows" in page
    assert "llm_timeline" not in figures(page) and "distributions" in figures(page)


def test_without_a_browser_the_html_is_written_and_the_pngs_skipped_with_a_reason(two_runs, tmp_path):
    env = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)}  # no chromium on this PATH
    out = tmp_path / "r.html"
    proc = subprocess.run([sys.executable, "-m", "llm_locust.cli", "report", str(two_runs[0]), "-o", str(out)],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "PNG images skipped: no Chrome/Chromium found" in proc.stdout and out.exists()
    assert not (tmp_path / "r_png").exists()


def test_knee_is_the_last_step_that_bought_throughput():
    tput = [118, 222, 400, 667, 1000, 1010]  # the batching simulator's 1..32 users: flat from 16 on
    e2e = [550, 560, 600, 770, 1030, 2050]  # queueing doubles the latency at 32
    assert knee_index(tput, e2e) == 4
    assert knee_index([100, 200, 300], [10, 10, 10]) is None  # no latency change: no knee
    assert knee_index([100, 200], [10, 20]) is None  # too few points
    assert knee_index([100, float("nan"), 300], [10, 20, 30]) is None
