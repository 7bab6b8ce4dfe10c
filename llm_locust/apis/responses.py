"""The OpenAI Responses API (`POST /v1/responses`, `stream: true`): the prompt text, or the messages, as `input`;
tools as function tools with the schema's fields at the top, an agent step as `function_call` and
`function_call_output` input items; a structured output as `text.format`; and what each stream event means for a
`RequestRecord`.

Pure, like `protocol`: one JSON decode per event, never raises. Each event's JSON carries its `type` (the same as
the SSE `event:` line, which is not needed):

- `response.output_text.delta`, `response.refusal.delta`, `response.function_call_arguments.delta` with a
  non-empty `delta`: output tokens (the first one is `t_first_content`, TTFO);
- `response.reasoning_text.delta`, `response.reasoning_summary_text.delta`: reasoning tokens (they count for TTFT
  and ITL, not for TTFO), as reasoning deltas do in chat;
- `response.created`: `response.id`, the server's request id (unless its `x-request-id` header gave one);
- a function call: `response.output_item.added` with an item of type `function_call` starts it (its `call_id` and
  `name`: `RequestRecord.tool_calls`), each `response.function_call_arguments.delta` adds to its arguments,
  `response.function_call_arguments.done` gives them whole;
- `response.in_progress`, other `response.output_item.*`, `response.content_part.*`, other
  `*.done`: structure only;
- `response.completed`: the end; `response.usage` gives `input_tokens`, `output_tokens` and
  `output_tokens_details.reasoning_tokens`;
- `response.incomplete`: the end; stopped by `max_output_tokens` it is a success (finish reason `length`, as
  chat's), for any other reason (e.g. `content_filter`) a `response_incomplete` failure;
- `response.failed`: a `response_failed` failure with `response.error`; `error`: a `stream_error` failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llm_locust.apis.registry import Api, openai_paths
from llm_locust.apis.shapes import SCHEMA_NAME, ToolForms
from llm_locust.metrics.protocol import (
    TokenChunks,
    add_tool_arguments,
    apply_token,
    decode_object,
    error_text,
    guarded,
    note_request_id,
    set_tool_arguments,
    start_tool_call,
    token_event,
)
from llm_locust.metrics.record import ErrorKind, RequestRecord, ToolCall

_CONTENT = frozenset(("response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta"))
_ARGUMENTS_DELTA = "response.function_call_arguments.delta"
_REASONING = frozenset(("response.reasoning_text.delta", "response.reasoning_summary_text.delta"))
_TOKEN_BEARING = _CONTENT | _REASONING


def apply_event(record: RequestRecord, data: bytes, t: float, chunks: TokenChunks | None = None) -> bool:
    """Apply one Responses stream event's data that arrived at `t` (perf_counter s) to `record` (`chunks` unused:
    see `protocol.EventStream`); True when the stream is over for the client (its last event, a failure)."""
    event = decode_object(record, data)
    return True if event is None else guarded(_apply, record, event, t)


def _apply(record: RequestRecord, event: dict, t: float) -> bool:
    """`apply_event` on the decoded event; raises on fields of unexpected types."""
    kind = event.get("type")
    if kind in _CONTENT:
        delta = event["delta"]
        if delta:
            apply_token(record, t)
            if kind == _ARGUMENTS_DELTA:
                add_tool_arguments(record, t, str(delta))
        return False
    if kind == "response.output_item.added":
        item = event["item"]
        if item.get("type") == "function_call":
            start_tool_call(record, t, str(item.get("call_id") or ""), str(item.get("name") or ""),
                            str(item.get("arguments") or ""))  # fmt: skip
        return False
    if kind == "response.function_call_arguments.done":
        set_tool_arguments(record, t, str(event["arguments"]))
        return False
    if kind in _REASONING:
        if event["delta"]:
            token_event(record, t)
        return False
    if kind == "response.created":
        note_request_id(record, event["response"].get("id"))
        return False
    if kind == "response.completed":
        _usage(record, event["response"].get("usage"))
        record.finish_reason = "stop"
        record.saw_done = True
        return True
    if kind == "response.incomplete":
        response = event["response"]
        _usage(record, response.get("usage"))
        reason = (response.get("incomplete_details") or {}).get("reason")
        if reason == "max_output_tokens":
            record.finish_reason = "length"
            record.saw_done = True
        else:
            record.fail(ErrorKind.RESPONSE_INCOMPLETE, f"response.incomplete: {error_text(str(reason))}")
        return True
    if kind == "response.failed":
        error = event["response"].get("error") or "no error given"
        record.fail(ErrorKind.RESPONSE_FAILED, f"response.failed: {error_text(error)}")
        return True
    if kind == "error":
        code = event.get("code")
        record.fail(ErrorKind.STREAM_ERROR, f"error event{f' {code}' if code else ''}: {error_text(event)}")
        return True
    return False


def event_text(event: dict) -> str | None:
    """The generated text an event carries (a content or reasoning delta), else None: what `--tokenizer` counts."""
    delta = event.get("delta")
    return delta if event.get("type") in _TOKEN_BEARING and type(delta) is str else None


_ANSWER_TEXT = frozenset(("response.output_text.delta", "response.refusal.delta"))


def event_parts(event: dict) -> tuple[str | None, str | None]:
    """(answer text, reasoning text) of one event: an output-text or refusal delta, a reasoning delta."""
    delta, kind = event.get("delta"), event.get("type")
    if type(delta) is not str:
        return None, None
    return (delta if kind in _ANSWER_TEXT else None), (delta if kind in _REASONING else None)


def _usage(record: RequestRecord, usage: dict | None) -> None:
    """Take the Responses `usage` object's token counts onto `record`."""
    if not usage:
        return
    output_tokens, input_tokens = usage.get("output_tokens"), usage.get("input_tokens")
    if type(output_tokens) is int and output_tokens >= 0:
        record.usage_completion_tokens = output_tokens
    if type(input_tokens) is int and input_tokens >= 0:
        record.prompt_tokens = input_tokens
    details = usage.get("output_tokens_details")
    if details and type(details.get("reasoning_tokens")) is int:
        record.reasoning_tokens = details["reasoning_tokens"]


def shape(body: dict[str, Any]) -> None:
    """Responses API: the prompt text, or the messages, as `input`."""
    body["input"] = body.pop("prompt") if "prompt" in body else body.pop("messages")


def _tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The Responses API's `tools`: function tools with the schema's fields at the top."""
    return [{"type": "function", **tool} for tool in tools]


def _step(content: str, calls: Sequence[ToolCall], results: Sequence[str]) -> list[dict[str, Any]]:
    """Responses: the answer's text as an assistant message (if any), a `function_call` input item per call, a
    `function_call_output` item per result (by `call_id`)."""
    items: list[dict[str, Any]] = [{"role": "assistant", "content": content}] if content else []
    items += [{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
    items += [
        {"type": "function_call_output", "call_id": c.id, "output": r} for c, r in zip(calls, results, strict=True)
    ]
    return items


def response_format(kind: str, schema: Mapping[str, Any], family: str) -> dict[str, Any]:
    """The Responses API's `text.format`: `{"type": "json_schema", name, schema, strict}` or `{"type":
    "json_object"}`."""
    if kind == "json_object":
        return {"text": {"format": {"type": "json_object"}}}
    return {"text": {"format": {"type": "json_schema", "name": SCHEMA_NAME, "schema": schema, "strict": True}}}


API = Api(
    "responses", "the Responses API", openai_paths("/v1/responses"), shape, {"stream": True},
    max_tokens_field="max_output_tokens", parser=apply_event, event_text=event_text, answer_parts=event_parts,
    tools=ToolForms(_tools, _step), response_format=response_format, user="ResponsesUser",
    agent_user="ResponsesAgentUser",
)  # fmt: skip
