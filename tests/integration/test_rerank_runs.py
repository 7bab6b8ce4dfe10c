"""Rerank (`POST /v1/rerank`) measured against the simulator: through the `locust` CLI — master + 2 worker processes —
over plain HTTP and HTTPS, its counts equal the simulator's trace (requests, documents, prompt tokens) and each
request's latency agrees with the simulator's own times; faults counted exactly; a scenario's
`self.llm.rerank.create` with `name=`, `catch_response` and `score=`."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import ROOT, options, read_summary, run_local
from harness.document_runs import assert_agrees_with_the_trace, run_through_workers
from locust import task

from llm_locust.runtime.users import LLMUser, RerankUser
from llm_locust.sim import run_sim

LOCUSTFILE = ROOT / "locustfiles" / "rerank.py"


@pytest.mark.alone  # latency within 1 ms of the trace
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_rerank_through_master_and_two_workers(tmp_path, pki, scheme):
    """locustfiles/rerank.py from a master and 2 worker processes, over HTTP and over HTTPS."""
    assert_agrees_with_the_trace(tmp_path, run_through_workers(LOCUSTFILE, tmp_path, pki, scheme), "rerank")


class RerankAgain(RerankUser):
    """The rerank user as locustfiles/rerank.py defines it."""


def test_faults_counted_exactly(tmp_path):
    """The simulator answers some requests with HTTP 429 and 500: the client counts each kind as injected."""
    with run_sim("--ttft-ms", "5", "--fault", "http_429=0.2", "--fault", "http_500=0.1", "--fault-seed", "4") as sim:
        opts = options("--host", sim.url, "--results-dir", str(tmp_path), "--interval-s", "1", "--embedding-batch",
                       "2", "--prompt-tokens", "8")  # fmt: skip
        run_local(opts, 4, 2.0, user_classes=[RerankAgain], stop_timeout_s=10)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    injected = Counter(r["fault"] for r in trace if r["fault"])
    assert injected["http_429"] >= 5 and injected["http_500"] >= 2, injected
    assert summary["failures"] == {"http_429": injected["http_429"], "http_5xx": injected["http_500"]}
    assert summary["throughput"]["requests_ok"] == len(trace) - sum(injected.values())
    assert summary["throughput"]["inputs"] == 2 * summary["throughput"]["requests_ok"]


class RerankScenario(LLMUser):
    """A scenario ranking three documents: judged (`catch_response`: the first document must be ranked) and scored
    (`score=`: the usage counted the query with each document)."""

    @task
    def rank(self) -> None:
        documents = ["the refund takes five days", "shipping is free", "returns need a receipt"]
        pairs = 3 * 6 + 5 + 3 + 4  # the query's 6 words with each document's
        with self.llm.rerank.create(query="how long does a refund take", documents=documents, top_n=2,
                                    name="rank-faq", catch_response=True,
                                    score=lambda answer: answer.usage.prompt_tokens == pairs) as answer:  # fmt: skip
            if answer.e2e_s is None or answer.e2e_s > 5:
                answer.failure("no latency")
        with self.llm.rerank.create(query="q", documents=["d"], name="rank-fail", catch_response=True) as judged:
            judged.failure("judged")


def test_a_scenario_calls_rerank(tmp_path):
    """`self.llm.rerank.create` sends the call's fields, counts its documents under its `name=`; `catch_response`
    judges it, `score=` scores it."""
    with run_sim("--ttft-ms", "5") as sim:
        opts = options("--host", sim.url, "--results-dir", str(tmp_path), "--interval-s", "1")
        env = run_local(opts, 1, 1.5, user_classes=[RerankScenario], stop_timeout_s=10)
        trace = sim.trace()
    summary = read_summary(tmp_path)
    t = summary["throughput"]
    ranked = env.stats.get("rank-faq", "POST")
    failed = env.stats.get("rank-fail", "POST")
    assert ranked.num_requests >= 3 and ranked.num_failures == 0 and failed.num_failures == failed.num_requests >= 3
    assert len(trace) == ranked.num_requests + failed.num_requests
    assert t["requests_ok"] == ranked.num_requests and t["inputs"] == 3 * ranked.num_requests
    assert summary["failures"] == {"check": failed.num_requests}
    assert summary["accuracy"]["scored"] == ranked.num_requests and summary["accuracy"]["accuracy"] == 1.0
    by_name = {row["label"]: row for row in summary["breakdowns"]["name"]}
    assert by_name["rank-faq"]["requests_ok"] == ranked.num_requests
