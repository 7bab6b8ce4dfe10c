"""A real model's answers scored while the load runs: SmolLM2 on llama.cpp answers the built-in arithmetic and
multiple-choice sets at 1 and at 4 users, and the accuracy summary.json measured (scored on each worker after the
stream, counted, merged) equals an exact recount from requests.jsonl's answers, rescored offline; each arithmetic
answer scored right holds its expected number. The runs are --max-requests long, so every request ends before the run
does."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest

from engine_tier.conftest import run_against
from llm_locust.metrics.scoring import Reference, score
from llm_locust.results.request_lines import REQUESTS_FILE

pytestmark = pytest.mark.engine

RUNS = [("arithmetic", 1, 12), ("arithmetic", 4, 24), ("choice", 1, 12), ("choice", 4, 24)]
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
NO_OPTION_TEXT = ("",) * 4
"""Four options no answer with a letter or a digit in it equals (once normalised): a line carries
the right letter, not the options, so a multiple-choice answer is rescored by its letter alone (SmolLM2 answers with
a letter, e.g. "A. 89 The answer is D.")."""


@pytest.mark.parametrize(("dataset", "users", "requests"), RUNS)
def test_the_measured_accuracy_of_a_real_model_equals_the_recount_of_its_answers(
    engine, llama, tmp_path, dataset, users, requests
):
    run = run_against(
        llama, engine, "chat.py", tmp_path / f"{dataset}-u{users}",
        "-u", str(users), "-r", str(users), "--max-requests", str(requests), "-t", "120s",
        "--max-tokens", "12", "--server-family", "llamacpp", "--seed", "1", "--dataset", f"builtin:{dataset}",
        "--requests-jsonl", "--extra-body", '{"temperature": 0}',
        timeout_s=240,
    )  # fmt: skip
    assert run.done.returncode == 0, run.done.stderr[-3000:]
    lines = [json.loads(line) for line in (run.results / REQUESTS_FILE).read_text().splitlines()]
    ok = [line for line in lines if line["outcome"] == "ok"]
    assert len(ok) == run.summary["throughput"]["requests_ok"] >= requests
    references = [
        Reference(expected=line["reference"]["expected"])
        if dataset == "arithmetic"
        else Reference(choices=NO_OPTION_TEXT, answer=line["reference"]["answer"])
        for line in ok
    ]
    rescored = [score(reference, line["answer"]) for reference, line in zip(references, ok, strict=True)]
    accuracy = run.summary["accuracy"]
    assert (accuracy["scored"], accuracy["correct"]) == (len(ok), int(sum(rescored)))
    assert accuracy["accuracy"] == round(sum(rescored) / len(ok), 6)
    assert [line["score"] for line in ok] == rescored
    for line, right in zip(ok, rescored, strict=True):
        assert line["answer"] and line["correct"] is (right == 1.0)
        if right and dataset == "arithmetic":  # a right answer is its expected number, whatever is around it
            assert [Decimal(n) for n in NUMBER.findall(line["answer"])] == [Decimal(line["reference"]["expected"])]
    console = run.done.stdout + run.done.stderr
    assert f"Accuracy: {100 * accuracy['accuracy']:.1f} % of {accuracy['scored']} scored answers" in console
