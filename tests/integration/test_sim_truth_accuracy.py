"""Measured accuracy against the simulator's truth, over loopback with the `locust` CLI: a built-in set answered right
at `--accuracy 0.8` through master + 2 workers, JSON-schema validity for chat and Responses against the simulator's
deliberately invalid answers, and a user sweep whose accuracy falls at the step whose batch passes
`--degrade-above-batch` (gated by `--min-accuracy`). Every request runs to its end (`--stop-timeout`), so the client's
counts and the simulator's `llm_locust_sim:answers_total` are the same requests."""

from __future__ import annotations

import http.client
import json
import math
import random
import re
from pathlib import Path

import gevent
import pytest
from conftest import LOCUSTFILE, ROOT, read_summary, run_locust

from llm_locust.metrics.gates import EXIT_GATE_FAILED
from llm_locust.results.request_lines import REQUESTS_FILE
from llm_locust.sim import SimProcess, run_sim

pytestmark = pytest.mark.alone  # exact counts through a master and two workers

SCHEMA_FILE = ROOT / "docs" / "examples" / "person.schema.json"


def answers_total(sim: SimProcess) -> dict[str, int]:
    """The simulator's `llm_locust_sim:answers_total` by kind."""
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return {kind: int(n) for kind, n in re.findall(r'llm_locust_sim:answers_total\{[^}]*kind="(\w+)"\} (\d+)', text)}


def lines_of(results: Path) -> list[dict]:
    return [json.loads(line) for line in (results / REQUESTS_FILE).read_text().splitlines()]


def test_accuracy_0_8_is_measured_at_the_simulators_truth_through_master_and_two_workers(tmp_path):
    """`--processes 2` on `builtin:arithmetic` against `--accuracy 0.8`: the answers scored right are exactly those
    the simulator gave right (its counter, each line joined with its trace record by id, and the first n draws of
    its seeded generator), and the accuracy is 0.8 within 3 standard errors."""
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--accuracy", "0.8", "--answer-seed", "6") as sim:
        proc = run_locust(LOCUSTFILE, "--host", sim.url, "-u", "8", "-r", "8", "-t", "8s", "--stop-timeout", "5",
                          "--processes", "2", "--seed", "3", "--dataset", "builtin:arithmetic", "--requests-jsonl",
                          "--results-dir", str(tmp_path))  # fmt: skip
        truth, trace = answers_total(sim), {record["id"]: record for record in sim.trace()}
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary, lines = read_summary(tmp_path), lines_of(tmp_path)
    accuracy = summary["accuracy"]
    n, correct = accuracy["scored"], accuracy["correct"]
    assert summary["failures"] == {} and n == summary["throughput"]["requests_ok"] == len(lines) > 300
    assert (correct, n - correct) == (truth["correct"], truth["wrong"])
    for line in lines:
        answer = trace[line["request_id"]]["answer"]
        assert line["correct"] is (answer["kind"] == "correct") and line["answer"] == answer["text"], line
    draws = random.Random("6/accuracy")
    assert correct == sum(draws.random() < 0.8 for _ in range(n))
    assert abs(accuracy["accuracy"] - 0.8) <= 3 * math.sqrt(0.8 * 0.2 / n), accuracy
    assert "Accuracy: " in proc.stdout + proc.stderr


@pytest.mark.parametrize("locustfile", ["chat.py", "responses.py"])
def test_json_schema_validity_counts_equal_the_simulators_invalid_answers(tmp_path, locustfile):
    """`--response-format json_schema --schema FILE` on chat and on the Responses API against `--invalid-json-rate
    0.2`: the answers scored invalid are exactly the simulator's deliberately invalid ones."""
    with run_sim("--ttft-ms", "5", "--itl-ms", "1", "--invalid-json-rate", "0.2", "--answer-seed", "2") as sim:
        proc = run_locust(ROOT / "locustfiles" / locustfile, "--host", sim.url, "-u", "4", "-r", "4", "-t", "5s",
                          "--stop-timeout", "5", "--seed", "1", "--response-format", "json_schema", "--schema",
                          str(SCHEMA_FILE), "--max-tokens", "200", "--results-dir", str(tmp_path))  # fmt: skip
        truth = answers_total(sim)
    assert proc.returncode == 0, proc.stderr[-3000:]
    accuracy = read_summary(tmp_path)["accuracy"]
    n = accuracy["scored"]
    assert n > 50 and (accuracy["correct"], n - accuracy["correct"]) == (truth["valid_json"], truth["invalid_json"])
    draws = random.Random("2/invalid-json")
    assert truth["invalid_json"] == sum(draws.random() < 0.2 for _ in range(n)) > 0


def test_a_user_sweeps_accuracy_falls_at_the_step_past_the_degraded_batch_and_the_gate_says_so(tmp_path):
    """A batching simulator degrading above a batch of 2: the sweep's 2-user step answers (nearly) every question
    right, its 8-user step (batches above 2) falls below 0.9, every answer admitted into a batch of 2 or less is
    right, and `--min-accuracy 0.9` fails the run (exit 3); the same sweep against a healthy simulator passes it
    (exit 0)."""
    sweep = ROOT / "locustfiles" / "sweep.py"
    args = ("--sweep-users", "2,8", "--step-duration-s", "6", "--warmup-s", "1", "--stop-timeout", "5", "--seed", "4",
            "--dataset", "builtin:arithmetic", "--min-accuracy", "0.9")  # fmt: skip
    batching = ("--timing", "batching", "--decode-step-ms", "8", "--max-batch", "32")
    with (
        run_sim(*batching, "--degrade-above-batch", "2", "--degraded-accuracy", "0.3") as sim,
        run_sim(*batching) as healthy_sim,
    ):  # both sweeps at once (what they count is who shares a batch, not when: a busier machine changes neither)
        runs = [gevent.spawn(run_locust, sweep, "--host", url, *args, "--results-dir", str(tmp_path / name))
                for url, name in ((sim.url, "degraded"), (healthy_sim.url, "healthy"))]  # fmt: skip
        gevent.joinall(runs, raise_error=True)
        degraded, healthy = (run.value for run in runs)
        trace = sim.trace()
    steps = read_summary(tmp_path / "degraded")["steps"]
    assert degraded.returncode == EXIT_GATE_FAILED, ([step["accuracy"] for step in steps], degraded.stderr[-2000:])
    assert [step["users"] for step in steps] == [2, 8]
    # a step counts the requests sent in it: the 2-user step's last ones may meet the next step's users in a batch
    assert steps[0]["accuracy"]["accuracy"] > 0.97 and steps[0]["accuracy"]["scored"] > 20
    assert steps[1]["accuracy"]["accuracy"] < 0.9, steps[1]["accuracy"]
    assert all(r["answer"]["kind"] == "correct" for r in trace if r["answer"]["batch"] <= 2)
    assert any(r["answer"]["batch"] > 2 for r in trace)
    assert healthy.returncode == 0, healthy.stderr[-3000:]
    assert [step["accuracy"]["accuracy"] for step in read_summary(tmp_path / "healthy")["steps"]] == [1.0, 1.0]


@pytest.mark.parametrize("family", ["vllm", "sglang", "llamacpp"])
def test_text_completions_send_the_families_structured_output_field_and_get_json_for_it(tmp_path, family):
    """`locustfiles/completions.py` with `--response-format json_schema`: each server family's own field (vLLM
    `structured_outputs`, SGLang's and llama.cpp's `json_schema`) reaches the simulator, which answers JSON for the
    schema to every request — all of them scored valid, as many as it counted."""
    with run_sim("--ttft-ms", "5", "--itl-ms", "1") as sim:
        proc = run_locust(ROOT / "locustfiles" / "completions.py", "--host", sim.url, "-u", "2", "-r", "2", "-t",
                          "3s", "--stop-timeout", "5", "--server-family", family, "--response-format", "json_schema",
                          "--schema", str(SCHEMA_FILE), "--max-tokens", "200",
                          "--results-dir", str(tmp_path))  # fmt: skip
        truth = answers_total(sim)
    assert proc.returncode == 0, proc.stderr[-3000:]
    accuracy = read_summary(tmp_path)["accuracy"]
    assert accuracy["scored"] == accuracy["correct"] == truth["valid_json"] > 10 and truth["invalid_json"] == 0
