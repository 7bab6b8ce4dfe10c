"""Gemini's streamGenerateContent events (`apis.gemini`): tokens, thoughts, function calls, usage, the
stream's end without `[DONE]`, failures — fed as SSE bytes split at every byte, and never raising."""

from __future__ import annotations

import json

import orjson
import pytest
from harness.kept_text import kept_stream
from hypothesis import given
from hypothesis import strategies as st

from llm_locust.apis import gemini as gemini_api
from llm_locust.metrics.protocol import EventStream, finish
from llm_locust.metrics.record import ErrorKind, RequestRecord, TokenSource


def event(parts=None, finish_reason=None, usage=None, response_id="r-1", **extra) -> bytes:
    """One Gemini SSE event (CRLF-framed, as Google sends it) of a GenerateContentResponse."""
    response: dict = {"responseId": response_id, "modelVersion": "gemini-2.5-flash", **extra}
    if parts is not None or finish_reason:
        candidate: dict = {"content": {"parts": parts or [], "role": "model"}, "index": 0}
        if finish_reason:
            candidate["finishReason"] = finish_reason
        response["candidates"] = [candidate]
    if usage is not None:
        response["usageMetadata"] = usage
    return b"data: " + orjson.dumps(response) + b"\r\n\r\n"


def run(events: list[tuple[bytes, float]], split: int | None = None) -> RequestRecord:
    """A record fed `events` (bytes, arrival s) through an `EventStream`, each split at byte `split` (None: whole),
    then the body's end at 9 s."""
    record = RequestRecord(endpoint="gemini", t_send=0.0)
    stream = EventStream(record, gemini_api.apply_event)
    for data, t in events:
        pieces = [data] if split is None else [data[:split], data[split:]]
        if any([stream.feed(piece, t) for piece in pieces if piece]):
            break
    stream.flush(9.0)
    return finish(record, 9.0)


USAGE = {"promptTokenCount": 12, "candidatesTokenCount": 3, "thoughtsTokenCount": 4, "totalTokenCount": 19}
THINKING = [
    (event([{"text": "Let me think", "thought": True}], usage={"promptTokenCount": 12}), 0.1),
    (event([{"text": "Hello"}]), 0.2),
    (event([{"text": " there"}]), 0.25),
    (event([{"text": "!"}], finish_reason="STOP", usage=USAGE), 0.4),
]


@pytest.mark.parametrize("split", [None, 1, 7, 40, -3, -1])
def test_thought_parts_count_for_ttft_not_ttfo_and_usage_adds_thoughts(split):
    """Split anywhere (mid `data:`, mid JSON, between CR and LF), the same record: the thought part is the first
    token (TTFT), the first text part TTFO; output tokens = candidates + thoughts, reasoning = thoughts."""
    record = run(THINKING, split)
    assert record.ok and record.finish_reason == "STOP" and not record.saw_done
    assert record.ttft_s == pytest.approx(0.1) and record.ttfo_s == pytest.approx(0.2)
    assert record.events == 4 and list(record.itl_us) == [100_000, 50_000, 150_000]
    assert record.e2e_s == pytest.approx(0.4) and record.t_done == 9.0
    assert (record.output_tokens, record.prompt_tokens, record.reasoning_tokens) == (7, 12, 4)
    assert record.token_source is TokenSource.USAGE and record.server_request_id == "r-1"


def test_a_last_event_without_its_blank_line_is_read_at_the_end_of_the_body():
    record = run([(event([{"text": "Hi"}]), 0.1), (event([{"text": ""}], "MAX_TOKENS", USAGE)[:-4], 0.2)])
    assert record.ok and record.finish_reason == "MAX_TOKENS" and record.events == 1


def test_empty_parts_and_usage_only_events_are_not_tokens():
    record = run([
        (event([{"text": ""}]), 0.05),
        (event([{"text": "a"}]), 0.1),
        (event(usage={"promptTokenCount": 5}), 0.15),
        (event([{"text": "b"}, {"text": "c"}]), 0.2),  # several parts in one event: one token event
        (event([{"text": ""}], finish_reason="STOP", usage={"promptTokenCount": 5, "candidatesTokenCount": 3}), 0.3),
    ])  # fmt: skip
    assert record.ok and record.events == 2 and record.t_last == 0.2 and record.output_tokens == 3
    assert record.reasoning_tokens is None and record.prompt_tokens == 5


def test_a_stream_cut_before_its_finish_reason_is_incomplete():
    record = run([(event([{"text": "a"}]), 0.1), (event([{"text": "b"}]), 0.2)])
    assert record.error_kind is ErrorKind.INCOMPLETE


def test_function_call_parts_are_tool_calls_and_output():
    call = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}, "id": "fc-1"}}
    record = run([
        (event([{"text": "Checking.", "thought": True}]), 0.1),
        (event([call, {"functionCall": {"name": "now", "args": {}}}], finish_reason="STOP"), 0.3),
    ])  # fmt: skip
    assert record.ok and record.ttfo_s == pytest.approx(0.3) and record.t_tool_call == 0.3 and record.events == 2
    assert [(c.id, c.name, orjson.loads(c.arguments)) for c in record.tool_calls] == [
        ("fc-1", "get_weather", {"city": "Paris"}), ("", "now", {})]  # fmt: skip


@pytest.mark.parametrize(
    ("error", "kind"),
    [({"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}, ErrorKind.OVERLOADED),
     ({"code": 500, "message": "Internal error", "status": "INTERNAL"}, ErrorKind.STREAM_ERROR)],
)  # fmt: skip
def test_an_error_object_in_the_stream_fails_the_request(error, kind):
    record = run([(event([{"text": "a"}]), 0.1), (b"data: " + orjson.dumps({"error": error}) + b"\r\n\r\n", 0.2)])
    assert record.error_kind is kind and error["status"] in record.error_message and record.events == 1


def test_a_blocked_prompt_fails_naming_the_reason():
    record = run([(event(promptFeedback={"blockReason": "SAFETY"}, usage={"promptTokenCount": 4}), 0.1)])
    assert record.error_kind is ErrorKind.STREAM_ERROR and "blockReason SAFETY" in record.error_message


def test_fields_of_unexpected_types_fail_as_a_bad_stream():
    record = run([(b'data: {"candidates": [{"content": {"parts": "text"}}]}\r\n\r\n', 0.1)])
    assert record.error_kind is ErrorKind.BAD_STREAM


def test_text_and_answer_parts_for_the_tokenizer_and_a_scenario_answer():
    call = {"functionCall": {"name": "f", "args": {"x": 1}}}
    kept, record = kept_stream("gemini", [data for data, _t in [*THINKING, (event([call]), 0.5)]])
    assert record.ok and kept.text() == 'Let me thinkHello there!f{"x":1}'
    assert kept.answer() == ("Hello there!", "Let me think")


@given(st.lists(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                             lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                                 st.sampled_from(["candidates", "content", "parts", "text", "thought", "functionCall",
                                                  "args", "finishReason", "usageMetadata", "error",
                                                  "promptFeedback", "candidatesTokenCount"]), inner, max_size=4)),
                max_size=6))  # fmt: skip
def test_never_raises_on_any_json(payloads):
    """Any JSON: the parser fails the record at worst; the text readers return text or None."""
    record = RequestRecord(endpoint="gemini", t_send=0.0)
    for t, payload in enumerate(payloads):
        data = json.dumps(payload).encode()
        if gemini_api.apply_event(record, data, float(t)):
            break
    finish(record, 99.0)
    for payload in payloads:
        decoded = orjson.loads(json.dumps(payload)) if abs_ints_fit(payload) else None  # as StreamText decodes it
        if isinstance(decoded, dict):
            assert isinstance(gemini_api.event_text(decoded), str | None)
            assert all(isinstance(part, str | None) for part in gemini_api.event_parts(decoded))


def abs_ints_fit(value: object) -> bool:
    """Every integer in `value` fits orjson's 64 bits (else orjson refuses the text it came in: not an event)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    items = value.values() if isinstance(value, dict) else value
    return all(abs_ints_fit(item) for item in items)  # type: ignore[union-attr]
