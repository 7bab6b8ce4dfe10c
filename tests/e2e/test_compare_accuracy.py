"""`llm-locust compare` on accuracy: three real runs against the simulator whose answers a scenario scores by a fixed
pattern (8 of every 10 right, or 7) — the two-proportion z-test flags the 10-point drop and not the equal run.

Why the equal pair cannot flake: each user scores its answers by the same cycle, so both runs' accuracies are 0.8 up
to each user's last unfinished cycle (a few answers in thousands): the z statistic stays far below 1.96."""

from __future__ import annotations

import os
import subprocess
import sys

import gevent
import pytest
from conftest import read_summary, run_locust

from llm_locust.report.compare import NO_CHANGE, REGRESSION, compare
from llm_locust.report.run_data import load_run
from llm_locust.sim import run_sim

SCENARIO = """
import itertools
import os

from locust import events, task

from llm_locust.plugin import install
from llm_locust.users import LLMUser

install(events)
RIGHT = int(os.environ["QUIZ_RIGHT"])  # of every 10 answers


class Quiz(LLMUser):
    def on_start(self):
        self.pattern = itertools.cycle([True] * RIGHT + [False] * (10 - RIGHT))

    @task
    def ask(self):
        self.llm.chat.completions.create(messages=[{"role": "user", "content": "Say something."}], name="quiz",
                                         score=lambda answer: next(self.pattern))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """base and same (8 of 10 right) and drop (7 of 10), at the same time, each against its own simulator."""
    root = tmp_path_factory.mktemp("accuracy")
    locustfile = root / "quiz.py"
    locustfile.write_text(SCENARIO)
    right = {"base": 8, "same": 8, "drop": 7}

    def run(name: str, url: str) -> None:
        proc = run_locust(locustfile, "-u", "4", "-r", "4", "-t", "8s", "--host", url, "--interval-s", "1",
                          "--results-dir", str(root / name), env={**os.environ, "QUIZ_RIGHT": str(right[name])},
                          timeout_s=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]

    timing = ("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8")
    with run_sim(*timing) as one, run_sim(*timing) as two, run_sim(*timing) as three:
        urls = {"base": one.url, "same": two.url, "drop": three.url}
        gevent.joinall([gevent.spawn(run, name, url) for name, url in urls.items()], raise_error=True)
    return {name: root / name for name in right}


def compare_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llm_locust.cli", "compare", *args], capture_output=True, text=True,
                          timeout=60)  # fmt: skip


@pytest.mark.alone  # scored counts of three real runs against a fixed pattern
def test_a_ten_point_drop_is_a_regression_and_an_equal_run_is_not(runs, tmp_path):
    accuracy = {name: read_summary(folder)["accuracy"] for name, folder in runs.items()}
    assert all(a["scored"] > 500 for a in accuracy.values()), accuracy
    assert abs(accuracy["base"]["accuracy"] - 0.8) < 0.01 and abs(accuracy["drop"]["accuracy"] - 0.7) < 0.01

    base = [load_run(runs["base"])]
    same = next(r for r in compare(base, [load_run(runs["same"])]).results if r.metric.name == "accuracy")
    assert same.verdict == NO_CHANGE and same.p_value > 0.5 and not same.gate_failed
    assert same.low < 0 < same.high
    drop = next(r for r in compare(base, [load_run(runs["drop"])]).results if r.metric.name == "accuracy")
    assert drop.verdict == REGRESSION and drop.p_value < 1e-4 and drop.gate_failed
    assert abs(drop.change + 0.1) < 0.015 and drop.low < drop.change < drop.high < -0.05
    assert (drop.baseline, drop.candidate) == (accuracy["base"]["accuracy"], accuracy["drop"]["accuracy"])

    gated = ("--max-regression", "accuracy=5%", "-o", str(tmp_path / "compare.html"))
    proc = compare_cli(str(runs["base"]), "--", str(runs["drop"]), *gated)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert f"Compare: FAILED: accuracy {100 * drop.change:+.1f} pt [" in proc.stdout and "beyond 5 pt" in proc.stdout
    assert "regression" in next(line for line in proc.stdout.splitlines() if line.startswith("accuracy"))
    equal = compare_cli(str(runs["base"]), "--", str(runs["same"]), *gated)
    assert equal.returncode == 0, equal.stdout + equal.stderr
    assert "no significant change" in next(line for line in equal.stdout.splitlines() if line.startswith("accuracy"))
