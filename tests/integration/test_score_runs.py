"""vLLM's score API (`POST /v1/score`) measured against the simulator: through the `locust` CLI — master + 2 worker
processes — over plain HTTP and HTTPS, its counts equal the simulator's trace (requests, documents, prompt tokens) and
its latency agrees with the simulator's own times (`harness.document_runs`, as rerank's); faults counted exactly; a
scenario's `self.llm.score.create` with `name=`, `catch_response` and `score=`."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import ROOT, options, read_summary, run_local
from harness.document_runs import assert_agrees_with_the_trace, run_through_workers
from locust import task

from llm_locust.runtime.users import LLMUser, ScoreUser
from llm_locust.sim import run_sim

LOCUSTFILE = ROOT / "locustfiles" / "score.py"


@pytest.mark.alone  # latency within 1 ms of the trace
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_score_through_master_and_two_workers(tmp_path, pki, scheme):
    """locustfiles/score.py from a master and 2 worker processes, over HTTP and over HTTPS."""
    assert_agrees_with_the_trace(tmp_path, run_through_workers(LOCUSTFILE, tmp_path, pki, scheme), "score")


class ScoreAgain(ScoreUser):
    """The score user as locustfiles/score.py defines it."""


def test_faults_counted_exactly(tmp_path):
    """The simulator answers some requests with HTTP 429 and 500: the client counts each kind as injected."""
    with run_sim("--ttft-ms", "5", "--fault", "http_429=0.2", "--fault", "http_500=0.1", "--fault-seed", "6") as sim:
        opts = options("--host", sim.url, "--results-dir", str(tmp_path), "--interval-s", "1", "--embedding-batch",
                       "3", "--prompt-tokens", "8")  # fmt: skip
        run_local(opts, 4, 2.0, user_classes=[ScoreAgain], stop_timeout_s=10)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    injected = Counter(r["fault"] for r in trace if r["fault"])
    assert injected["http_429"] >= 5 and injected["http_500"] >= 2, injected
    assert summary["failures"] == {"http_429": injected["http_429"], "http_5xx": injected["http_500"]}
    ok = summary["throughput"]["requests_ok"]
    assert ok == len(trace) - sum(injected.values()) and summary["throughput"]["inputs"] == 3 * ok
    assert summary["throughput"]["prompt_tokens"] == sum(r["prompt_tokens"] for r in trace if not r["fault"])


class ScoreScenario(LLMUser):
    """A scenario scoring a question against two answers: judged (`catch_response`) and scored (`score=`: the usage
    counted the question with each answer)."""

    @task
    def score(self) -> None:
        pairs = 2 * 6 + 2 + 3  # the question's 6 words with each answer's
        with self.llm.score.create(text_1="what is the capital of France", text_2=["Paris is", "Lyon is not"],
                                   name="score-pairs", catch_response=True,
                                   score=lambda answer: answer.usage.prompt_tokens == pairs) as answer:  # fmt: skip
            if not answer.ok:
                answer.failure("not scored")
        with self.llm.score.create(text_1="q", text_2="d", name="score-one", catch_response=True) as judged:
            judged.failure("judged")


def test_a_scenario_calls_score(tmp_path):
    """`self.llm.score.create` sends the call's fields and counts its `text_2` documents under its `name=`."""
    with run_sim("--ttft-ms", "5") as sim:
        opts = options("--host", sim.url, "--results-dir", str(tmp_path), "--interval-s", "1")
        env = run_local(opts, 1, 1.5, user_classes=[ScoreScenario], stop_timeout_s=10)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    pairs, one = env.stats.get("score-pairs", "POST"), env.stats.get("score-one", "POST")
    assert pairs.num_requests >= 3 and pairs.num_failures == 0 and one.num_failures == one.num_requests >= 3
    assert len(trace) == pairs.num_requests + one.num_requests
    assert summary["throughput"]["inputs"] == 2 * pairs.num_requests  # a string text_2: one document, failed here
    assert summary["failures"] == {"check": one.num_requests}
    assert summary["accuracy"]["scored"] == pairs.num_requests and summary["accuracy"]["accuracy"] == 1.0
