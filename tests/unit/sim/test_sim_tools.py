"""The simulator's tool calls over real loopback sockets: each API's stream read back by a plain SSE reader, the
non-streamed bodies, the history a request carries, the rates, malformed arguments — all against /sim/trace."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
from openai import OpenAI

from llm_locust.sim import SimProcess, run_sim

TTFT_MS = 30.0
ITL_MS = 6.0
MODEL = "llm-locust-sim"
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
}
TOOLS = {  # each API's format of the same two tools
    "chat": [
        {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}},
        {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}},
    ],
    "responses": [
        {"type": "function", "name": "get_weather", "parameters": SCHEMA},
        {"type": "function", "name": "search", "parameters": {"type": "object"}},
    ],
    "messages": [{"name": "get_weather", "input_schema": SCHEMA}, {"name": "search", "input_schema": {}}],
}
REQUIRED = {  # each API's tool choices requiring a call: any tool, then the tool "search"
    "chat": ("required", {"type": "function", "function": {"name": "search"}}),
    "responses": ("required", {"type": "function", "name": "search"}),
    "messages": ({"type": "any"}, {"type": "tool", "name": "search"}),
}
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def request_body(api: str, stream: bool = True, history: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A request of `api` offering TOOLS, whose conversation is `history` (default: one user message)."""
    turns = history or [{"role": "user", "content": "what is the weather in paris"}]
    body: dict[str, Any] = {"model": MODEL, "stream": stream, "tools": TOOLS[api], **extra}
    if api == "chat":
        body |= {"messages": turns, "stream_options": {"include_usage": True}}
    elif api == "responses":
        body["input"] = turns
    else:
        body |= {"messages": turns, "max_tokens": body.get("max_tokens", 200)}
    return body


def post(sim: SimProcess, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def metrics_text(sim: SimProcess) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def sse(payload: bytes) -> list[tuple[str | None, Any]]:
    """A plain SSE reader: every event's (`event:` name or None, decoded `data:`; "[DONE]" kept as a string)."""
    events = []
    for block in payload.decode().split("\n\n"):
        if not block:
            continue
        name, data = None, None
        for line in block.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "data":
                data = value if value == "[DONE]" else json.loads(value)
        events.append((name, data))
    return events


def stream_call(api: str, events: list[tuple[str | None, Any]]) -> tuple[str, str, list[str], str, int]:
    """From one API's streamed events: the call's (id, name, argument pieces in order, finish reason, usage's output
    tokens), each read where that API puts it; asserts the events around the pieces are that API's."""
    data = [d for _, d in events]
    if api == "chat":
        assert data[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert data[-1] == "[DONE]" and data[-2]["choices"] == []
        chunks = data[1:-2]
        calls = [chunk["choices"][0]["delta"]["tool_calls"] for chunk in chunks]
        assert all(len(c) == 1 and c[0]["index"] == 0 for c in calls)
        first = calls[0][0]
        assert first["type"] == "function" and all("id" not in c[0] for c in calls[1:])
        finishes = [chunk["choices"][0]["finish_reason"] for chunk in chunks]
        assert finishes[:-1] == [None] * (len(chunks) - 1)
        pieces = [c[0]["function"]["arguments"] for c in calls]
        return first["id"], first["function"]["name"], pieces, finishes[-1], data[-2]["usage"]["completion_tokens"]
    names = [name for name, _ in events]
    assert all(name == d["type"] for name, d in events)
    if api == "responses":
        assert names[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
        item = data[2]["item"]
        assert item["type"] == "function_call" and item["arguments"] == "" and item["status"] == "in_progress"
        deltas = data[3:-3]
        assert {d["type"] for d in deltas} == {"response.function_call_arguments.delta"}
        assert all(d["item_id"] == item["id"] for d in deltas)
        assert names[-3:] == ["response.function_call_arguments.done", "response.output_item.done",
                              "response.completed"]  # fmt: skip
        pieces = [d["delta"] for d in deltas]
        assert data[-3]["arguments"] == data[-2]["item"]["arguments"] == "".join(pieces)
        numbers = [d["sequence_number"] for d in data]  # consecutive, but for skips over --tokens-per-chunk groups
        assert numbers[:4] == [0, 1, 2, 3] and all(a < b for a, b in pairwise(numbers))
        completed = data[-1]["response"]
        assert completed["output"] == [data[-2]["item"]] and completed["status"] == "completed"
        return item["call_id"], item["name"], pieces, "tool_calls", completed["usage"]["output_tokens"]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    block = data[1]["content_block"]
    assert block["type"] == "tool_use" and block["input"] == {}
    deltas = data[3:-3]
    assert {d["delta"]["type"] for d in deltas} == {"input_json_delta"}
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    finish = {"tool_use": "tool_calls", "max_tokens": "length"}[data[-2]["delta"]["stop_reason"]]
    return (
        block["id"],
        block["name"],
        [d["delta"]["partial_json"] for d in deltas],
        finish,
        data[-2]["usage"]["output_tokens"],
    )


def trace_of(sim: SimProcess, response_id: str) -> dict[str, Any]:
    (record,) = [r for r in sim.trace() if r["id"] == response_id]
    return record


def response_id(api: str, events: list[tuple[str | None, Any]]) -> str:
    first = events[0][1]
    return first["id"] if api == "chat" else first["response"]["id"] if api == "responses" else first["message"]["id"]


@pytest.fixture(scope="module")
def tool_sim() -> Iterator[SimProcess]:
    with run_sim("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--tool-call-rate", "1") as sim:
        yield sim


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_streamed_tool_call_reassembles_to_the_traces_call(tool_sim: SimProcess, api: str) -> None:
    status, payload = post(tool_sim, PATHS[api], request_body(api))
    assert status == 200
    events = sse(payload)
    call_id, name, pieces, finish, usage_tokens = stream_call(api, events)
    record = trace_of(tool_sim, response_id(api, events))
    arguments = json.loads("".join(pieces))
    assert isinstance(arguments, dict)
    assert record["tool_call"] == {"id": call_id, "name": name, "arguments": "".join(pieces), "malformed": False}
    assert name in ("get_weather", "search") and record["tools"] == 2
    if name == "get_weather":  # built from the schema's properties and types
        assert set(arguments) == {"city", "days", "metric"}
        assert isinstance(arguments["city"], str) and isinstance(arguments["days"], int)
    assert len(pieces) >= 3 and all(pieces)  # split over several events
    assert usage_tokens == record["completion_tokens"] == len(pieces) == len(record["token_times"])
    assert record["finish_reason"] == finish == "tool_calls"
    # each piece is a token event of the fixed timing model, written at (never before) its due time: TTFT + i x ITL
    for i, t in enumerate(record["token_times"]):
        due_s = (TTFT_MS + i * ITL_MS) / 1e3
        assert due_s - 1e-4 <= t - record["t_recv"] < due_s + 0.5


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_non_streamed_tool_call_equals_the_traces_call(tool_sim: SimProcess, api: str) -> None:
    status, payload = post(tool_sim, PATHS[api], request_body(api, stream=False))
    assert status == 200
    body = json.loads(payload)
    record = trace_of(tool_sim, body["id"])
    call = record["tool_call"]
    if api == "chat":
        choice = body["choices"][0]
        assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
        (sent,) = choice["message"]["tool_calls"]
        assert (sent["id"], sent["function"]["name"], sent["function"]["arguments"]) == (
            call["id"], call["name"], call["arguments"])  # fmt: skip
        tokens = body["usage"]["completion_tokens"]
    elif api == "responses":
        (item,) = body["output"]
        assert item["type"] == "function_call" and body["status"] == "completed"
        assert (item["call_id"], item["name"], item["arguments"]) == (call["id"], call["name"], call["arguments"])
        tokens = body["usage"]["output_tokens"]
    else:
        (block,) = body["content"]
        assert body["stop_reason"] == "tool_use" and block["type"] == "tool_use"
        assert (block["id"], block["name"], block["input"]) == (call["id"], call["name"], json.loads(call["arguments"]))
        tokens = body["usage"]["output_tokens"]
    assert tokens == record["completion_tokens"] == len(call["arguments"].split())


def test_a_small_maximum_cuts_the_call_short(tool_sim: SimProcess) -> None:
    status, payload = post(tool_sim, PATHS["chat"], request_body("chat", max_tokens=2))
    events = sse(payload)
    _, _, pieces, finish, usage_tokens = stream_call("chat", events)
    record = trace_of(tool_sim, response_id("chat", events))
    assert (status, finish, record["finish_reason"], len(pieces), usage_tokens) == (200, "length", "length", 2, 2)
    assert record["tool_call"]["arguments"] == "".join(pieces)


def history(api: str, call_id: str, arguments: str, result: str) -> list[Any]:
    """A conversation in `api`'s format: a user message, the assistant's tool call, its result, a user message."""
    user = {"role": "user", "content": "what is the weather in paris"}
    if api == "chat":
        call = {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
        return [user, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call_id, "content": result}, user]  # fmt: skip
    if api == "responses":
        call = {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": arguments}
        return [user, call, {"type": "function_call_output", "call_id": call_id, "output": result}, user]
    use = {"type": "tool_use", "id": call_id, "name": "get_weather", "input": json.loads(arguments)}
    back = {"type": "tool_result", "tool_use_id": call_id, "content": [{"type": "text", "text": result}]}
    return [user, {"role": "assistant", "content": [use]}, {"role": "user", "content": [back]}, user]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_trace_names_the_calls_and_results_a_request_carries_back(tool_sim: SimProcess, api: str) -> None:
    first_events = sse(post(tool_sim, PATHS[api], request_body(api))[1])
    call_id, _, pieces, _, _ = stream_call(api, first_events)
    first = trace_of(tool_sim, response_id(api, first_events))
    assert (first["carried_tool_calls"], first["carried_tool_results"], first["messages"]) == ([], [], 1)
    arguments, result = "".join(pieces), "sunny and twenty one degrees"
    second_events = sse(
        post(tool_sim, PATHS[api], request_body(api, history=history(api, call_id, arguments, result)))[1]
    )
    second = trace_of(tool_sim, response_id(api, second_events))
    assert (second["carried_tool_calls"], second["carried_tool_results"], second["messages"]) == (
        [call_id], [call_id], 4)  # fmt: skip
    # the prompt counts the call's arguments and its result as words, like any text: the call's output tokens
    assert second["prompt_tokens"] == 2 * first["prompt_tokens"] + first["completion_tokens"] + len(result.split())


def test_rate_zero_answers_with_text() -> None:
    with run_sim("--ttft-ms", "1", "--itl-ms", "1", "--output-tokens", "3") as sim:
        for api in PATHS:
            status, payload = post(sim, PATHS[api], request_body(api, stream=False))
            assert status == 200
            record = trace_of(sim, json.loads(payload)["id"])
            assert (record["tool_call"], record["tools"], record["finish_reason"]) == (None, 2, "stop")
            # a tool choice that requires a call gets one whatever the rate; naming a tool, of that tool
            names = []
            for choice in REQUIRED[api]:
                status, payload = post(sim, PATHS[api], request_body(api, stream=False, tool_choice=choice))
                record = trace_of(sim, json.loads(payload)["id"])
                assert status == 200 and record["finish_reason"] == "tool_calls"
                names.append(record["tool_call"]["name"])
            assert names[0] in ("get_weather", "search") and names[1] == "search"
        assert "llm_locust_sim:tool_calls_total" in metrics_text(sim)


def test_tool_choice_none_answers_with_text_and_a_bad_one_is_a_400(tool_sim: SimProcess) -> None:
    for api, none in (("chat", "none"), ("responses", "none"), ("messages", {"type": "none"})):
        status, payload = post(tool_sim, PATHS[api], request_body(api, stream=False, tool_choice=none))
        assert status == 200
        assert trace_of(tool_sim, json.loads(payload)["id"])["tool_call"] is None
    for api, choice, message in (
        ("chat", "sometimes", "'tool_choice' \"sometimes\" is not one this API accepts"),
        ("messages", "auto", "'tool_choice' \"auto\" is not one this API accepts"),
        ("responses", {"type": "function", "name": "fly"}, "names the tool 'fly', which is not among the request's"),
    ):
        status, payload = post(tool_sim, PATHS[api], request_body(api, tool_choice=choice))
        assert status == 400 and message in json.loads(payload)["error"]["message"]


def test_rates_are_drawn_per_request_and_counted_on_metrics() -> None:
    with run_sim("--ttft-ms", "1", "--itl-ms", "1", "--output-tokens", "3", "--tool-call-rate", "0.5",
                 "--tool-call-malformed-rate", "0.5", "--tool-call-seed", "7") as sim:  # fmt: skip
        for i in range(120):
            assert post(sim, PATHS["chat"], request_body("chat", stream=i % 2 == 0))[0] == 200
        post(sim, PATHS["chat"], {"model": MODEL, "messages": [{"role": "user", "content": "no tools"}]})
        records = sim.trace()
        metrics = metrics_text(sim)
    calls = [r["tool_call"] for r in records if r["tool_call"] is not None]
    malformed = [c for c in calls if c["malformed"]]
    assert 120 * 0.5 - 4 * 5.5 <= len(calls) <= 120 * 0.5 + 4 * 5.5  # binomial(120, 0.5) within 4 sigma
    assert 0 < len(malformed) < len(calls)
    for call in calls:
        if call["malformed"]:
            with pytest.raises(json.JSONDecodeError):
                json.loads(call["arguments"])
        else:
            assert isinstance(json.loads(call["arguments"]), dict)
    assert records[-1]["tools"] == 0 and records[-1]["tool_call"] is None
    assert f'llm_locust_sim:tool_calls_total{{model_name="{MODEL}"}} {len(calls)}' in metrics
    assert f'llm_locust_sim:tool_calls_malformed_total{{model_name="{MODEL}"}} {len(malformed)}' in metrics


def test_malformed_streamed_arguments_are_not_json() -> None:
    with run_sim("--ttft-ms", "1", "--itl-ms", "1", "--tool-call-rate", "1", "--tool-call-malformed-rate", "1") as sim:
        for api in PATHS:
            events = sse(post(sim, PATHS[api], request_body(api))[1])
            _, _, pieces, _, _ = stream_call(api, events)
            assert trace_of(sim, response_id(api, events))["tool_call"]["malformed"] is True
            with pytest.raises(json.JSONDecodeError):
                json.loads("".join(pieces))


def test_bad_tools_are_a_400_naming_them(tool_sim: SimProcess) -> None:
    body = request_body("chat") | {"tools": [{"type": "function", "function": {"parameters": SCHEMA}}]}
    status, payload = post(tool_sim, PATHS["chat"], body)
    assert status == 400 and "each function tool needs a non-empty 'name'" in json.loads(payload)["error"]["message"]
    status, payload = post(tool_sim, PATHS["chat"], request_body("chat") | {"tools": "get_weather"})
    assert status == 400 and "'tools' must be a list of objects" in json.loads(payload)["error"]["message"]


def test_a_rate_outside_zero_one_is_a_one_line_error() -> None:
    command = [sys.executable, "-m", "llm_locust.cli", "sim", "--port", "0", "--tool-call-rate", "1.5"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "llm-locust sim: error: --tool-call-rate must be a probability in [0, 1], got 1.5"
    ]


def test_tokens_per_chunk_groups_the_pieces_as_it_groups_text_tokens() -> None:
    with run_sim("--ttft-ms", "1", "--itl-ms", "1", "--tool-call-rate", "1", "--tokens-per-chunk", "3") as sim:
        for api in PATHS:
            events = sse(post(sim, PATHS[api], request_body(api))[1])
            _, _, pieces, finish, usage_tokens = stream_call(api, events)
            record = trace_of(sim, response_id(api, events))
            assert "".join(pieces) == record["tool_call"]["arguments"] and finish == "tool_calls"
            # the first piece alone, then 3 per event; usage still counts every piece
            assert len(pieces[0].split()) == 1 and all(len(p.split()) <= 3 for p in pieces[1:])
            assert usage_tokens == record["completion_tokens"] == len("".join(pieces).split())
            assert len(pieces) == 1 + -(-(usage_tokens - 1) // 3)


def test_openai_pythons_stream_helpers_read_the_calls(tool_sim: SimProcess) -> None:
    """openai-python's own accumulators (chat `stream`, Responses `stream`) rebuild the calls the trace recorded."""
    client = OpenAI(base_url=f"{tool_sim.url}/v1", api_key="unused", max_retries=0, timeout=10)
    user = [{"role": "user", "content": "what is the weather in paris"}]
    with client.chat.completions.stream(model=MODEL, messages=user, tools=TOOLS["chat"]) as stream:  # type: ignore[arg-type]
        for _ in stream:
            pass
        completion = stream.get_final_completion()
    (call,) = completion.choices[0].message.tool_calls or []
    assert completion.choices[0].finish_reason == "tool_calls"
    traced = trace_of(tool_sim, completion.id)["tool_call"]
    assert (call.id, call.function.name, call.function.arguments) == (traced["id"], traced["name"], traced["arguments"])
    with client.responses.stream(model=MODEL, input=user, tools=TOOLS["responses"]) as stream:  # type: ignore[arg-type]
        for _ in stream:
            pass
        response = stream.get_final_response()
    (item,) = response.output
    traced = trace_of(tool_sim, response.id)["tool_call"]
    assert item.type == "function_call"
    assert (item.call_id, item.name, item.arguments) == (traced["id"], traced["name"], traced["arguments"])
    assert response.usage is not None and response.usage.output_tokens == len(traced["arguments"].split())
