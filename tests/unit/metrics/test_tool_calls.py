"""Streamed tool calls parsed as they arrive, per API, from events shaped as the real APIs send them (OpenAI chat
chunks, OpenAI Responses events, Anthropic Messages events): `RequestRecord.tool_calls`, `t_tool_call`, and the
`tool_call_json` failure of arguments that are not a JSON object."""

import orjson
import pytest

from llm_locust.apis import messages as messages_api
from llm_locust.apis import responses as responses_api
from llm_locust.metrics.protocol import EventStream, apply_event, finish
from llm_locust.metrics.record import ErrorKind, RequestRecord, ToolCall
from llm_locust.metrics.window import WindowMetrics
from llm_locust.results.sections import metric_stats

ARGS = '{"location": "Paris, France", "unit": "celsius"}'
PIECES = ['{"loc', 'ation": "Par', 'is, France", "un', 'it": "celsius"}']


def sse(events, named=False):
    """The SSE body of `events` (dicts; a Responses / Messages event also gets its `event:` line when `named`)."""
    out = b""
    for event in events:
        if isinstance(event, bytes):
            out += b"data: " + event + b"\n\n"
            continue
        head = f"event: {event['type']}\n".encode() if named else b""
        out += head + b"data: " + orjson.dumps(event) + b"\n\n"
    return out


def run(endpoint, parser, events, named=False, t0=1.0, step_s=0.01):
    """Feed `events` one by one (event i arrives at t0 + (i + 1) * step_s) to a record sent at t0; the finished
    record."""
    record = RequestRecord(endpoint, t_send=t0)
    stream = EventStream(record, parser)
    for i, event in enumerate(events):
        if stream.feed(sse([event], named), t0 + (i + 1) * step_s):
            break
    return finish(record, t0 + 1.0)


def chat_chunk(delta, finish_reason=None):
    return {"id": "chatcmpl-9x", "object": "chat.completion.chunk", "created": 1732550000, "model": "gpt-4o",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}  # fmt: skip


def chat_events(calls):
    """A chat stream answering with `calls` [(id, name, argument pieces)], as OpenAI sends it: the first delta of
    a call has its index, id, type and name with empty arguments, then argument pieces by index."""
    events = [chat_chunk({"role": "assistant", "content": None, "refusal": None})]
    for index, (call_id, name, pieces) in enumerate(calls):
        first = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        events.append(chat_chunk({"tool_calls": [first]}))
        events += [chat_chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]}) for p in pieces]
    events.append(chat_chunk({}, "tool_calls"))
    events.append({"id": "chatcmpl-9x", "object": "chat.completion.chunk", "choices": [],
                   "usage": {"prompt_tokens": 80, "completion_tokens": 20, "total_tokens": 100}})  # fmt: skip
    events.append(b"[DONE]")
    return events


def test_chat_tool_calls_by_index_arguments_concatenated():
    events = chat_events([("call_a", "get_weather", PIECES), ("call_b", "get_time", ['{"tz":', ' "UTC"}'])])
    r = run("chat", apply_event, events)
    assert r.ok and r.finish_reason == "tool_calls"
    assert r.tool_calls == (ToolCall("call_a", "get_weather", ARGS), ToolCall("call_b", "get_time", '{"tz": "UTC"}'))
    last_part = 1.0 + (len(events) - 3) * 0.01  # the last argument piece: before the finish chunk, usage and [DONE]
    assert r.t_tool_call == pytest.approx(last_part)
    assert r.tool_call_s == pytest.approx(last_part - 1.0)
    assert r.t_first == pytest.approx(1.02)  # the first tool-call delta is the first token (TTFT)


def test_chat_without_tools_has_no_tool_call():
    events = [chat_chunk({"role": "assistant", "content": ""}), chat_chunk({"content": "Hi"}), chat_chunk({}, "stop"),
              b"[DONE]"]  # fmt: skip
    r = run("chat", apply_event, events)
    assert r.ok and r.tool_calls == () and r.t_tool_call is None and r.tool_call_s is None


@pytest.mark.parametrize("bad", ['{"location": "Par', '["Paris"]', "Paris"])
def test_chat_malformed_arguments_fail_as_tool_call_json(bad):
    r = run("chat", apply_event, chat_events([("call_a", "get_weather", [bad[:3], bad[3:]])]))
    assert r.error_kind is ErrorKind.TOOL_CALL_JSON
    assert "call_a" in r.error_message and "get_weather" in r.error_message
    assert r.tool_calls[0].arguments == bad  # kept as streamed


def test_chat_tool_call_pieces_split_mid_event_and_coalesced():
    """The whole body in pieces cut anywhere: the same tool calls as event by event."""
    events = chat_events([("call_a", "get_weather", PIECES)])
    body = sse(events)
    record = RequestRecord("chat", t_send=0.0)
    stream = EventStream(record, apply_event)
    for i in range(0, len(body), 7):
        if stream.feed(body[i : i + 7], 0.001 * i):
            break
    finish(record, 1.0)
    assert record.ok and record.tool_calls == (ToolCall("call_a", "get_weather", ARGS),)


def responses_events(calls, done_arguments=None):
    """A Responses stream answering with `calls` [(call id, name, pieces)], as OpenAI sends it: output_item.added
    (a function_call item with its call_id and name), argument deltas, arguments.done, output_item.done."""
    events = [{"type": "response.created", "sequence_number": 0,
               "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}]  # fmt: skip
    seq = 1
    for index, (call_id, name, pieces) in enumerate(calls):
        item = {"id": f"fc_{index}", "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": call_id, "name": name}  # fmt: skip
        events.append({"type": "response.output_item.added", "sequence_number": seq, "output_index": index,
                       "item": item})  # fmt: skip
        for piece in pieces:
            seq += 1
            events.append({"type": "response.function_call_arguments.delta", "sequence_number": seq,
                           "item_id": f"fc_{index}", "output_index": index, "delta": piece})  # fmt: skip
        whole = "".join(pieces) if done_arguments is None else done_arguments
        events.append({"type": "response.function_call_arguments.done", "sequence_number": seq + 1,
                       "item_id": f"fc_{index}", "output_index": index, "arguments": whole})  # fmt: skip
        events.append({"type": "response.output_item.done", "sequence_number": seq + 2, "output_index": index,
                       "item": {**item, "status": "completed", "arguments": whole}})  # fmt: skip
        seq += 3
    events.append({"type": "response.completed", "sequence_number": seq, "response": {
        "id": "resp_1", "status": "completed", "usage": {"input_tokens": 80, "output_tokens": 20}}})  # fmt: skip
    return events


def test_responses_function_call_arguments_with_the_items_call_id_and_name():
    events = responses_events([("call_a", "get_weather", PIECES), ("call_b", "get_time", ['{"tz": "UTC"}'])])
    r = run("responses", responses_api.apply_event, events, named=True)
    assert r.ok and r.usage_completion_tokens == 20
    assert r.tool_calls == (ToolCall("call_a", "get_weather", ARGS), ToolCall("call_b", "get_time", '{"tz": "UTC"}'))
    done_index = len(events) - 3  # the second call's arguments.done (then output_item.done, completed)
    assert r.t_tool_call == pytest.approx(1.0 + (done_index + 1) * 0.01)


def test_responses_malformed_arguments_fail_as_tool_call_json():
    events = responses_events([("call_a", "get_weather", ['{"location": ', '"Par'])])
    r = run("responses", responses_api.apply_event, events)
    assert r.error_kind is ErrorKind.TOOL_CALL_JSON and r.tool_calls[0].arguments == '{"location": "Par'


def test_responses_done_arguments_are_the_calls_arguments():
    events = responses_events([("c", "f", ['{"a"'])], done_arguments='{"a": 1}')
    r = run("responses", responses_api.apply_event, events)
    assert r.ok and r.tool_calls == (ToolCall("c", "f", '{"a": 1}'),)


def messages_events(calls, text="Let me check."):
    """A Messages stream: a text block, then a tool_use block per call [(id, name, partial_json pieces)], as
    Anthropic sends it (the first input_json_delta is empty)."""
    events = [{"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
               "content": [], "model": "claude-sonnet-4-5", "stop_reason": None,
               "usage": {"input_tokens": 80, "output_tokens": 1}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
              {"type": "content_block_stop", "index": 0}]  # fmt: skip
    for offset, (call_id, name, pieces) in enumerate(calls):
        index = offset + 1
        events.append({"type": "content_block_start", "index": index,
                       "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}})  # fmt: skip
        for piece in ["", *pieces]:
            events.append({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": piece}})  # fmt: skip
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                   "usage": {"output_tokens": 20}})  # fmt: skip
    events.append({"type": "message_stop"})
    return events


def test_messages_tool_use_blocks_and_input_json_deltas():
    events = messages_events([("toolu_01", "get_weather", PIECES), ("toolu_02", "get_time", ['{"tz": "UTC"}'])])
    r = run("messages", messages_api.apply_event, events, named=True)
    assert r.ok and r.finish_reason == "tool_use"
    time_call = ToolCall("toolu_02", "get_time", '{"tz": "UTC"}')
    assert r.tool_calls == (ToolCall("toolu_01", "get_weather", ARGS), time_call)
    last_delta = len(events) - 4  # the last input_json_delta (then block stop, message_delta, message_stop)
    assert r.t_tool_call == pytest.approx(1.0 + (last_delta + 1) * 0.01)
    assert r.t_first == pytest.approx(1.03)  # the text block's delta came first


def test_messages_tool_use_without_input_is_a_call_without_arguments():
    r = run("messages", messages_api.apply_event, messages_events([("toolu_01", "list_files", [])]))
    assert r.ok and r.tool_calls == (ToolCall("toolu_01", "list_files", ""),)


def test_messages_tool_use_given_whole_in_its_start():
    events = messages_events([("toolu_01", "get_weather", [])])
    events[4]["content_block"]["input"] = {"location": "Paris"}  # no input_json_delta follows
    r = run("messages", messages_api.apply_event, events)
    assert r.ok and r.tool_calls == (ToolCall("toolu_01", "get_weather", '{"location":"Paris"}'),)


def test_messages_malformed_input_fails_as_tool_call_json():
    r = run("messages", messages_api.apply_event, messages_events([("toolu_01", "f", ['{"a": 1}}'])]))
    assert r.error_kind is ErrorKind.TOOL_CALL_JSON


def test_an_earlier_failure_wins_over_the_tool_call_check():
    events = chat_events([("call_a", "f", ['{"a'])])[:-1]  # no [DONE] ...
    events[-2] = chat_chunk({})  # ... and no finish_reason: the stream is incomplete
    r = run("chat", apply_event, events)
    assert r.error_kind is ErrorKind.INCOMPLETE


def test_time_to_tool_call_is_recorded_for_answers_with_a_tool_call_only():
    window = WindowMetrics()
    with_call = run("chat", apply_event, chat_events([("call_a", "get_weather", PIECES)]))
    without = run("chat", apply_event, [chat_chunk({"content": "Hi"}), chat_chunk({}, "stop"), b"[DONE]"])
    malformed = run("chat", apply_event, chat_events([("call_b", "f", ['{"a'])]))
    for record in (with_call, without, malformed):
        window.add(record)
    stats = metric_stats(window)["tool_call_ms"]
    assert stats["count"] == 1 and stats["max"] == pytest.approx(with_call.tool_call_s * 1e3, rel=1e-3)
    assert window.failures == {"tool_call_json": 1}
