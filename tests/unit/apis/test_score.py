"""vLLM's `score` API (`POST /v1/score`): its body as the workload builds it (a query as `text_1`, `--embedding-batch`
documents as `text_2`), its response reader on good, short, hostile and fuzzed bodies, the options it refuses, and the
simulator's side — its request checks (1:N and N:N pairs) and its response, read back by the client's reader (pure:
no runner, no server)."""

from __future__ import annotations

import json
import random

import orjson
import pytest
from conftest import options

from llm_locust.apis import api
from llm_locust.apis.rerank import DOCUMENTS
from llm_locust.apis.score import read_score
from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.sim.apis import parse_request
from llm_locust.sim.apis.score import ScoreEncoder
from llm_locust.sim.apis.wire import ApiError
from llm_locust.workload.builder import Workload
from llm_locust.workload.providers import check_api, completion_path


def read(body: object, inputs: int = 3) -> RequestRecord:
    """A fresh record after reading `body` (JSON-encoded unless bytes) as the response to `inputs` documents."""
    record = RequestRecord(endpoint="score", t_send=0.0)
    read_score(body if isinstance(body, bytes) else orjson.dumps(body), record, inputs)
    return record


def scores(*indices: int) -> list[dict]:
    return [{"index": i, "object": "score", "score": 1.0 / (i + 1)} for i in indices]


def test_the_body_holds_the_query_and_the_documents():
    s = Settings.from_options(options("--host", "http://127.0.0.1:1", "--embedding-batch", "3", "--prompt-tokens",
                                      "12", "--seed", "2"))  # fmt: skip
    spec = Workload(s.workload, "score", server_family=s.endpoint.server_family).next_request("sc")
    body = json.loads(spec.body)
    assert set(body) == {"model", "text_1", "text_2"} and body["model"] == "sc"
    assert isinstance(body["text_1"], str) and len(body["text_1"].split()) >= 6 and body["text_1"] not in body["text_2"]
    assert spec.inputs == 3 and len(body["text_2"]) == 3 and spec.expected_prompt_tokens is None


def test_a_response_gives_the_documents_and_the_usage_tokens():
    ok = read({"id": "score-1", "object": "list", "data": scores(0, 1, 2),
               "usage": {"prompt_tokens": 33, "total_tokens": 33, "completion_tokens": 0}})  # fmt: skip
    assert ok.ok and ok.inputs == 3 and ok.prompt_tokens == 33
    assert read({"data": scores(2, 1, 0)}).prompt_tokens is None  # no usage: no tokens counted


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"Internal Server Error", "not a score object: Internal Server Error"),
        ({"results": scores(0, 1, 2)}, "not a score object"),
        ({"data": scores(0, 1)}, "holds 2 scores for 3 documents"),
        ({"data": scores(0, 1, 2, 3)}, "holds 4 scores for 3 documents"),
        ({"data": "0.5"}, "holds str scores for 3 documents"),
        ({"data": scores(0, 1, 1)}, "a bad score"),
        ({"data": [*scores(0, 1), {"index": 2, "score": None}]}, "a bad score"),
        ({"data": scores(0, 1, 2), "usage": {"prompt_tokens": -1}}, "not plausible"),
    ],
)
def test_a_body_that_is_not_a_score_list_fails_as_a_bad_stream(body, said):
    record = read(body)
    assert record.error_kind == ErrorKind.BAD_STREAM and said in record.error_message, record.error_message


def test_fuzzed_bodies_never_raise():
    rng = random.Random(11)
    good = orjson.dumps({"data": scores(0, 1, 2), "usage": {"prompt_tokens": 9}})
    for _ in range(2000):
        body = bytearray(good[: rng.randrange(len(good) + 1)])
        for _ in range(rng.randrange(3)):
            if body:
                body[rng.randrange(len(body))] = rng.randrange(256)
        record = read(bytes(body))
        assert record.ok or record.error_kind == ErrorKind.BAD_STREAM


def test_its_counting_path_and_refusals():
    entry = api("score")
    assert entry.counting is DOCUMENTS and not entry.streams and entry.inputs_field == "text_2"
    assert entry.mount == "score.create" and entry.user == "ScoreUser"
    assert completion_path("openai-compatible", "score") == "/v1/score"
    with pytest.raises(ConfigError, match="--provider azure does not serve score"):
        check_api("azure", "openai", "score", False, "fast")
    with pytest.raises(ConfigError, match="score takes no tools"):
        check_api("openai-compatible", "vllm", "score", False, "fast", tools=True)


def sim_spec(body: dict):
    return parse_request(orjson.dumps(body), "score", ("sim",), 16)[0]


def test_the_simulator_pairs_the_texts_and_counts_each_pair():
    one_to_many = sim_spec({"text_1": "a b", "text_2": ["c", "d e", "f"]})
    assert one_to_many.inputs == 3 and one_to_many.prompt_tokens == 3 + 4 + 3 and not one_to_many.stream
    assert sim_spec({"text_1": ["a b"], "text_2": "c"}).prompt_tokens == 3
    pairs = sim_spec({"text_1": ["a", "b c"], "text_2": ["d", "e"]})
    assert pairs.inputs == 2 and pairs.prompt_tokens == 2 + 3
    for bad, said in [
        ({"text_2": ["d"]}, "'text_1'"),
        ({"text_1": "q", "text_2": []}, "'text_2'"),
        ({"text_1": "q", "text_2": [""]}, "'text_2'"),
        ({"text_1": "q", "text_2": [1]}, "'text_2'"),
        ({"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}, "'text_1' holds 2 texts, 'text_2' 3"),
    ]:
        with pytest.raises(ApiError, match=said) as raised:
            sim_spec(bad)
        assert raised.value.status == 400


def test_the_simulator_s_answer_is_read_back_by_the_client():
    spec = sim_spec({"text_1": "q r", "text_2": ["a b", "c", "d e f", "g"]})
    content = ScoreEncoder(spec, "score-3", 1700000000, "sim", 0).body()
    data = orjson.loads(content)
    assert data["id"] == "score-3" and data["object"] == "list" and [d["index"] for d in data["data"]] == [0, 1, 2, 3]
    assert data["usage"] == {"prompt_tokens": 4 + 3 + 5 + 3, "total_tokens": 15, "completion_tokens": 0}
    record = read(content, inputs=4)
    assert record.ok and record.inputs == 4 and record.prompt_tokens == 15
