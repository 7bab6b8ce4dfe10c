"""One `Api` per endpoint, in a registry: a throw-away API registered there (and a User class naming it), with a
counting of its own (passages), is measured end to end by a real Locust runner against a loopback server; the
registry's package imports only what lies below it."""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path
from typing import Any

import gevent
import pytest
from conftest import options, read_summary, run_local
from gevent.pywsgi import WSGIServer
from harness.recording_server import LoopbackServer
from locust import task

from llm_locust.apis import APIS, COUNTINGS, Api, Counting, Rate, api, openai_paths, register
from llm_locust.errors import ConfigError
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.report.build import build_report
from llm_locust.report.run_data import load_run
from llm_locust.report.tables import step_rows
from llm_locust.results.console import summary_table
from llm_locust.runtime.users import ApiUser, LLMUser
from llm_locust.workload.providers import check_api, completion_path

QUERY = "which passage answers the question?"
DELAY_S = 0.03
BATCH = 3
PASSAGES = Counting(
    "passages",
    (Rate("inputs_per_s", "passages/s", "Passages/s"), Rate("input_tokens_per_s", "input tok/s", "Input tokens/s")),
    (("e2e", "Latency"),),
)
"""The throw-away API's own counting: passages per second, shown with their own unit."""


def rank_shape(body: dict[str, Any]) -> None:
    """A ranking request: the query (`Api.query`: one more prompt text), the prompt texts as the passages to rank."""
    body["passages"] = body.pop("texts")


def read_rank(content: bytes, record: RequestRecord, inputs: int) -> None:
    """A ranking response: one result per passage, usage.total_tokens."""
    try:
        data = json.loads(content)
        results, tokens = data["results"], data["usage"]["total_tokens"]
    except (ValueError, KeyError, TypeError):
        record.fail(ErrorKind.BAD_STREAM, "not a ranking response")
        return
    if len(results) != inputs:
        record.fail(ErrorKind.BAD_STREAM, f"{len(results)} results for {inputs} passages")
        return
    record.inputs, record.prompt_tokens = inputs, tokens


RANK = Api("rank", "passage ranking", openai_paths("/v1/rank", databricks=False), rank_shape, max_tokens_field="",
           read_body=read_rank, counting=PASSAGES, inputs_field="passages", query=True,
           mount="rank.passages.create")  # fmt: skip


class RankUser(ApiUser):
    """The throw-away API's user: it only names the endpoint."""

    endpoint = "rank"


class RankScenario(LLMUser):
    """A scenario calling the throw-away API where its entry mounts it on the scenario client."""

    @task
    def rank(self) -> None:
        self.llm.rank.passages.create(query=QUERY, passages=["one passage", "another"], name="ranked")


class RankServer(LoopbackServer):
    """POST /v1/rank on 127.0.0.1: answers after `DELAY_S` with a score per passage and usage.total_tokens (one
    token per word); `requests` lists the bodies it answered."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._server = WSGIServer(("127.0.0.1", 0), self._app, log=None, error_log=None)

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] != "POST" or environ["PATH_INFO"] != "/v1/rank":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found"]
        body = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
        gevent.sleep(DELAY_S)
        passages = body["passages"]
        answer = {
            "results": [{"index": i, "relevance_score": 1.0 / (i + 1)} for i in range(len(passages))],
            "usage": {"total_tokens": sum(len(d.split()) for d in passages)},
        }
        self.requests.append(body)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(answer).encode()]


@pytest.fixture
def rank():
    """The throw-away API, registered for the test only."""
    register(RANK)
    try:
        yield RANK
    finally:
        del APIS["rank"]


def test_a_registered_api_runs_end_to_end(rank, tmp_path):
    """Registered once, the API gets its path, body (a query drawn as its passages are), body reader and counting:
    summary.json counts its requests, passages and tokens exactly as the server answered them, with E2E latencies
    above the server's delay; the console table, Locust's row and the report's steps table show them as passages."""
    assert COUNTINGS["passages"] is PASSAGES
    assert completion_path("openai-compatible", "rank") == "/v1/rank"
    with pytest.raises(ConfigError, match="--provider databricks does not serve passage ranking"):
        check_api("databricks", "openai", "rank", False, "fast")
    with RankServer() as server:
        opts = options("--host", server.url, "--model", "rr-1", "--results-dir", str(tmp_path), "--interval-s", "1",
                       "--prompt-tokens", "12", "--embedding-batch", str(BATCH))  # fmt: skip
        t0 = time.monotonic()
        env = run_local(opts, 2, 2.0, user_classes=[RankUser], stop_timeout_s=5)
        assert time.monotonic() - t0 < 30
        gevent.sleep(0.2)
    summary = read_summary(tmp_path)
    answered = server.requests
    assert len(answered) >= 10  # 2 users for 2 s at ~30 ms a request
    assert all(b["model"] == "rr-1" and len(b["passages"]) == BATCH for b in answered)
    assert all(len(b["query"].split()) >= 6 and b["query"] not in b["passages"] for b in answered)  # a prompt text
    assert all("stream" not in b and "max_tokens" not in b for b in answered)  # not streamed, no output length
    t, m = summary["throughput"], summary["metrics"]
    assert summary["failures"] == {} and t["requests_failed"] == 0
    assert t["requests_ok"] == len(answered)
    assert t["inputs"] == BATCH * len(answered)
    assert t["prompt_tokens"] == sum(len(d.split()) for b in answered for d in b["passages"])
    assert t["output_tokens"] == 0 and m["ttft_ms"]["count"] == 0  # no token streamed: no first token
    assert m["e2e_ms"]["count"] == len(answered) and m["e2e_ms"]["min"] >= DELAY_S * 1000 * 0.9
    assert m["e2e_ms"]["p50"] < 2000
    assert summary["tokens"]["prompt_tokens_checked"] == 0  # the query's tokens counted by the server: none expected
    assert summary["run"]["endpoints"] == ["rank"] and summary["run"]["counts"] == "passages"
    table = summary_table(summary)
    assert "passages/s" in table and "Latency ms" in table and "output tok/s" not in table
    assert "inputs/s" not in table
    row = env.stats.get("/v1/rank", "POST")
    assert row.num_requests == len(answered) and row.num_failures == 0
    steps = step_rows(load_run(tmp_path)).iloc[0]  # the report's steps table: passages/s, no output tok/s
    assert steps["inputs_per_s"] == t["inputs_per_s"] and steps["output_tokens_per_s"] is None
    page = build_report([tmp_path], tmp_path / "report.html", png=False).html_path.read_text()
    assert "passages/s" in page and "inputs/s" not in page


def test_a_registered_api_is_mounted_on_the_scenario_client(rank, tmp_path):
    """A scenario's `self.llm` has the registered API's call at its entry's `mount` (`rank.passages.create`), which
    sends its fields as the body, counts the inputs in its `inputs_field` and reports the request under its `name`."""
    with RankServer() as server:
        opts = options("--host", server.url, "--model", "rr-1", "--results-dir", str(tmp_path), "--interval-s", "1")
        env = run_local(opts, 1, 1.0, user_classes=[RankScenario], stop_timeout_s=5)
        gevent.sleep(0.2)
    answered = server.requests
    expected = {"model": "rr-1", "query": QUERY, "passages": ["one passage", "another"]}
    assert answered and all(b == expected for b in answered)
    row = env.stats.get("ranked", "POST")
    assert row.num_requests == len(answered) and row.num_failures == 0
    assert read_summary(tmp_path)["throughput"]["inputs"] == 2 * len(answered)


def test_the_registry_refuses_a_taken_name_and_names_the_registered_ones():
    with pytest.raises(ValueError, match="already registered as 'chat'"):
        register(Api("chat", "chat", {}, rank_shape, read_body=read_rank))
    with pytest.raises(ValueError, match=r"self.llm.chat.completions.create clashes with 'chat'"):
        register(Api("x", "x", {}, rank_shape, read_body=read_rank, mount="chat.completions.create"))
    with pytest.raises(ValueError, match=r"self.llm.chat clashes with 'chat'"):
        register(Api("x", "x", {}, rank_shape, read_body=read_rank, mount="chat"))
    with pytest.raises(ValueError, match="a User class of 'chat' has its name"):
        register(Api("x", "x", {}, rank_shape, read_body=read_rank, user="ChatAgentUser"))
    with pytest.raises(ValueError, match="another counting is named 'inputs'"):
        register(Api("x", "x", {}, rank_shape, read_body=read_rank, counting=Counting("inputs", (), None)))
    assert "x" not in APIS
    registered = "one of chat, completions, converse, embeddings"
    with pytest.raises(ConfigError, match=f"no API is registered as 'rank': {registered}"):
        api("rank")
    with pytest.raises(ValueError, match="either a stream parser or a body reader"):
        Api("x", "x", {}, rank_shape)


def test_the_registry_imports_only_what_lies_below_it():
    """`apis` sits on `metrics` (its parsers) and is read by workload, transport, results, report and runtime: it
    imports nothing of theirs, nor `config`, at the top, in a function or under TYPE_CHECKING."""
    import llm_locust.apis

    package = Path(llm_locust.apis.__file__).parent
    imported = set()
    for source in package.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    ours = {name for name in imported if name.startswith("llm_locust")}
    assert ours and all(
        name.startswith(("llm_locust.apis", "llm_locust.metrics", "llm_locust.errors")) for name in ours
    ), ours
