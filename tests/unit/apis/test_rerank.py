"""The `rerank` API (`POST /v1/rerank`): its body as the workload builds it (a query and `--embedding-batch`
documents), its response reader on good, short, hostile and fuzzed bodies, the options it refuses, and the
simulator's side — its request checks and its response, read back by the client's reader (pure: no runner, no
server)."""

from __future__ import annotations

import json
import random

import orjson
import pytest
from conftest import options

from llm_locust.apis import COUNTINGS, api
from llm_locust.apis.rerank import DOCUMENTS, read_rerank
from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.sim.apis import parse_request
from llm_locust.sim.apis.rerank import RerankEncoder
from llm_locust.sim.apis.wire import ApiError
from llm_locust.workload.builder import Workload
from llm_locust.workload.providers import check_api, completion_path


def settings(*args: str) -> Settings:
    return Settings.from_options(options("--host", "http://127.0.0.1:1", *args))


def read(body: object, inputs: int = 3) -> RequestRecord:
    """A fresh record after reading `body` (JSON-encoded unless bytes) as the response to `inputs` documents."""
    record = RequestRecord(endpoint="rerank", t_send=0.0)
    read_rerank(body if isinstance(body, bytes) else orjson.dumps(body), record, inputs)
    return record


def results(*indices: int) -> list[dict]:
    return [{"index": i, "relevance_score": 1.0 / (i + 1)} for i in indices]


def test_the_body_holds_a_query_and_the_documents():
    """--embedding-batch documents of --prompt-tokens words, and one more prompt text as the query, drawn before
    them; nothing streamed, no output length; no prompt length expected (a server counts the query per document)."""
    s = settings("--embedding-batch", "4", "--prompt-tokens", "16", "--seed", "3", "--extra-body", '{"top_n": 2}')
    spec = Workload(s.workload, "rerank", server_family=s.endpoint.server_family).next_request("rr")
    body = json.loads(spec.body)
    assert set(body) == {"model", "query", "documents", "top_n"} and body["model"] == "rr" and body["top_n"] == 2
    assert spec.inputs == 4 and len(body["documents"]) == 4 and all(isinstance(d, str) for d in body["documents"])
    assert isinstance(body["query"], str) and body["query"] not in body["documents"]
    assert len(body["query"].split()) >= 8 and spec.expected_prompt_tokens is None


def test_a_response_gives_the_documents_and_the_usage_tokens():
    ok = read({"id": "r-1", "model": "m", "results": results(2, 0, 1), "usage": {"total_tokens": 57}})
    assert ok.ok and ok.inputs == 3 and ok.prompt_tokens == 57
    jina = read({"results": results(0, 1, 2), "usage": {"prompt_tokens": 40, "total_tokens": 41}})
    assert jina.ok and jina.prompt_tokens == 40  # prompt_tokens first
    cohere = read({"id": "c", "results": results(1, 0, 2), "meta": {"billed_units": {"search_units": 1}}})
    assert cohere.ok and cohere.inputs == 3 and cohere.prompt_tokens is None  # no tokens: none counted
    top_n = read({"results": results(2), "usage": {"total_tokens": 9}})
    assert top_n.ok and top_n.inputs == 3  # top_n=1: one result, three documents scored


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"<html>busy</html>", "not a rerank object: <html>busy</html>"),
        ({"data": []}, "not a rerank object"),
        ([1, 2], "not a rerank object"),
        ({"results": []}, "holds 0 scores for 3 documents"),
        ({"results": results(0, 1, 2, 0)}, "holds 4 scores for 3 documents"),
        ({"results": {"index": 0}}, "holds dict scores for 3 documents"),
        ({"results": results(0, 0)}, "a bad score"),
        ({"results": results(0, 3)}, "a bad score"),
        ({"results": [{"index": -1, "relevance_score": 0.5}]}, "a bad score"),
        ({"results": [{"index": 0}]}, "a bad score"),
        ({"results": [{"index": 0, "relevance_score": "high"}]}, "a bad score"),
        ({"results": [{"index": True, "relevance_score": 0.5}]}, "a bad score"),
        ({"results": [{"index": 0, "relevance_score": True}]}, "a bad score"),
        ({"results": ["0"]}, "a bad score"),
        ({"results": results(0), "usage": {"total_tokens": 2**62}}, "not plausible"),
    ],
)
def test_a_body_that_is_not_a_ranking_fails_as_a_bad_stream(body, said):
    record = read(body)
    assert record.error_kind == ErrorKind.BAD_STREAM and said in record.error_message, record.error_message
    assert record.prompt_tokens is None


def test_fuzzed_bodies_never_raise():
    """Random cuts and byte flips of a good body: the reader fills the record or fails it, never raises."""
    rng = random.Random(7)
    good = orjson.dumps({"results": results(1, 0, 2), "usage": {"total_tokens": 12}})
    for _ in range(2000):
        body = bytearray(good[: rng.randrange(len(good) + 1)])
        for _ in range(rng.randrange(3)):
            if body:
                body[rng.randrange(len(body))] = rng.randrange(256)
        record = read(bytes(body))
        assert record.ok or record.error_kind == ErrorKind.BAD_STREAM


def test_its_counting_path_and_refusals():
    """Documents, shown as documents/s; served by an OpenAI-compatible server only; neither the SDK client, tools nor
    a structured output."""
    entry = api("rerank")
    assert entry.counting is DOCUMENTS and COUNTINGS["documents"] is DOCUMENTS and not entry.streams
    assert [rate.unit for rate in DOCUMENTS.rates] == ["documents/s", "input tok/s"]
    assert entry.mount == "rerank.create" and entry.user == "RerankUser" and entry.inputs_field == "documents"
    assert completion_path("openai-compatible", "rerank") == "/v1/rerank"
    with pytest.raises(ConfigError, match="--provider openai does not serve rerank"):
        check_api("openai", "openai", "rerank", False, "fast")
    with pytest.raises(ConfigError, match="--client openai-sdk measures chat and text completions only, not rerank"):
        check_api("openai-compatible", "vllm", "rerank", False, "openai-sdk")
    with pytest.raises(ConfigError, match="rerank takes no tools"):
        check_api("openai-compatible", "vllm", "rerank", False, "fast", tools=True)
    with pytest.raises(ConfigError, match="rerank takes no structured output"):
        check_api("openai-compatible", "vllm", "rerank", False, "fast", response_format="json_object")
    with pytest.raises(ConfigError, match="--ignore-eos: rerank has no request field that forces the output length"):
        check_api("openai-compatible", "vllm", "rerank", True, "fast")


def sim_spec(body: dict):
    """The simulator's spec of a rerank request `body` (model "sim")."""
    return parse_request(orjson.dumps(body), "rerank", ("sim",), 16)[0]


def test_the_simulator_checks_the_request_and_counts_each_pair():
    spec = sim_spec({"query": "a b c", "documents": ["one two", {"text": "x"}, ""]})
    assert spec.inputs == 3 and spec.prompt_tokens == (3 + 2) + (3 + 1) + 3 and spec.max_tokens is None
    assert not spec.stream and spec.output_tokens == 1
    assert sim_spec({"query": "q", "documents": ["d"] * 5, "top_n": 2}).max_tokens == 2
    for bad, said in [
        ({"documents": ["d"]}, "'query'"),
        ({"query": "", "documents": ["d"]}, "'query'"),
        ({"query": "q", "documents": []}, "'documents'"),
        ({"query": "q", "documents": "d"}, "'documents'"),
        ({"query": "q", "documents": [{"txt": "d"}]}, "'documents'"),
        ({"query": "q", "documents": ["d"], "top_n": 0}, "'top_n'"),
        ({"query": "q", "documents": ["d"], "top_n": "2"}, "'top_n'"),
    ]:
        with pytest.raises(ApiError, match=said) as raised:
            sim_spec(bad)
        assert raised.value.status == 400


@pytest.mark.parametrize(("top_n", "answered"), [(None, 4), (2, 2), (9, 4)])
def test_the_simulator_s_answer_is_read_back_by_the_client(top_n, answered):
    body = {"query": "q r", "documents": ["a b", "c", "d e f", "g"], **({"top_n": top_n} if top_n else {})}
    spec = sim_spec(body)
    content = RerankEncoder(spec, "rerank-7", 1700000000, "sim", 0).body()
    data = orjson.loads(content)
    assert data["id"] == "rerank-7" and data["model"] == "sim" and len(data["results"]) == answered
    scores = [r["relevance_score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)
    record = read(content, inputs=4)
    assert record.ok and record.inputs == 4 and record.prompt_tokens == spec.prompt_tokens == 4 + 3 + 5 + 3
