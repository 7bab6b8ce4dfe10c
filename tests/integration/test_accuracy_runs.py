"""Answers scored while the load runs, against the simulator over loopback: a dataset's references and a scenario's
`score=` through master + 2 workers, each answer right or wrong by construction (the simulator's answers are words:
a regex for a word matches them, an expected number, a letter and a JSON schema do not); summary.json's accuracy
(run, breakdowns) equals the recount from requests.jsonl exactly; `--min-accuracy` gates with exit code 3."""

from __future__ import annotations

import json
import math
from pathlib import Path

import gevent
import orjson
import pytest
from conftest import LOCUSTFILE, options, quit_master, read_summary, run_locust, start_master_and_workers
from locust import task

from llm_locust.metrics.gates import EXIT_GATE_FAILED
from llm_locust.metrics.record import ErrorKind
from llm_locust.metrics.scoring import Reference, wilson_interval
from llm_locust.results.request_lines import REQUESTS_FILE
from llm_locust.runtime.users import LLMUser
from llm_locust.sim import run_sim

ROWS = [
    {"prompt": "Say some words.", "regex": r"^\s*[a-z]+"},  # right: the simulator answers words
    {"prompt": "Say more words.", "regex": r"[a-z]+\s+[a-z]+"},  # right
    {"prompt": "What is 6 x 7?", "expected": 42},  # wrong: words are not 42
    {"prompt": "Pick one.\nA. x\nB. y", "choices": ["x", "y"], "answer": "B"},  # wrong: no capital letter
    {"prompt": "Answer in JSON.", "schema": {"type": "object"}},  # wrong: words are not JSON
]


@pytest.fixture(scope="module")
def sim():
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--output-tokens", "8") as sim:
        yield sim


def write_rows(tmp_path: Path) -> Path:
    path = tmp_path / "quiz.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(row) for row in ROWS))
    return path


def lines_of(results: Path) -> list[dict]:
    return [json.loads(line) for line in (results / REQUESTS_FILE).read_text().splitlines()]


def recount(lines: list[dict]) -> tuple[int, int, float]:
    """(scored, correct, score sum) of requests.jsonl's lines."""
    scored = [line for line in lines if line["score"] is not None]
    return len(scored), sum(line["correct"] for line in scored), sum(line["score"] for line in scored)


def test_a_datasets_references_are_scored_through_two_worker_processes_and_gated(sim, tmp_path):
    """`locust --processes 2` with a dataset carrying every kind of reference: each line's score is what its
    reference says of a word answer; summary.json's accuracy is the lines' recount, with its Wilson interval; the
    console says it; `--min-accuracy` above it fails the run with exit code 3 and the reason."""
    results = tmp_path / "gated"
    proc = run_locust(LOCUSTFILE, "--host", sim.url, "-u", "6", "-r", "6", "-t", "60s", "--processes", "2",
                      "--max-requests", "300", "--seed", "5", "--dataset", str(write_rows(tmp_path)),
                      "--requests-jsonl", "--results-dir", str(results), "--min-accuracy", "0.9")  # fmt: skip
    assert proc.returncode == EXIT_GATE_FAILED, proc.stderr[-3000:]
    summary, lines = read_summary(results), lines_of(results)
    assert summary["failures"] == {} and len(lines) == summary["throughput"]["requests_ok"] >= 300
    for line in lines:
        reference = line["reference"]
        assert line["outcome"] == "ok" and line["answer"] and reference
        assert line["correct"] is ("regex" in reference), line  # by construction
        assert line["score"] == float(line["correct"])
        assert set(reference) <= {"regex", "expected", "answer", "schema"}
    scored, correct, score_sum = recount(lines)
    accuracy = summary["accuracy"]
    assert (accuracy["scored"], accuracy["correct"], accuracy["score_sum"]) == (scored, correct, score_sum)
    assert accuracy["accuracy"] == round(score_sum / scored, 6) and 0.2 < accuracy["accuracy"] < 0.6
    assert (accuracy["ci95_low"], accuracy["ci95_high"]) == pytest.approx(wilson_interval(correct, scored), abs=1e-6)
    assert accuracy["stderr"] == pytest.approx(math.sqrt(correct * (scored - correct) / scored**3), abs=1e-6)
    verdict = summary["verdict"]
    assert not verdict["passed"] and verdict["min_accuracy"] == 0.9 and verdict["accuracy"] == accuracy["accuracy"]
    assert verdict["reasons"] == [
        f"accuracy {accuracy['accuracy']:.4f} ({correct} of {scored} scored answers right, 95 % CI "
        f"{accuracy['ci95_low']:.3f}-{accuracy['ci95_high']:.3f}) < --min-accuracy 0.9"
    ]
    console = proc.stdout + proc.stderr
    assert f"Accuracy: {100 * accuracy['accuracy']:.1f} % of {scored} scored answers ({correct} right" in console
    assert "FAILED: accuracy" in console

    passing = run_locust(LOCUSTFILE, "--host", sim.url, "-u", "4", "-r", "4", "-t", "60s", "--max-requests", "60",
                         "--seed", "5", "--dataset", str(write_rows(tmp_path)), "--results-dir", str(tmp_path / "ok"),
                         "--min-accuracy", "0.05")  # fmt: skip
    assert passing.returncode == 0, passing.stderr[-3000:]
    assert read_summary(tmp_path / "ok")["verdict"]["passed"]


class Quiz(LLMUser):
    """Four named calls, each scored (or checked) by construction against the simulator's word answers."""

    @task
    def quiz(self) -> None:
        messages = [{"role": "user", "content": "Say something."}]
        chat = self.llm.chat.completions
        right = chat.create(messages=messages, name="right", score=lambda answer: bool(answer.text.split()))
        assert right.score in (None, 1.0)  # None: the request failed
        chat.create(messages=messages, name="wrong", score=Reference(expected="42"))
        chat.create(messages=messages, name="half", score=lambda answer: 0.5)
        with chat.create(messages=messages, name="checked", catch_response=True, score=lambda a: True) as answer:
            answer.failure("a check fails: the request is a failure, its score is not counted")
        self.llm.responses.create(input="Say something.", name="responses", score=Reference(regex=r"[a-z]"))


def test_a_scenarios_scores_count_per_name_through_master_and_workers(sim, tmp_path):
    """A scenario's `score=` — a callable (right/wrong or partial credit) or a `Reference`, on chat and Responses —
    through master + 2 workers: per name, the breakdown's accuracy is what the scorer gives, a `catch_response`
    failure is a failure of kind `check` and no score, and the run's accuracy is the lines' recount exactly."""
    opts = options("--host", sim.url, "--results-dir", str(tmp_path), "--requests-jsonl")
    master_env, master, _ = start_master_and_workers(opts, user_classes=[Quiz])
    master_env.stop_timeout = 3  # a stopped user ends its task first
    master.start(4, spawn_rate=4)
    gevent.sleep(3)
    master.stop()
    gevent.sleep(3.5)  # the workers' last reports
    quit_master(master_env)
    summary, lines = read_summary(tmp_path), lines_of(tmp_path)

    by_name = {entry["label"]: entry for entry in summary["breakdowns"]["name"]}
    assert set(by_name) == {"right", "wrong", "half", "checked", "responses"}
    expected = {"right": (1.0, True), "wrong": (0.0, False), "half": (0.5, False), "responses": (1.0, True)}
    for name, (score, correct) in expected.items():
        entry = by_name[name]
        mine = [line for line in lines if line["name"] == name and line["outcome"] == "ok"]
        assert entry["requests_ok"] == len(mine) > 5, name
        assert all((line["score"], line["correct"]) == (score, correct) for line in mine), name
        accuracy = entry["accuracy"]
        assert (accuracy["scored"], accuracy["accuracy"]) == (len(mine), score), name
        assert accuracy["correct"] == (len(mine) if correct else 0), name
    checked = by_name["checked"]
    assert checked["accuracy"] is None and checked["requests_ok"] == 0
    assert checked["failures"] == {ErrorKind.CHECK.value: checked["requests_failed"]} and checked["requests_failed"]
    assert all(line["score"] is None for line in lines if line["name"] == "checked")
    assert next(line["reference"] for line in lines if line["name"] == "wrong") == {"expected": "42"}
    scored, correct, score_sum = recount(lines)
    total = summary["accuracy"]
    assert (total["scored"], total["correct"], total["score_sum"]) == (scored, correct, pytest.approx(score_sum))
    assert total["scored"] == sum(by_name[name]["accuracy"]["scored"] for name in expected)
