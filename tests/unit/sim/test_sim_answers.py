"""The simulator's answers: the truth of the built-in sets' questions computed from their text (the contract with
`workload/builtin_sets.py`), right at `--accuracy` and degraded above a batch size, JSON valid for a schema and
invalid at `--invalid-json-rate` — pure, then over loopback against /sim/trace and /metrics."""

from __future__ import annotations

import http.client
import json
import random
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema
import pytest

from llm_locust.apis.chat import response_format as chat_format
from llm_locust.apis.completions import response_format as completions_format
from llm_locust.apis.responses import response_format as responses_format
from llm_locust.metrics.scoring import score
from llm_locust.sim import SimProcess, run_sim
from llm_locust.sim.answers import Answerer, broken, instance, truth
from llm_locust.sim.apis import BY_NAME, encoder_of, parse_request
from llm_locust.sim.apis.wire import ApiError
from llm_locust.workload.builtin_sets import builtin_items

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer", "minimum": 3, "maximum": 9},
        "ratio": {"type": "number", "minimum": 0.5, "maximum": 0.75},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
        "level": {"enum": ["low", "high"]},
        "fixed": {"const": 7},
        "maybe": {"type": ["null", "integer"]},
        "inner": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
    },
    "required": ["name", "count", "ratio", "ok", "tags", "level", "fixed", "maybe", "inner"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("name", ["arithmetic", "choice"])
def test_the_simulator_computes_the_truth_of_every_builtin_question(name):
    """The contract between the built-in sets and the simulator (which imports nothing of workload/)."""
    for prompt, reference in builtin_items(f"builtin:{name}:3000", 11):
        found = truth(prompt)
        assert found is not None, prompt
        right, wrong = found
        assert right == (reference.expected or reference.answer) and right not in wrong and wrong
        assert score(reference, right) == 1.0 and all(score(reference, w) == 0.0 for w in wrong)
        assert truth(f"Some history. {prompt}") == found  # the prompt's last question


def test_the_last_question_of_a_prompt_is_the_one_answered_and_others_are_not_recognised():
    assert truth("What is 2 + 2? Answer with the number only. What is 3 * 4? Answer with the number only.")[0] == "12"  # type: ignore[index]
    assert truth("What is 6 x 7?") is None and truth("Say some words.") is None
    assert truth("Which number equals 2 + 2?\nA. 1\nB. 3\nC. 5\nD. 6\nAnswer with the letter only.") is None


def test_a_json_instance_is_valid_for_its_schema_and_broken_ones_are_not_json():
    draw = random.Random(1)
    schemas = [SCHEMA, *(reference.schema for _, reference in builtin_items("builtin:json:30", 4))]
    for schema in schemas:
        for _ in range(20):
            text = json.dumps(instance(schema, draw))
            jsonschema.validate(json.loads(text), schema)
            with pytest.raises(json.JSONDecodeError):
                json.loads(broken(text))
    for value in (12, True, "text", [1], None):
        with pytest.raises(json.JSONDecodeError):
            json.loads(broken(json.dumps(value)))


def chat_spec(content: str, answerer: Answerer, **fields: Any):
    body = {"messages": [{"role": "user", "content": content}], "stream": True, **fields}
    spec, data = parse_request(json.dumps(body).encode(), "chat", ("m",), 128)
    return answerer.plan(spec, data, BY_NAME["chat"].output_format)


def test_right_answers_follow_the_seeded_draws_and_degrade_above_the_batch_size():
    answerer = Answerer(0.7, 4, 0.2, 0.0, seed=9)
    draws = random.Random("9/accuracy")
    question = "What is 37 + 58? Answer with the number only."
    for batch in [1, 4, 5, 64] * 50:
        spec = chat_spec(question, answerer, max_tokens=40)
        assert (spec.output_tokens, spec.finish_reason, spec.answer.kind) == (1, "stop", None)
        spec.answer.settle(batch)
        right = draws.random() < (0.2 if batch > 4 else 0.7)
        assert spec.answer.kind == ("correct" if right else "wrong") and spec.answer.batch == batch
        assert (spec.answer.text == "95") is right
        encoder = encoder_of(spec)(spec, "chatcmpl-1", 0, "m", 0)
        assert json.loads(encoder.token_event(0)[1][6:])["choices"][0]["delta"]["content"] == spec.answer.text


def test_an_answer_keeps_the_length_rules_cut_by_its_maximum_and_padded_when_forced():
    answerer = Answerer(1.0, 0, 1.0, 0.0, seed=0)
    forced = chat_spec("What is 2 * 3? Answer with the number only.", answerer, max_tokens=4, ignore_eos=True)
    forced.answer.settle(1)
    assert (forced.output_tokens, forced.finish_reason, forced.answer.pieces) == (4, "length", ("6", " ", " ", " "))
    raised = chat_spec("What is 2 * 3? Answer with the number only.", answerer, min_tokens=2)
    assert raised.output_tokens == 2 and raised.finish_reason == "stop"
    schema = {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}}
    cut = chat_spec("anything", answerer, max_tokens=3, **schema)
    assert (cut.output_tokens, cut.finish_reason, cut.answer.kind) == (3, "length", "invalid_json")
    whole = chat_spec("anything", answerer, max_tokens=500, **schema)
    assert whole.finish_reason == "stop" and whole.answer.kind == "valid_json"
    jsonschema.validate(json.loads(whole.answer.text), SCHEMA)


def test_invalid_json_follows_the_seeded_draws():
    answerer = Answerer(1.0, 0, 1.0, 0.25, seed=3)
    draws = random.Random("3/invalid-json")
    form = {"response_format": {"type": "json_object"}}
    for _ in range(200):
        spec = chat_spec("anything", answerer, **form)
        invalid = draws.random() < 0.25
        assert spec.answer.kind == ("invalid_json" if invalid else "valid_json")
        if not invalid:
            assert isinstance(json.loads(spec.answer.text)["answer"], str)


@pytest.mark.parametrize(
    ("endpoint", "fields"),
    [
        ("chat", chat_format), ("responses", responses_format),
        ("completions", lambda kind, schema, _: completions_format(kind, schema, "vllm")),
        ("completions", lambda kind, schema, _: completions_format(kind, schema, "sglang")),
        ("completions", lambda kind, schema, _: completions_format(kind, schema, "llamacpp")),
        ("chat", lambda kind, schema, _: chat_format(kind, schema, "tgi")),
    ],
)  # fmt: skip
def test_the_simulator_reads_each_apis_structured_output_field_as_the_client_sends_it(endpoint, fields):
    requested_format = BY_NAME[endpoint].output_format
    assert requested_format(fields("json_schema", SCHEMA, "vllm")) == ("json_schema", SCHEMA)
    kind = requested_format(fields("json_object", {}, "vllm"))
    assert kind in (("json_object", None), ("json_schema", {"type": "object"}))
    assert requested_format({}) is None


def test_a_schema_the_simulator_cannot_answer_is_a_400_naming_it():
    answerer = Answerer(1.0, 0, 1.0, 0.0, seed=0)
    for fields in (
        {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer", "minimum": "x"}}}},
        {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "integer", "minimum": 9,
                                                                               "maximum": 1}}}},
    ):  # fmt: skip
        with pytest.raises(ApiError) as e:
            chat_spec("anything", answerer, **fields)
        assert e.value.status == 400 and "the structured output's schema is not one the simulator can answer" in str(
            e.value
        )
    body = {"prompt": "x", "json_schema": "{not json"}
    spec, data = parse_request(json.dumps(body).encode(), "completions", ("m",), 8)
    with pytest.raises(ApiError):
        answerer.plan(spec, data, BY_NAME["completions"].output_format)


# -- over loopback --------------------------------------------------------------------------------------------------


def post(sim: SimProcess, path: str, body: dict[str, Any]) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=30)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        return response.read()
    finally:
        conn.close()


def streamed_text(payload: bytes) -> tuple[str, str]:
    """(response id, the text of a chat or Responses stream's deltas)."""
    events = [json.loads(line[6:]) for line in payload.decode().split("\n") if line.startswith("data: {")]
    first = events[0]
    if "response" in first:
        deltas = (e["delta"] for e in events if e["type"] == "response.output_text.delta")
        return first["response"]["id"], "".join(deltas)
    return first["id"], "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])


def answers_metric(sim: SimProcess) -> dict[str, int]:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return {m[0]: int(m[1]) for m in re.findall(r'llm_locust_sim:answers_total\{[^}]*kind="(\w+)"\} (\d+)', text)}


def test_over_loopback_the_streams_carry_the_traces_answers_and_metrics_count_them():
    items = builtin_items("builtin:arithmetic:60", 5)
    with run_sim("--ttft-ms", "2", "--itl-ms", "1", "--accuracy", "0.5", "--invalid-json-rate", "0.3",
                 "--answer-seed", "4") as sim:  # fmt: skip
        texts = {}
        for prompt, reference in items:
            body = {"messages": [{"role": "user", "content": prompt}], "stream": True, "max_tokens": 64}
            rid, text = streamed_text(post(sim, "/v1/chat/completions", body))
            texts[rid] = (text, reference)
        json_body = {"input": "Describe a ship.", "stream": True, "text": {"format": {"type": "json_schema",
                     "name": "answer", "schema": SCHEMA}}}  # fmt: skip
        for _ in range(60):
            rid, text = streamed_text(post(sim, "/v1/responses", json_body))
            texts[rid] = (text, None)
        trace = sim.trace()
        counted = answers_metric(sim)
    kinds = {"correct": 0, "wrong": 0, "valid_json": 0, "invalid_json": 0}
    for record in trace:
        text, reference = texts[record["id"]]
        answer = record["answer"]
        assert answer["text"] == text
        kinds[answer["kind"]] += 1
        if reference is not None:
            assert score(reference, text) == (answer["kind"] == "correct")
        else:
            try:
                jsonschema.validate(json.loads(text), SCHEMA)
                valid = True
            except (json.JSONDecodeError, jsonschema.ValidationError):
                valid = False
            assert valid is (answer["kind"] == "valid_json")
    draws = random.Random("4/invalid-json")
    assert kinds["invalid_json"] == sum(draws.random() < 0.3 for _ in range(60))
    assert counted == kinds and kinds["correct"] + kinds["wrong"] == 60 and 0 < kinds["wrong"] < 60


def test_with_batching_the_answers_degrade_above_the_batch_size():
    prompt, reference = builtin_items("builtin:arithmetic:1", 1)[0]
    body = {"messages": [{"role": "user", "content": prompt}], "stream": True, "max_tokens": 4}
    with run_sim("--timing", "batching", "--max-batch", "16", "--decode-step-ms", "20", "--degrade-above-batch", "3",
                 "--degraded-accuracy", "0", "--accuracy", "1") as sim:  # fmt: skip
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: post(sim, "/v1/chat/completions", body), range(32)))
        trace = sim.trace()
    batches = [record["answer"]["batch"] for record in trace]
    assert len(trace) == 32 and max(batches) > 3 and min(batches) <= 3
    for record in trace:
        answer = record["answer"]
        assert answer["kind"] == ("wrong" if answer["batch"] > 3 else "correct"), answer
        assert (answer["text"] == reference.expected) is (answer["kind"] == "correct")
