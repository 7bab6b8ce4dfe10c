"""The Responses and Messages stream parsers, the request shapes of the new APIs and which option combinations
are refused (pure: no runner, no server)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, options
from harness.kept_text import kept_stream

from llm_locust.apis import BUILT_IN, summary_rates
from llm_locust.apis import messages as messages_api
from llm_locust.apis import responses as responses_api
from llm_locust.config.settings import Settings
from llm_locust.errors import ConfigError
from llm_locust.metrics.protocol import EventStream, finish
from llm_locust.metrics.record import ErrorKind, RequestRecord
from llm_locust.transport.providers import auth_headers, provider_headers
from llm_locust.workload.builder import Workload
from llm_locust.workload.providers import check_api, completion_path


def typed(kind: str, **data: object) -> bytes:
    """One typed SSE event, as OpenAI and Anthropic send them."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def feed(apply, events: list[tuple[bytes, float]]) -> RequestRecord:
    """A record fed `events` (bytes, arrival time s) through an `EventStream` with `apply`, split mid-event."""
    record = RequestRecord(endpoint="x", t_send=0.0)
    stream = EventStream(record, apply)
    for data, t in events:
        half = len(data) // 2
        stream.feed(data[:half], t)
        if stream.feed(data[half:], t):
            break
    return finish(record, 9.0)


RESPONSE = {"id": "resp_1", "status": "in_progress"}
USAGE = {"input_tokens": 11, "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 1}}


def test_responses_reasoning_then_text_then_completed():
    record = feed(responses_api.apply_event, [
        (typed("response.created", response=RESPONSE), 0.05),
        (typed("response.output_item.added", item={"type": "reasoning"}), 0.06),
        (typed("response.reasoning_summary_text.delta", delta=""), 0.07),  # empty: not a token
        (typed("response.reasoning_text.delta", delta="hmm"), 0.1),
        (typed("response.content_part.added", part={"type": "output_text", "text": ""}), 0.15),
        (typed("response.output_text.delta", delta="Hi"), 0.2),
        (typed("response.output_text.delta", delta=" there"), 0.25),
        (typed("response.output_text.done", text="Hi there"), 0.26),
        (typed("response.completed", response={**RESPONSE, "status": "completed", "usage": USAGE}), 0.3),
    ])  # fmt: skip
    assert record.ok and record.saw_done and record.finish_reason == "stop"
    assert record.ttft_s == pytest.approx(0.1) and record.ttfo_s == pytest.approx(0.2)
    assert record.e2e_s == pytest.approx(0.25) and record.events == 3 and list(record.itl_us) == [100_000, 50_000]
    assert (record.output_tokens, record.prompt_tokens, record.reasoning_tokens) == (3, 11, 1)


def test_responses_incomplete_by_length_is_a_success_other_reasons_fail():
    by_length = {**RESPONSE, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
    record = feed(responses_api.apply_event, [
        (typed("response.output_text.delta", delta="a"), 0.1),
        (typed("response.incomplete", response={**by_length, "usage": USAGE}), 0.2),
    ])  # fmt: skip
    assert record.ok and record.finish_reason == "length" and record.output_tokens == 3
    filtered = {**RESPONSE, "status": "incomplete", "incomplete_details": {"reason": "content_filter"}}
    record = feed(responses_api.apply_event, [
        (typed("response.output_text.delta", delta="a"), 0.1),
        (typed("response.incomplete", response=filtered), 0.2),
    ])  # fmt: skip
    assert record.error_kind == ErrorKind.RESPONSE_INCOMPLETE and "content_filter" in record.error_message


def test_responses_failed_and_error_events_are_named_failures():
    failed = {**RESPONSE, "status": "failed", "error": {"code": "server_error", "message": "engine died"}}
    record = feed(responses_api.apply_event, [
        (typed("response.output_text.delta", delta="a"), 0.1),
        (typed("response.failed", response=failed), 0.2),
    ])  # fmt: skip
    assert record.error_kind == ErrorKind.RESPONSE_FAILED and "engine died" in record.error_message
    assert record.t_first == 0.1  # its TTFT is kept apart (ttft_failed)
    record = feed(responses_api.apply_event, [(typed("error", code="rate_limit_exceeded", message="slow down"), 0.1)])
    assert record.error_kind == ErrorKind.STREAM_ERROR and "rate_limit_exceeded" in record.error_message


def test_responses_stream_without_its_last_event_is_incomplete():
    record = feed(responses_api.apply_event, [(typed("response.output_text.delta", delta="a"), 0.1)])
    assert record.error_kind == ErrorKind.INCOMPLETE
    record = feed(responses_api.apply_event, [(b'event: response.output_text.delta\ndata: {"delta\n\n', 0.1)])
    assert record.error_kind == ErrorKind.BAD_STREAM
    record = feed(responses_api.apply_event, [(typed("response.completed", response=[1]), 0.1)])
    assert record.error_kind == ErrorKind.BAD_STREAM  # a field of an unexpected type: never an exception


def test_messages_thinking_text_tool_and_usage():
    start = {"id": "msg_1", "usage": {"input_tokens": 20, "cache_read_input_tokens": 5, "output_tokens": 1}}
    record = feed(messages_api.apply_event, [
        (typed("message_start", message=start), 0.05),
        (typed("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}), 0.06),
        (typed("ping"), 0.07),
        (typed("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "let me"}), 0.1),
        (typed("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "abc"}), 0.12),
        (typed("content_block_stop", index=0), 0.13),
        (typed("content_block_delta", index=1, delta={"type": "text_delta", "text": "Hello"}), 0.2),
        (typed("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": "{\"a\""}), 0.3),
        (typed("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 7}), 0.35),
        (typed("message_stop"), 0.4),
    ])  # fmt: skip
    assert record.ok and record.saw_done and record.finish_reason == "tool_use"
    assert record.ttft_s == pytest.approx(0.1) and record.ttfo_s == pytest.approx(0.2) and record.events == 3
    assert (record.output_tokens, record.prompt_tokens) == (7, 25)


@pytest.mark.parametrize(("error_type", "kind"), [("overloaded_error", ErrorKind.OVERLOADED),
                                                  ("api_error", ErrorKind.STREAM_ERROR)])  # fmt: skip
def test_messages_error_event(error_type, kind):
    record = feed(messages_api.apply_event, [
        (typed("content_block_delta", index=0, delta={"type": "text_delta", "text": "a"}), 0.1),
        (typed("error", error={"type": error_type, "message": "Overloaded"}), 0.2),
    ])  # fmt: skip
    assert record.error_kind == kind and error_type in record.error_message


def test_messages_stream_cut_before_message_stop_is_incomplete():
    record = feed(messages_api.apply_event, [
        (typed("content_block_delta", index=0, delta={"type": "text_delta", "text": "a"}), 0.1),
        (typed("message_delta", delta={"stop_reason": None}, usage={"output_tokens": 1}), 0.2),
    ])  # fmt: skip
    assert record.error_kind == ErrorKind.INCOMPLETE


def settings(*args: str) -> Settings:
    return Settings.from_options(options("--host", "http://127.0.0.1:1", *args))


def workload(s: Settings, endpoint: str) -> Workload:
    """One user's workload for `endpoint` under the settings `s`."""
    return Workload(s.workload, endpoint, server_family=s.endpoint.server_family)


def test_temperature_goes_in_each_api_s_own_field_and_a_dataset_s_or_extra_body_wins(tmp_path):
    s = settings("--max-tokens", "9", "--temperature", "0.3")
    for endpoint in ("chat", "completions", "responses", "messages"):
        assert json.loads(workload(s, endpoint).next_request("m").body)["temperature"] == 0.3, endpoint
    config = {"gemini": "generationConfig", "converse": "inferenceConfig"}
    for endpoint, outer in config.items():
        body = json.loads(workload(s, endpoint).next_request("m").body)
        assert "temperature" not in body and body[outer]["temperature"] == 0.3 and len(body[outer]) == 2, endpoint
    assert "temperature" not in json.loads(workload(s, "embeddings").next_request("m").body)
    assert "temperature" not in json.loads(workload(settings(), "chat").next_request("m").body)  # the server's own
    wins = settings("--temperature", "0.3", "--extra-body", '{"temperature": 1}')
    assert json.loads(workload(wins, "chat").next_request("m").body)["temperature"] == 1
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}], "temperature": 0.9}) + "\n")
    own = settings("--temperature", "0.3", "--dataset", str(dataset))
    assert json.loads(workload(own, "chat").next_request("m").body)["temperature"] == 0.9
    with pytest.raises(ConfigError, match=r"^--temperature must be >= 0, got -1.0$"):
        settings("--temperature", "-1")


def test_request_shapes():
    s = settings("--prompt-tokens", "16", "--max-tokens", "9", "--seed", "1", "--extra-body", '{"temperature": 0}')
    body = json.loads(workload(s, "responses").next_request("m").body)
    assert isinstance(body["input"], str) and body["max_output_tokens"] == 9 and body["stream"] is True
    assert "stream_options" not in body and "max_tokens" not in body and body["temperature"] == 0
    body = json.loads(workload(s, "messages").next_request("m").body)
    assert body["messages"][0]["role"] == "user" and body["max_tokens"] == 9 and "stream_options" not in body
    spec = workload(settings("--embedding-batch", "4", "--prompt-tokens", "16"), "embeddings").next_request("m")
    body = json.loads(spec.body)
    assert spec.inputs == 4 and len(body["input"]) == 4 and "stream" not in body and "max_tokens" not in body
    assert spec.expected_prompt_tokens is not None and spec.expected_prompt_tokens >= 4 * 16


def test_messages_system_field_from_a_dataset(tmp_path):
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "Hi"}]}) + "\n")  # fmt: skip
    body = json.loads(workload(settings("--dataset", str(dataset)), "messages").next_request("m").body)
    assert body["system"] == "Be brief." and body["messages"] == [{"role": "user", "content": "Hi"}]


def test_anthropic_provider_headers_and_path():
    assert auth_headers("anthropic", "k-1") == {"x-api-key": "k-1"}
    assert provider_headers("anthropic") == {"anthropic-version": "2023-06-01"}
    assert completion_path("anthropic", "messages") == "/v1/messages"
    assert completion_path("azure", "embeddings", "dep", "v1") == "/openai/deployments/dep/embeddings?api-version=v1"
    assert settings("--provider", "anthropic").endpoint.api_key_env == "ANTHROPIC_API_KEY"


@pytest.mark.parametrize(("args", "needle"), [
    (("anthropic", "anthropic", "chat", False, "fast"), "it serves the Messages API .* only"),
    (("openai-compatible", "vllm", "messages", True, "fast"), "--ignore-eos"),
    (("azure", "openai", "responses", False, "fast"), "does not serve the Responses API"),
    (("openai-compatible", "vllm", "embeddings", False, "openai-sdk"), "--client openai-sdk"),
])  # fmt: skip
def test_impossible_combinations_are_refused(args, needle):
    with pytest.raises(ConfigError, match=needle):
        check_api(*args)
    check_api("openai-compatible", "vllm", "responses", True, "fast")  # vLLM's fields, as in chat


def test_tokenizer_text_of_typed_events():
    """--tokenizer counts the text of the same events the parsers count as tokens."""
    responses, _record = kept_stream("responses", (
        typed("response.created", response=RESPONSE),
        typed("response.reasoning_text.delta", delta="think "),
        typed("response.output_text.delta", delta="Hi"),
        typed("response.output_text.done", text="Hi"),
    ), answer=False)  # fmt: skip
    messages, _record = kept_stream("messages", (
        typed("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "hmm "}),
        typed("content_block_delta", index=1, delta={"type": "text_delta", "text": "there"}),
        typed("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": "{}"}),
        typed("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "sig"}),
        typed("message_stop"),
    ), answer=False)  # fmt: skip
    assert (responses.text(), messages.text()) == ("think Hi", "hmm there{}")


@pytest.mark.parametrize("endpoint", ["responses", "messages"])
def test_a_scenario_answer_splits_the_text_from_the_reasoning_and_the_tool_input(endpoint):
    """`Api.answer_parts`: the answer's own text and the reasoning, apart; a tool call's input is neither."""
    events = {
        "responses": (
            typed("response.reasoning_text.delta", delta="think "),
            typed("response.output_text.delta", delta="Hi"),
            typed("response.function_call_arguments.delta", delta="{}"),
            typed("response.output_text.delta", delta=" there"),
        ),
        "messages": (
            typed("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "think "}),
            typed("content_block_delta", index=1, delta={"type": "text_delta", "text": "Hi"}),
            typed("content_block_delta", index=2, delta={"type": "input_json_delta", "partial_json": "{}"}),
            typed("content_block_delta", index=1, delta={"type": "text_delta", "text": " there"}),
        ),
    }[endpoint]
    kept, _record = kept_stream(endpoint, events)
    assert kept.text() == "think Hi{} there" and kept.answer() == ("Hi there", "think ")


def test_a_chat_answer_splits_the_text_from_the_reasoning_and_the_tool_calls():
    from llm_locust.metrics.stream_text import openai_parts

    chunks = [
        {"choices": [{"index": 0, "delta": {"reasoning_content": "think "}}]},
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{}"}}]}}
            ]
        },
        {"choices": [{"index": 0, "delta": {"reasoning": "more", "content": " there"}}]},
        {"choices": [], "usage": {"completion_tokens": 5}},
    ]
    pieces = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks] + [b"data: [DONE]\n\n"]
    kept, _record = kept_stream("chat", pieces)
    assert kept.text() == "think Hif{}more there" and kept.answer() == ("Hi there", "think more")
    assert openai_parts({"choices": [{"index": 0, "text": "done"}]}) == ("done", None)  # text completions
    not_asked, _record = kept_stream("chat", pieces, answer=False)
    assert not_asked.text() == "think Hif{}more there" and not_asked.answer() == ("", "")  # nothing kept apart


def test_each_built_in_api_has_its_locustfile_and_its_row_in_the_table_of_apis():
    """An API's module names its user class and its call (`Api.user`, `Api.mount`); docs/apis.md's table gives them
    with its locustfile, `locustfiles/<endpoint>.py`."""
    table = (ROOT / "docs/apis.md").read_text(encoding="utf-8")
    for entry in BUILT_IN:
        assert (ROOT / "locustfiles" / f"{entry.endpoint}.py").is_file(), entry.endpoint
        row = next(line for line in table.splitlines() if line.startswith(f"| `locustfiles/{entry.endpoint}.py` |"))
        assert f"`{entry.mount}(" in row, entry.endpoint
        # a WebSocket API has no built-in User class of the registry's (`Api.turn`): its locustfile's scenario plays it
        assert f"`{entry.user}`" in row if entry.user else entry.turn is not None, entry.endpoint


def test_a_summarys_rates_add_the_media_it_moved_to_its_countings():
    """`summary_rates`: the counting's rates, then audio in / out per second and the real-time factor when the run
    has a value for them (not 0, not null), none twice (text to speech's counting shows its audio s/s already)."""
    text = {"run": {"counts": "output_tokens"}, "throughput": {"input_s_per_s": 0.0, "real_time_factor": None}}
    assert [rate.key for rate in summary_rates(text)] == ["output_tokens_per_s"]
    heard = {"run": {"counts": "output_tokens"}, "throughput": {"input_s_per_s": 2.5, "real_time_factor": 0.2}}
    assert [(rate.key, rate.unit) for rate in summary_rates(heard)] == [
        ("output_tokens_per_s", "output tok/s"),
        ("input_s_per_s", "audio in s/s"),
        ("real_time_factor", "RTF"),
    ]
    spoken = {"run": {"counts": "audio_seconds"}, "throughput": {"output_s_per_s": 3.0, "real_time_factor": 0.5}}
    assert [rate.key for rate in summary_rates(spoken)] == ["output_s_per_s", "real_time_factor"]
    assert summary_rates({}) == summary_rates(text)  # an older document, without run.counts: output tokens
