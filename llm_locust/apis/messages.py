"""The Anthropic Messages API (`POST /v1/messages`, `stream: true`): user/assistant messages with the system
messages' texts in its `system` field; tools with their parameters as `input_schema`, an agent step as `tool_use` and
`tool_result` blocks; no field forces the output length; and what each stream event means for a `RequestRecord`.

Pure, like `protocol`: one JSON decode per event, never raises. Each event's JSON carries its `type` (the same as
the SSE `event:` line):

- `message_start`: `message.usage.input_tokens` (plus `cache_read_input_tokens` and `cache_creation_input_tokens`,
  all prompt tokens); `message.id`, the server's request id (unless its `x-request-id` header gave one);
- `content_block_delta` whose `delta` is a `text_delta` (non-empty `text`) or an `input_json_delta` (a tool call's
  `partial_json`): output tokens (the first one is TTFO); a `thinking_delta`: reasoning tokens (TTFT and ITL, not
  TTFO); `signature_delta` and `citations_delta`: structure;
- a tool call: `content_block_start` of a `tool_use` block starts it (its `id` and `name`:
  `RequestRecord.tool_calls`), its `input_json_delta`s' `partial_json` make its arguments;
- other `content_block_start`, `content_block_stop`, `ping`: structure only;
- `message_delta`: `delta.stop_reason` (the finish reason) and `usage.output_tokens` (cumulative);
- `message_stop`: the end;
- `error`: a failure — `overloaded` for an `overloaded_error`, `stream_error` for any other type (named in the
  message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from llm_locust.apis.registry import Api, openai_paths
from llm_locust.apis.shapes import ToolForms, prompt_as_messages
from llm_locust.metrics.protocol import (
    TokenChunks,
    add_tool_arguments,
    apply_token,
    decode_object,
    error_text,
    guarded,
    note_request_id,
    start_tool_call,
    token_event,
)
from llm_locust.metrics.record import ErrorKind, RequestRecord, ToolCall

_PROMPT_USAGE = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_DELTA_TEXT = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}
"""The token-bearing deltas of a content block, and the field holding their text."""


def apply_event(record: RequestRecord, data: bytes, t: float, chunks: TokenChunks | None = None) -> bool:
    """Apply one Messages stream event's data that arrived at `t` (perf_counter s) to `record` (`chunks` unused:
    see `protocol.EventStream`); True when the stream is over for the client (`message_stop`, a failure)."""
    event = decode_object(record, data)
    return True if event is None else guarded(_apply, record, event, t)


def _apply(record: RequestRecord, event: dict, t: float) -> bool:
    """`apply_event` on the decoded event; raises on fields of unexpected types."""
    kind = event.get("type")
    if kind == "content_block_delta":
        delta = event["delta"]
        delta_type = delta.get("type")
        field = _DELTA_TEXT.get(delta_type)
        if field is not None and delta[field]:
            (token_event if delta_type == "thinking_delta" else apply_token)(record, t)
            if delta_type == "input_json_delta":
                add_tool_arguments(record, t, str(delta[field]))
        return False
    if kind == "content_block_start":
        block = event["content_block"]
        if block.get("type") == "tool_use":  # its input is `{}`, streamed after; a server that sends it whole here
            given = block.get("input")  # (no input_json_delta then) gives the call's arguments
            arguments = orjson.dumps(given).decode() if given else ""
            start_tool_call(record, t, str(block.get("id") or ""), str(block.get("name") or ""), arguments)
        return False
    if kind == "message_start":
        note_request_id(record, event["message"].get("id"))
        _usage(record, event["message"].get("usage"), output=False)  # its output_tokens is a placeholder
        return False
    if kind == "message_delta":
        stop_reason = event["delta"].get("stop_reason")
        if stop_reason:
            record.finish_reason = str(stop_reason)
        _usage(record, event.get("usage"))
        return False
    if kind == "message_stop":
        record.saw_done = True
        return True
    if kind == "error":
        error = event.get("error") or {}
        error_type = error.get("type") if isinstance(error, dict) else None
        kind_failed = ErrorKind.OVERLOADED if error_type == "overloaded_error" else ErrorKind.STREAM_ERROR
        record.fail(kind_failed, f"error event {error_type or 'without a type'}: {error_text(error)}")
        return True
    return False


def event_text(event: dict) -> str | None:
    """The generated text an event carries (a text, thinking or tool-input delta), else None: what `--tokenizer`
    counts."""
    delta = event.get("delta")
    if event.get("type") != "content_block_delta" or type(delta) is not dict:
        return None
    text = delta.get(_DELTA_TEXT.get(delta.get("type"), ""))
    return text if type(text) is str else None


def event_parts(event: dict) -> tuple[str | None, str | None]:
    """(answer text, reasoning text) of one event: a `text_delta`, a `thinking_delta`."""
    delta = event.get("delta")
    if event.get("type") != "content_block_delta" or type(delta) is not dict:
        return None, None
    kind = delta.get("type")
    text = delta.get("text") if kind == "text_delta" else None
    thinking = delta.get("thinking") if kind == "thinking_delta" else None
    return (text if type(text) is str else None), (thinking if type(thinking) is str else None)


def _usage(record: RequestRecord, usage: dict | None, output: bool = True) -> None:
    """Take an Anthropic `usage` object's token counts onto `record` (prompt: input plus cache reads and writes;
    the output count only when `output`)."""
    if not usage:
        return
    prompt = [usage.get(key) for key in _PROMPT_USAGE]
    if type(prompt[0]) is int:
        record.prompt_tokens = sum(n for n in prompt if type(n) is int and n >= 0)
    output_tokens = usage.get("output_tokens")
    if output and type(output_tokens) is int and output_tokens >= 0:
        record.usage_completion_tokens = output_tokens


def shape(body: dict[str, Any]) -> None:
    """Anthropic Messages: user/assistant messages; the system messages' texts go to the `system` field."""
    prompt_as_messages(body)
    listed = body["messages"]
    system = [m["content"] for m in listed if m.get("role") == "system" and isinstance(m.get("content"), str)]
    body["messages"] = [m for m in listed if m.get("role") != "system"]
    if system:
        body["system"] = "\n".join(system)


def _tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic Messages' `tools`: name, description and the parameters' schema as `input_schema`."""
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]


def _step(content: str, calls: Sequence[ToolCall], results: Sequence[str]) -> list[dict[str, Any]]:
    """Anthropic Messages: an assistant message of a text block (if any) and a `tool_use` block per call (its
    arguments as the `input` object), then a user message of a `tool_result` block per result (`tool_use_id`)."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": orjson.loads(c.arguments or "{}")}
               for c in calls]  # fmt: skip
    answers = [{"type": "tool_result", "tool_use_id": c.id, "content": r} for c, r in zip(calls, results, strict=True)]
    return [{"role": "assistant", "content": blocks}, {"role": "user", "content": answers}]


API = Api(
    "messages", "the Messages API", {**openai_paths("/v1/messages", databricks=False), "anthropic": "/v1/messages"},
    shape, {"stream": True}, forces_length=False, parser=apply_event, event_text=event_text,
    answer_parts=event_parts, tools=ToolForms(_tools, _step), user="MessagesUser", agent_user="MessagesAgentUser",
)  # fmt: skip
