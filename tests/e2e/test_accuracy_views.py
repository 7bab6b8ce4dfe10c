"""Accuracy where a person reads it: a sweep scoring a dataset's references against the simulator, started from the
web UI; the /llm page (headless Chromium) shows the run's accuracy and each step's as summary.json has them, and the
report's "Quality under load" chart draws each step's accuracy with its interval beside its latency."""

from __future__ import annotations

from pathlib import Path

import orjson
from conftest import ROOT, read_summary
from harness.browser import browser_tools, chromium_page, open_final_llm_page
from harness.report_figures import array, figures, table_after, trace
from harness.web_ui import locust_web_ui

from llm_locust.report.build import build_report

ROWS = [
    {"prompt": "Say some words.", "regex": r"[a-z]+"},  # right: the simulator answers words
    {"prompt": "Say more words.", "regex": r"[a-z]+\s[a-z]+"},  # right
    {"prompt": "What is 6 x 7?", "expected": 42},  # wrong
]


def accuracy_text(accuracy: dict) -> str:
    """The /llm page's text of summary.json's `accuracy`."""
    return f"{100 * accuracy['accuracy']:.1f} % ({100 * accuracy['ci95_low']:.1f}-{100 * accuracy['ci95_high']:.1f})"


def test_accuracy_on_the_live_page_and_in_the_report(fast_sim, tmp_path):
    browser_tools()  # skips the test, saying why, without Chromium
    dataset = tmp_path / "quiz.jsonl"
    dataset.write_bytes(b"\n".join(orjson.dumps(row) for row in ROWS))
    results = tmp_path / "results"
    command = ["-f", str(ROOT / "locustfiles" / "sweep.py"), "--host", fast_sim.url, "--sweep-users", "1,3",
               "--step-duration-s", "3", "--warmup-s", "0.5", "--dataset", str(dataset), "--seed", "3",
               "--results-dir", str(results), "--autostart", "--autoquit", "30"]  # fmt: skip
    problems: list[str] = []
    with locust_web_ui(*command) as web, chromium_page(viewport={"width": 1400, "height": 1000}) as page:
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        open_final_llm_page(page, web.url, 40)
        summary = read_summary(results)
        accuracy = summary["accuracy"]
        assert accuracy["scored"] == summary["throughput"]["requests_ok"] > 20
        assert page.inner_text("[data-field='run.accuracy']") == accuracy_text(accuracy)
        steps = summary["steps"]
        assert len(steps) == 2 and all(step["accuracy"]["scored"] > 5 for step in steps)
        for step in steps:
            assert page.inner_text(f"[data-field='step.{step['index']}.accuracy']") == accuracy_text(step["accuracy"])
            tokens_per_s = step["throughput"]["output_tokens_per_s"]  # the run's rates, a column each (output tok/s)
            assert page.inner_text(f"[data-field='step.{step['index']}.output_tokens_per_s']") == f"{tokens_per_s:.2f}"
        page.screenshot(path=tmp_path / "llm_accuracy.png", full_page=True)
    assert problems == [], problems
    assert "Traceback" not in web.output, web.output[-3000:]

    report = build_report([results], tmp_path / "report.html", png=False)
    page_html = Path(report.html_path).read_text()
    chart = figures(page_html)["quality_vs_load"]
    points = trace(chart, run=results.name, metric="accuracy")
    assert list(array(points["x"])) == [1.0, 3.0]  # the steps' users
    assert list(array(points["y"])) == [100 * step["accuracy"]["accuracy"] for step in steps]
    high, low = array(points["error_y"]["array"]), array(points["error_y"]["arrayminus"])
    for step, up, down in zip(steps, high, low, strict=True):
        a = step["accuracy"]
        assert (
            abs(up - 100 * (a["ci95_high"] - a["accuracy"])) < 1e-6
            and abs(down - 100 * (a["accuracy"] - a["ci95_low"])) < 1e-6
        )
    latency = trace(chart, run=results.name, metric="e2e_ms", stat="p50")
    assert list(array(latency["y"])) == [step["metrics"]["e2e_ms"]["p50"] for step in steps]
    assert "Quality under load" in page_html
    rows = table_after(page_html, "Steps", level=2)  # the steps table has the accuracy columns
    for row, step in zip(rows, steps, strict=True):
        a = step["accuracy"]
        assert int(row["answers scored"]) == a["scored"]
        assert (
            abs(float(row["accuracy"]) - a["accuracy"]) < 1e-3
            and abs(float(row["accuracy CI low"]) - a["ci95_low"]) < 1e-3
        )
