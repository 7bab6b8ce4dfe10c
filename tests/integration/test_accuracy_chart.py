"""The report shows accuracy falling under load: a user sweep against a simulator that answers right every time until
its running batch exceeds 4 and 1 time in 5 above; the "Quality under load" chart draws each step's accuracy, its
Wilson interval and its E2E latency as summary.json has them, the fall at the step past the batch size included.
(The agreement with the simulator's truth, the JSON-schema validity counts and the `--min-accuracy` exit codes:
tests/integration/test_sim_truth_accuracy.py.)"""

from __future__ import annotations

from pathlib import Path

from conftest import ROOT, read_summary, run_locust
from harness.report_figures import array, figures, table_after, trace

from llm_locust.report.build import build_report
from llm_locust.sim import run_sim

BATCHING = ("--timing", "batching", "--max-batch", "16", "--decode-step-ms", "4", "--decode-step-ms-per-seq", "0.2")


def test_the_reports_quality_chart_shows_accuracy_falling_past_the_batch_size(tmp_path):
    """Steps of 2, 4 and 8 users, each answer padded to 24 tokens (`--ignore-eos`: a request stays in the batch long
    enough to fill it): the steps at 2 and 4 users are right (but for a request at a step's end that meets the next
    step's first ones in the batch), the step at 8 falls, its interval below theirs; the chart's points, error bars and
    latency are the steps', and the steps table has the columns."""
    results = tmp_path / "degraded"
    with run_sim(*BATCHING, "--accuracy", "1", "--degrade-above-batch", "4", "--degraded-accuracy", "0.2") as sim:
        proc = run_locust(ROOT / "locustfiles" / "sweep.py", "--host", sim.url, "--sweep-users", "2,4,8",
                          "--step-duration-s", "5", "--warmup-s", "1", "--stop-timeout", "5", "--seed", "4",
                          "--dataset", "builtin:arithmetic", "--ignore-eos", "--max-tokens", "24",
                          "--results-dir", str(results), timeout_s=90)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = read_summary(results)["steps"]
    accuracy = [step["accuracy"] for step in steps]
    # right every time but for a request of the 4-user step's end admitted beside the next step's first ones
    assert all(a["accuracy"] >= 0.95 for a in accuracy[:2]) and all(a["scored"] > 20 for a in accuracy)
    assert accuracy[2]["accuracy"] < 0.6 and accuracy[2]["ci95_high"] < min(a["ci95_low"] for a in accuracy[:2])

    report = build_report([results], tmp_path / "report.html", png=False)
    page = Path(report.html_path).read_text()
    chart = figures(page)["quality_vs_load"]
    points = trace(chart, run=results.name, metric="accuracy")
    assert list(array(points["x"])) == [2.0, 4.0, 8.0]
    y = array(points["y"])
    assert list(y) == [100 * a["accuracy"] for a in accuracy] and y[2] < y[1] - 40  # the fall, as drawn
    up, down = array(points["error_y"]["array"]), array(points["error_y"]["arrayminus"])
    for a, high, low in zip(accuracy, up, down, strict=True):
        assert abs(high - 100 * (a["ci95_high"] - a["accuracy"])) < 1e-6
        assert abs(low - 100 * (a["accuracy"] - a["ci95_low"])) < 1e-6
    latency = trace(chart, run=results.name, metric="e2e_ms", stat="p50")
    assert list(array(latency["y"])) == [step["metrics"]["e2e_ms"]["p50"] for step in steps]
    rows = table_after(page, "Steps", level=2)
    assert [int(row["answers scored"]) for row in rows] == [a["scored"] for a in accuracy]
